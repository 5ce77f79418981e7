"""The runner: an FX GraphModule whose nodes are kernel calls and ATen fallbacks, in order.

FX prints it as plain Python (`runner.code`), frees each value right after its last use
(`x = None`), and calls it with no interpretation overhead. A kernel call allocates its
outputs with the strides eager would give them (from the FakeTensors), passes data
pointers to the compiled C function through ctypes (which releases the GIL), and returns
the outputs.
"""
from __future__ import annotations

import ctypes
import operator
import threading
from dataclasses import dataclass

import networkx as nx
import sympy
import torch
import torch.fx
from torch.autograd import profiler as autograd_profiler

from brrr_compiler.log import fallback
from brrr_compiler.runtime import inplace
from brrr_compiler.runtime.fast_aten import fast_target
from brrr_compiler.runtime.meta_check import checker, first_call_checked, spec_of
from brrr_compiler.runtime.profiling import ProfiledRunner
from brrr_compiler.runtime.reinterpret import as_reinterpret, reinterpret
from brrr_compiler.runtime.segments import allocator as _allocator, segment
from brrr_compiler.symbolic import size_sources


@dataclass
class CompiledKernel:
    group_id: int
    name: str
    fn: object                   # ctypes function
    input_names: list[str]       # FX node names of the kernel's inputs, in argument order
    out_specs: list[tuple]       # (shape, stride, dtype) per output; sympy sizes
    size_vars: list = None       # sympy symbols passed after the buffers
    take_error: object = None    # for kernels with indirect loads: reads the error flag
    device: object = None        # where outputs are allocated (None: the CPU)
    tensor_args: bool = False    # fn takes tensors (a Triton launcher), not data pointers


class IndexOutOfBounds(IndexError, RuntimeError):
    """Raised like eager's gather/nll_loss errors (RuntimeError / IndexError)."""


def bind(lib: ctypes.CDLL, name: str, nbuffers: int, nsizes: int = 0):
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nbuffers + [ctypes.c_int64] * nsizes
    fn.restype = None
    return fn


def _static_specs(specs):
    try:
        return [(tuple(int(x) for x in sh), tuple(int(x) for x in st), dt) for sh, st, dt in specs]
    except TypeError:
        return None


def make_call(kernel: CompiledKernel, offsets=(), into=()):
    """A Python function running one kernel: inputs (then sizes) in, new outputs out.
    `offsets`: bytes to add to each input's data pointer (an input passed as the tensor
    it is a view of; see _kernel_call). `into`: indices of outputs stored into tensors
    passed after the inputs instead of new ones (inplace.py; static sizes only)."""
    fn, nin = kernel.fn, len(kernel.input_names)
    empty, device = torch.empty_strided, kernel.device
    ptr = (lambda t: t) if kernel.tensor_args else torch.Tensor.data_ptr
    pointers = _input_pointers(ptr, tuple(offsets))
    static = _static_specs(kernel.out_specs)
    if into:
        call = inplace.into_call(fn, ptr, pointers, _allocator(device), static, nin, tuple(into))
    elif static is not None and not kernel.size_vars and len(static) == 1 and not any(offsets):
        call = _one_output_call(fn, ptr, _allocator(device), *static[0])
    elif static is not None and not kernel.size_vars:
        alloc = _allocator(device)

        def call(*inputs):
            outs = [alloc(shape, stride, dtype) for shape, stride, dtype in static]
            fn(*pointers(inputs), *map(ptr, outs))
            return outs
    else:
        layout = sympy.lambdify(kernel.size_vars or [], [[list(sh), list(st)] for sh, st, _ in
                                                         kernel.out_specs], modules=[{}])
        dtypes = [dt for _, _, dt in kernel.out_specs]

        def call(*args):
            inputs, sizes = args[:nin], [int(s) for s in args[nin:]]
            outs = [empty([int(x) for x in sh], [int(x) for x in st], dtype=dt, device=device)
                    for (sh, st), dt in zip(layout(*sizes), dtypes)]
            fn(*pointers(inputs), *[ptr(o) for o in outs], *sizes)
            return outs

    if kernel.take_error is not None:
        call = _checked(call, kernel.take_error, kernel.name)
    call.__name__ = call.__qualname__ = kernel.name
    call.__module__ = "brrr"
    # what the profiled runner and the runnable dump need to know about this call
    call.brrr_kernel, call.brrr_offsets, call.brrr_into = kernel, tuple(offsets), tuple(into)
    return call


def _one_output_call(fn, ptr, alloc, shape, stride, dtype):
    """The common kernel call, one output and no offsets, with no Python frame but its
    own (a list comprehension and a lambda cost as much as the allocation)."""
    def call(*inputs):
        out = alloc(shape, stride, dtype)
        fn(*map(ptr, inputs), ptr(out))
        return (out,)
    return call


def _input_pointers(ptr, offsets: tuple):
    if not any(offsets):
        return lambda inputs: map(ptr, inputs)
    return lambda inputs: [ptr(t) + off for t, off in zip(inputs, offsets)]


# The error flag is one per library: a kernel call and the read of its flag must not
# interleave with another thread's (the ctypes call releases the GIL).
_flag_locks: dict[int, threading.Lock] = {}
_flag_locks_lock = threading.Lock()


def _checked(call, take_error, name):
    with _flag_locks_lock:
        lock = _flag_locks.setdefault(id(take_error), threading.Lock())

    def checked(*args):
        with lock:
            outs = call(*args)
            failed = take_error()
        if failed:
            raise IndexOutOfBounds(f"brrr: index out of bounds in {name} (an index or target "
                                   "outside the indexed dimension; eager raises here too)")
        return outs
    return checked


def _units(plan, compiled: dict[int, CompiledKernel]):
    """Steps to run: ('group', Group) for built kernels, ('node', Node) for ATen."""
    grouped = {n: g for g in plan.groups if g.id in compiled for n in g.nodes}
    order = {n: i for i, n in enumerate(plan.graph.graph.nodes)}
    dag = nx.DiGraph()
    unit_of = {}
    for n in plan.graph.graph.nodes:
        unit = ("group", grouped[n].id) if n in grouped else ("node", n.name)
        unit_of[n] = unit
        dag.add_node(unit, first=min(order[n], dag.nodes[unit]["first"]) if unit in dag else order[n])
    for n in plan.graph.graph.nodes:
        for a in n.all_input_nodes:
            if unit_of[a] != unit_of[n]:
                dag.add_edge(unit_of[a], unit_of[n])
    return dag, grouped


def _acyclic(plan, compiled: dict[int, CompiledKernel],
             strict: bool = False) -> tuple[dict, nx.DiGraph, dict]:
    """`compiled` less the kernels that would wait on each other, and its `_units`: a
    group whose nodes are not connected inside it can feed, through ATen calls, another
    that feeds it. The groups on such a cycle run through ATen instead (a partitioning
    miss, never a crash; under `strict`, an error)."""
    compiled = dict(compiled)
    while True:
        dag, grouped = _units(plan, compiled)
        # one topological sort; networkx's find_cycle restarts its walk from every source
        # (each weight of a 64-block chain), re-walking shared descendants: 0.1 s there
        if nx.is_directed_acyclic_graph(dag):
            return compiled, dag, grouped
        cycle = nx.find_cycle(dag)
        dropped = sorted({key for edge in cycle for kind, key in edge[:2] if kind == "group"})
        for gid in dropped:
            names = compiled.pop(gid).name
            fallback(f"cycle-{names}", f"brrr: kernel {names} is on a cycle with other "
                                       "kernels through ATen calls; its ops run through ATen "
                                       "instead", strict)


def kernels_run(plan, compiled: dict[int, CompiledKernel]) -> dict[int, CompiledKernel]:
    """The kernels build_runner calls: `compiled` less those on a cycle (_acyclic)."""
    return _acyclic(plan, compiled)[0]


def build_runner(plan, compiled: dict[int, CompiledKernel],
                 check: bool = False, strict: bool = False) -> torch.fx.GraphModule:
    """The FX program for `plan`, with groups in `compiled` replaced by kernel calls.
    `check`: the first call's runner, which checks the tensors kernels read from ATen
    against their FakeTensors (meta_check.py); its findings go to `runner.found`.
    `strict`: a kernel dropped from a cycle is an error (Config.strict)."""
    src = plan.graph.graph
    by_name = {n.name: n for n in src.nodes}
    groups = {g.id: g for g in plan.groups}
    compiled, dag, grouped = _acyclic(plan, compiled, strict)
    in_place = inplace.plan(src, groups, compiled, grouped, dag)
    units = nx.lexicographical_topological_sort(dag, key=lambda u: dag.nodes[u]["first"])
    sources = size_sources(src)
    graph, env = torch.fx.Graph(), {}

    def is_aten(n):
        return n not in grouped

    found: list = []
    read = _assumed_layouts(plan, compiled, grouped) if check else set()
    expect = checker(found, {n.name: spec_of(n.meta["val"]) for n in read}) if check else None
    for kind, key in units:
        if kind == "node" and by_name[key] in in_place:      # stored by its kernel
            env[by_name[key]] = env[in_place[by_name[key]][0]]
        elif kind == "node":
            node = by_name[key]
            env[node] = _aten_call(graph, node, env, is_aten)
            if node in read:
                env[node] = _expect(graph, node, env[node], expect)
        else:
            into = {j: env[x] for x, gid, j in in_place.values() if gid == key}
            env.update(_kernel_call(graph, env, compiled[key], groups[key].outputs, by_name,
                                    sources, is_aten, into))
    _erase_unused_reinterprets(graph)
    # boxed code: forward(self, args) unpacks and clears the list, so each input is
    # freed at its last use instead of living for the whole call (peak memory)
    graph.set_codegen(torch.fx.graph._BoxedCodeGen())
    runner = torch.fx.GraphModule(plan.graph, graph)
    runner.found = found
    return runner


def _assumed_layouts(plan, compiled, grouped) -> set:
    """The tensors whose real layout the runner assumes: the graph inputs and ATen-made
    values a kernel reads, and the roots of the views it builds, each taken at the root
    of its chain of static views (the runner builds such a view from its root with the
    view's FakeTensor strides: an ATen op whose real strides are not its FakeTensor's
    would give a view of the wrong elements). An input only ATen ops read is theirs to
    take as it comes, as in eager: a bfloat16 embedding_bag's offset2bag is empty where
    its FakeTensor has a row per index, and the backward (all ATen) raised on it."""
    read = set()
    for g in plan.groups:
        if g.id in compiled:
            read |= {a for n in g.nodes for a in n.all_input_nodes if a not in grouped}
    read |= {n for n in plan.graph.graph.nodes
             if n not in grouped and as_reinterpret(n, lambda v: v not in grouped) is not None}
    return {r for r in map(_view_root, read)
            if r not in grouped and spec_of(r.meta.get("val")) is not None}


def _view_root(node):
    while node.op == "call_function" and as_reinterpret(node) is not None:
        node = node.args[0]
    return node


def _expect(graph, node, value, expect):
    mutated = any(u.target is torch.ops.aten.copy_.default and u.args[0] is node
                  for u in node.users)
    call = graph.call_function(expect, (value, node.name, not mutated))
    call.name, call.meta = f"{node.name}_checked", dict(node.meta)
    return call


def guarded_runner(plan, compiled: dict[int, CompiledKernel], every_call: bool = False,
                   strict: bool = False, name: str = "graph", trampoline_lib=None):
    """A boxed callable running `plan`: the checking runner on the first call, then the
    plain one unless the check found a tensor to repair (meta_check.py); with
    `every_call` (option check_strides) the checking runner on every call. `name`: the
    graph's profiler range (boxed). With `trampoline_lib` (trampoline.load), both runners'
    runs of kernels are segments (segments.py); `.runner` stays the plain runner with one
    call per kernel (dumps, the runnable script, profiling), `.segmented` what runs."""
    plain = build_runner(plan, compiled, strict=strict)
    fast = segment(plain, trampoline_lib)
    checks = build_runner(plan, compiled, check=True, strict=strict)
    checking = boxed(segment(checks, trampoline_lib), name, checks)
    checking.found = checks.found
    run = checking if every_call else first_call_checked(checking, boxed(fast, name, plain))
    run._boxed_call = True
    run.runner, run.segmented = plain, fast
    return run


def _kernel_call(graph, env, kernel, outputs, by_name, sources, is_aten, into) -> dict:
    """One kernel call; returns {output node: its value}. An input that is a static view
    the runner would build is passed as the root of that view and a byte offset instead:
    the kernel indexes it with the view's strides already, so the view is never built.
    `into`: {output index: the runner value it is stored into} (inplace.py)."""
    inputs, offsets = [], []
    for name in kernel.input_names:
        node = by_name[name]
        alias = as_reinterpret(node, is_aten) if is_aten(node) and not kernel.tensor_args else None
        inputs.append(env[alias[0] if alias else node])
        offsets.append(alias[3] * node.meta["val"].element_size() if alias else 0)
    sizes = tuple(_size_arg(graph, env, sources[s]) for s in kernel.size_vars or [])
    res = graph.call_function(make_call(kernel, offsets, tuple(into)),
                              tuple(inputs) + sizes + tuple(into.values()))
    res.name = kernel.name
    values = {}
    for i, out in enumerate(outputs):
        values[out] = item = graph.call_function(operator.getitem, (res, i))
        item.name, item.meta = out.name, dict(out.meta)
    return values


def _aten_call(graph, node, env, is_aten):
    """`node` copied into the runner, called through torch's binding where it has one
    (fast_aten.py); a static view as one reinterpretation of the root of its chain of
    ATen views (reinterpret.py)."""
    alias = as_reinterpret(node, is_aten)
    if alias is None:
        copy = graph.node_copy(node, lambda a: env[a])
        copy.target = fast_target(node.target) if node.op == "call_function" else copy.target
        return copy
    root, size, stride, offset = alias
    call = graph.call_function(reinterpret, (env[root], size, stride, offset))
    call.name, call.meta = node.name, dict(node.meta)
    return call


def _erase_unused_reinterprets(graph) -> None:
    """Views only other views read are never built: their readers start from the root."""
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and node.target is reinterpret and not node.users:
            graph.erase_node(node)


def _size_arg(graph, env, source):
    node, dim = source
    if dim is None:
        return env[node]
    return graph.call_function(torch.ops.aten.sym_size.int, (env[node], dim))


def boxed(gm: torch.fx.GraphModule, name: str = "graph", profiled_gm=None):
    """AOTAutograd's boxed calling convention: one list of args, cleared on entry by the
    runner's own (boxed) code. While a profiler runs, the graph is a range `brrr::<name>`
    and each kernel an event in it (profiling.py; one bool checked per call otherwise):
    `profiled_gm` (default `gm`) is the runner run then, one call per kernel."""
    forward, profiled = gm.forward, ProfiledRunner(profiled_gm or gm, name)

    def run(args):
        if autograd_profiler._is_profiler_enabled:
            return profiled(list(args) if not isinstance(args, list) else args)
        return forward(list(args) if not isinstance(args, list) else args)

    run._boxed_call = True
    run.runner = gm
    return run
