"""Segments: consecutive kernel calls of the runner made one native call, their
intermediates placed in one arena by a memory plan.

Note on the plan. In a run of kernel calls with nothing else between them, a kernel output
that only later kernels of the run read (not a graph output, not read by ATen nor through
a view the runner builds) is an intermediate: it never becomes a tensor. It lives from the
kernel that writes it to the last kernel that reads it; the plan walks the run in order,
returns the blocks of intermediates whose last reader has run, and places each new
intermediate in the smallest returned block that holds it, else past the arena's end. A
kernel's outputs never share memory with its inputs (its inputs are still live while it
runs), and outputs handed back, graph outputs among them (so tensors saved for the
backward), are tensors of their own, allocated per call as before: nothing the caller
sees aliases the arena.

Note on keeping the arena. Each thread keeps one arena buffer between calls, the largest
any segment has asked it for, and every segment run on that thread uses it: a segment is
one native call that runs to its end before the next starts, and nothing outside it
holds a pointer into the arena, so its contents are dead between calls. A fresh arena
per call cost more than the kernels: glibc serves 32 MB and more with a new mmap, whose
pages the kernel faults in and zeroes on first touch, every call (a five-kernel chain
over 4096x4096 floats with a 192 MB arena: 216 ms per call, 74 ms with glibc told to
keep its memory). Threads never share a buffer. What this holds between calls is one
graph's intermediates at most, per thread that ran brrr segments.
"""
from __future__ import annotations

import ctypes
import operator
import threading
from dataclasses import dataclass

import torch
import torch.fx

from brrr_compiler.runtime import trampoline

try:
    from torch._C._dynamo.guards import _empty_strided_cpu
except ImportError:  # pragma: no cover - older torch
    _empty_strided_cpu = None

ALIGN = 64     # bytes; each intermediate starts on its own cache line


@dataclass(frozen=True)
class Placement:
    """Where an intermediate lives in the arena, and the kernels that write and last read it
    (indices into the segment's kernels)."""
    name: str
    offset: int
    nbytes: int
    written: int
    last_read: int


def _extent(shape, stride, dtype) -> int:
    if any(s == 0 for s in shape):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(shape, stride))) * dtype.itemsize


def natively_callable(k) -> bool:
    """Whether the trampoline can call kernel `k`: static sizes, no error flag to take, no
    tensor arguments, a CPU kernel, at most MAX_ARGS pointers (replay.py times such
    kernels the same way)."""
    if k.size_vars or k.take_error is not None or k.tensor_args or k.device is not None \
            or len(k.input_names) + len(k.out_specs) > trampoline.MAX_ARGS:
        return False
    return _int_specs(k.out_specs) is not None


def _static_kernel(node) -> bool:
    call = node.target if node.op == "call_function" else None
    k = getattr(call, "brrr_kernel", None)
    return k is not None and natively_callable(k) and not getattr(call, "brrr_into", ()) \
        and all(isinstance(a, torch.fx.Node) for a in node.args)


def _int_specs(specs):
    """(shape, stride, dtype) per output with Python ints, or None if a size is symbolic."""
    try:
        return [(tuple(int(x) for x in sh), tuple(int(x) for x in st), dt) for sh, st, dt in specs]
    except TypeError:
        return None


def _runs(graph) -> list[list]:
    """Maximal runs of consecutive static kernel calls (their getitems between them)."""
    runs, current = [], []
    for node in graph.nodes:
        if _static_kernel(node):
            current.append(node)
        elif not (node.target is operator.getitem and current and node.args[0] in current):
            if len(current) > 1:
                runs.append(current)
            current = []
    return runs


def _outputs(call) -> list:
    """Per output index of a kernel call, its getitem node (None when nothing takes it)."""
    items = [None] * len(call.target.brrr_kernel.out_specs)
    for user in call.users:
        if user.target is operator.getitem:
            items[user.args[1]] = user
    return items


def plan_arena(run: list, internal: set) -> tuple[list[Placement], int]:
    """The placements of the intermediates of `run` (the module note) and the arena's size."""
    index = {call: i for i, call in enumerate(run)}
    values = []
    for i, call in enumerate(run):
        specs = _int_specs(call.target.brrr_kernel.out_specs)
        for j, (item, (sh, st, dt)) in enumerate(zip(_outputs(call), specs)):
            if item is None or item in internal:
                last = max([i] + [index[u] for u in (item.users if item else ())])
                values.append((i, last, _value_name(call, j, item), _extent(sh, st, dt)))
    free, placed, top = [], [], 0
    block = {}                  # name -> (offset, bytes) of the block it holds
    for i in range(len(run)):
        free += [block[p.name] for p in placed if p.last_read == i - 1]
        for written, last, name, nbytes in (v for v in values if v[0] == i):
            fits = [b for b in free if b[1] >= nbytes]
            if fits:
                block[name] = min(fits, key=lambda b: (b[1], b[0]))
                free.remove(block[name])
            else:
                block[name], top = (top, _aligned(nbytes)), top + _aligned(nbytes)
            placed.append(Placement(name, block[name][0], nbytes, written, last))
    return placed, top


def _value_name(call, index: int, item) -> str:
    return item.name if item is not None else f"{call.name}_unused{index}"


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


def segment(gm: torch.fx.GraphModule, lib) -> torch.fx.GraphModule:
    """A copy of the runner `gm` with each run of two or more static kernel calls one call
    of a segment (the module note); `gm` itself where there is none or no `lib`."""
    if lib is None or not _runs(gm.graph):
        return gm
    graph = torch.fx.Graph()
    out, old_output = graph.graph_copy(gm.graph, {}, return_output_node=True)
    graph.output(out, type_expr=getattr(old_output, "type", None))
    graph.set_codegen(gm.graph._codegen)
    for i, run in enumerate(_runs(graph)):
        _replace(graph, run, lib, f"segment{i}")
    return torch.fx.GraphModule(gm, graph)


def _replace(graph, run: list, lib, name: str) -> None:
    in_run = set(run)
    items = [item for call in run for item in _outputs(call) if item is not None]
    internal = {item for item in items if all(u in in_run for u in item.users)}
    external = [item for item in items if item not in internal]
    inputs = list(dict.fromkeys(a for call in run for a in call.args if a not in set(items)))
    if len(inputs) + len(external) + 1 > trampoline.MAX_SLOTS:
        return
    placed, size = plan_arena(run, internal)
    call = _segment_call(run, inputs, external, placed, size, lib, name)
    with graph.inserting_before(run[0]):
        node = graph.call_function(call, tuple(inputs))
        node.name = name
        for j, item in enumerate(external):
            new = graph.call_function(operator.getitem, (node, j))
            item.replace_all_uses_with(new)
            new.name, new.meta = item.name, dict(item.meta)
    for old in reversed([n for c in run for n in [c, *c.users]]):
        graph.erase_node(old)


def _segment_call(run, inputs, external, placed, arena_bytes, lib, name):
    """The segment's Python side: allocate its outputs and arena, one native call."""
    slot = {n: i for i, n in enumerate([*inputs, *external])}
    arena = len(slot)
    where = {p.name: p.offset for p in placed}
    program = [len(run)]
    for call in run:
        k = call.target.brrr_kernel
        program += [trampoline.address(k.fn), len(call.args) + len(k.out_specs)]
        for a, off in zip(call.args, call.target.brrr_offsets or [0] * len(call.args)):
            program += [arena, where[a.name] + off] if a.name in where else [slot[a], off]
        for j, item in enumerate(_outputs(call)):
            if item is not None and item in slot:
                program += [slot[item], 0]
            else:
                program += [arena, where[_value_name(call, j, item)]]
    prog = (ctypes.c_int64 * len(program))(*program)
    fn, address = trampoline.entry(lib, arena + 1), ctypes.addressof(prog)
    specs = [_int_specs(item.args[0].target.brrr_kernel.out_specs)[item.args[1]]
             for item in external]
    alloc = allocator()
    data_ptr = torch.Tensor.data_ptr
    scratch, arena_of = max(arena_bytes, 1), _ARENA.get

    def run_segment(*tensors):
        outs = [alloc(sh, st, dt) for sh, st, dt in specs]
        fn(address, *map(data_ptr, tensors), *map(data_ptr, outs), arena_of(scratch).data_ptr())
        return outs

    run_segment.__name__ = run_segment.__qualname__ = name
    run_segment.__module__ = "brrr"
    run_segment.brrr_segment = [call.target for call in run]
    run_segment.brrr_plan, run_segment.brrr_arena_bytes = placed, arena_bytes
    run_segment.brrr_program = prog          # kept alive with the call
    return run_segment


class _Arena(threading.local):
    """This thread's arena buffer, grown to the largest asked for (the module note)."""
    buf = None

    def get(self, nbytes: int) -> torch.Tensor:
        if self.buf is None or self.buf.numel() < nbytes:
            self.buf = None                  # freed before its larger successor is made
            self.buf = torch.empty(nbytes, dtype=torch.uint8)
        return self.buf


_ARENA = _Arena()


def allocator(device=None):
    """empty_strided(shape, stride, dtype) on `device`; on the CPU torch's fast path for
    it (what inductor's generated code calls: half the cost of torch.empty_strided)."""
    if device is None and _empty_strided_cpu is not None:
        return _empty_strided_cpu
    return lambda shape, stride, dtype: torch.empty_strided(shape, stride, dtype=dtype,
                                                            device=device)


def segmented_kernels(gm: torch.fx.GraphModule) -> frozenset[str]:
    """The names of the kernels the runner `gm` runs inside segments (the others it calls
    from Python, one ctypes call each)."""
    return frozenset(c.brrr_kernel.name for n in gm.graph.nodes
                     for c in getattr(n.target, "brrr_segment", ()))


def describe(gm: torch.fx.GraphModule) -> str:
    """The segmented runner `gm` as text for dumps: its code, then each segment's kernels
    and arena plan ('' when it has no segment)."""
    calls = [n.target for n in gm.graph.nodes if hasattr(n.target, "brrr_plan")]
    if not calls:
        return ""
    lines = ["", "# What runs: runs of kernels as one native call each (runtime/segments.py)",
             *("# " + line for line in gm.code.strip("\n").splitlines())]
    for seg in calls:
        names = [c.brrr_kernel.name for c in seg.brrr_segment]
        lines.append(f"# {seg.__name__}: {', '.join(names)}; arena {seg.brrr_arena_bytes} bytes")
        lines += [f"#   {p.name}: bytes [{p.offset}, {p.offset + p.nbytes}), written by "
                  f"{names[p.written]}, last read by {names[p.last_read]}" for p in seg.brrr_plan]
    return "\n".join(lines) + "\n"
