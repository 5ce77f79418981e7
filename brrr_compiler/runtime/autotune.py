"""max-autotune: brrr measures candidate fusions and schedules where its cost model is
unsure, and keeps the faster.

Three kinds of measurement, all on inputs of the graph's own shapes, strides and dtypes
(random values; an integer tensor stays inside the dims it indexes: script_inputs.py),
timed by autotune_timing.py and kept on disk by autotune_cache.py:

- merges: MeasuredPolicy (cost/measured.py) asks `measure_merge(before, after)` about a
  merge the model is unsure of. The kernels of each side are lowered and printed as the
  final ones would be, built in one translation unit and run in order, each reading what
  the earlier kernels of its side stored; their other inputs are random tensors.
- finished plans: `time_plans` times whole graphs, each plan's kernels run by its
  runner (the driver's autotune_plan.py compares the plan the measurements made with the
  policy's own).
- thread counts: `choose_threads` (autotune_threads.py) times each kernel whose parallel
  loop can fork also with fewer threads and keeps the fastest.

Only C++ kernels are measured. Triton kernels would need a GPU run, which the autotuner
does not make, and kernels run by Triton's interpreter are never timed (its speed says
nothing about a GPU's): there the model's choice stands, and each decision says so.
Graphs with symbolic sizes are not measured either: a measurement holds for one size,
the compiled graph for all of them. Measuring never changes what the user's program
sees: it runs outside any fake mode, without autograd, and restores torch's random state.
"""
from __future__ import annotations

import time

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from brrr_compiler.codegen import cpp
from brrr_compiler.cost.measured import Measurement
from brrr_compiler.log import logger
from brrr_compiler.lower.group import lower_group
from brrr_compiler.partition import group_of_members
from brrr_compiler.runtime import autotune_cache
from brrr_compiler.runtime.autotune_timing import median_seconds
from brrr_compiler.runtime.build import BuildError, build_and_load, find_toolchain
from brrr_compiler.runtime.kernels import build_units, compiled_kernel
from brrr_compiler.runtime.runner import build_runner, make_call
from brrr_compiler.runtime.script_inputs import input_specs, smallest_dim, tensor_spec
from brrr_compiler.runtime.script_main import random_input
from brrr_compiler.symbolic import shape, strides

KEEP_INPUT_BYTES = 1 << 30      # random inputs kept for later measurements of the graph
NOT_TRITON = ("Triton kernels are not measured (that needs a GPU run, which brrr's "
              "autotuner does not make; interpreted kernels are never timed)")
SYMBOLIC = "the graph has symbolic sizes (a measurement holds for one size only)"


class Autotuner:
    """Measurements for one graph `gm` compiled with `cfg` for `target` on `threads`
    OpenMP threads (the module note)."""

    def __init__(self, gm: torch.fx.GraphModule, cfg, threads: int, target: str | None,
                 prefetch: bool = False):
        self.gm, self.cfg, self.threads, self.target = gm, cfg, threads, target
        self.prefetch = prefetch        # DeviceSpec.stream_prefetch: as the compile prints
        self.toolchain = find_toolchain(cfg.cxx, cfg.cache_dir) if target == "cpp" else None
        self._inputs: dict[str, torch.Tensor] = {}
        self._kept = 0

    def why_not(self) -> str | None:
        """Why nothing in this graph can be measured (None: it can)."""
        if self.target is None:
            return "this graph has no code generation target"
        if self.target != "cpp":
            return NOT_TRITON
        if self.toolchain is None:
            return "no working C++ compiler"
        return None

    def close(self) -> None:
        """Drop the random inputs kept for this graph."""
        self._inputs.clear()

    # ---- merges ---------------------------------------------------------------------

    def measure_merge(self, before: list, after: list) -> Measurement | str:
        """Median seconds of the kernels before and after a merge; each side a list of
        (member nodes, stored nodes) in the order they run (cost.policy.kernel_sides).
        A string says why it could not be measured."""
        why = self.why_not()
        if why is not None:
            return why
        try:
            sides = {"before": self._lower(before, "before"), "after": self._lower(after, "after")}
            printed = {k.name: cpp.kernel_source(k, self.threads, prefetch=self.prefetch)
                       for side in sides.values() for k, _ in side}
        except NotImplementedError as err:
            return f"a candidate does not lower ({str(err).removeprefix('brrr: ')})"
        except Exception as err:    # noqa: BLE001 - a measurement never fails a compile
            logger.debug("autotune: lowering a candidate failed", exc_info=True)
            return f"a candidate does not lower ({type(err).__name__}: {err})"
        if any(k.size_vars for side in sides.values() for k, _ in side):
            return SYMBOLIC
        codes = {name: [cpp.code_key(k, printed[k.name]) for k, _ in side]
                 for name, side in sides.items()}
        seconds, cached = self.measured("merge", codes, self._reads(sides),
                                        lambda: self._time_sides(sides, printed))
        if isinstance(seconds, str):
            return seconds
        return Measurement(seconds["before"], seconds["after"], cached)

    def _lower(self, kernels: list, side: str) -> list:
        """[(Kernel, Group)] of one side, lowered as lower_plan lowers the C++ target's."""
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        out = []
        for i, (members, stored) in enumerate(kernels):
            group = group_of_members(i, members, stored, order)
            k = lower_group(group, f"autotune_{side}{i}", use_scratch=True,
                            round_results=(self.cfg.low_precision == "eager"),
                            libm=self.cfg.libm)
            out.append((k, group))
        return out

    def _reads(self, sides: dict) -> list[str]:
        """The names of the tensors the sides read that none of their kernels stores."""
        stored = {o.name for side in sides.values() for _, g in side for o in g.outputs}
        names = [b.origin for side in sides.values() for k, _ in side for b in k.inputs]
        return [n for n in dict.fromkeys(names) if n not in stored]

    def _time_sides(self, sides: dict, printed: dict) -> dict[str, float] | str:
        kernels = [k for side in sides.values() for k, _ in side]
        try:
            lib = build_and_load(cpp.translation_unit(kernels, self.threads, printed),
                                 self.cfg.cache_dir, self.cfg.cxx, self.cfg.cache_max_bytes)
        except (BuildError, OSError) as err:
            first = err.first_error if isinstance(err, BuildError) else str(err)
            return f"a candidate does not build ({first})"
        runs = {name: self.side_run([(k, list(g.outputs)) for k, g in side], lib)
                for name, side in sides.items()}
        return self.timed(runs, one_thread=self.threads == 1)

    # ---- finished plans ---------------------------------------------------------------

    def time_plans(self, plans: dict) -> tuple[dict[str, float] | str, bool]:
        """(median seconds per call of each finished plan as a whole graph, whether
        cached); `plans`: {name: (FusionPlan, {group id: Kernel}, {group id: output
        specs}, printed sources)}. Each plan's kernels are built as the final build
        builds them and run by its runner on random inputs of the graph's inputs. A
        string says why they could not be timed."""
        codes = {name: [repr([[n.name for n in g.nodes] for g in plan.groups])]
                 + [cpp.code_key(k, printed[k.name]) for k in kernels.values()]
                 for name, (plan, kernels, _, printed) in plans.items()}
        reads = [n.name for n in self.gm.graph.find_nodes(op="placeholder")
                 if isinstance(n.meta.get("val"), torch.Tensor)]
        return self.measured("plans", codes, reads, lambda: self._time_plans(plans))

    def _time_plans(self, plans: dict) -> dict[str, float] | str:
        runs = {}
        for name, (plan, kernels, specs, printed) in plans.items():
            units, libs = build_units(list(kernels.values()), self.cfg, self.threads, printed)
            if any(lib is None for lib in libs):
                return f"the {name} plan's kernels did not build"
            lib_of = {k.name: lib for (members, _), lib in zip(units, libs) for k in members}
            compiled = {gid: compiled_kernel(k, lib_of[k.name], k.name, gid, specs[gid])
                        for gid, k in kernels.items()}
            runs[name] = self._plan_run(plan, compiled)
        # ATen calls run on torch's threads, which the calling thread's CPU time misses
        return self.timed(runs, one_thread=self.threads == 1 and torch.get_num_threads() == 1)

    def _plan_run(self, plan, compiled: dict):
        def make():
            inputs = [random_input(spec) for spec in input_specs(plan.graph.graph)]
            runner = build_runner(plan, compiled)
            return lambda: runner(list(inputs))
        return make

    # ---- shared by all kinds --------------------------------------------------------

    def measured(self, what: str, codes: dict, reads: list[str], measure):
        """({candidate: seconds}, whether cached): from the disk cache, else `measure()`
        (then cached); (a string saying why, False) when it could not measure."""
        try:
            key, seconds = self.lookup(what, codes, reads)
            if seconds is not None:
                return seconds, True
            seconds = measure()
        except LookupError as err:      # a measurement never fails a compile
            return f"a candidate reads a value the graph does not have ({err})", False
        if not isinstance(seconds, str):
            autotune_cache.store(self.cfg.cache_dir, key, seconds, self.cfg.cache_max_bytes)
        return seconds, False

    def lookup(self, what: str, codes: dict, reads: list[str]) -> tuple[str, dict | None]:
        """(the measurement's key, {candidate: seconds} measured earlier or None) for the
        candidates `codes` ({name: their kernels' code keys}) reading the tensors `reads`."""
        with unset_fake_temporarily():
            specs = [tensor_spec(self._node(n), self._fallback()) for n in reads]
        key = autotune_cache.key(what, codes, specs, self.threads, self.toolchain)
        seconds = autotune_cache.lookup(self.cfg.cache_dir, key)
        return key, (seconds if seconds is not None and set(seconds) == set(codes) else None)

    def timed(self, runs: dict, one_thread: bool) -> dict[str, float] | str:
        """median_seconds of `runs` ({candidate: function making the function to time}),
        by CPU time when every candidate runs on `one_thread` (autotune_timing.py's
        note), outside any fake mode and autograd, torch's random state kept; a string
        when a candidate fails to run."""
        clock = time.thread_time if one_thread else time.perf_counter
        with unset_fake_temporarily(), torch.no_grad(), torch.random.fork_rng(devices=[]):
            try:
                return median_seconds({name: run() for name, run in runs.items()}, clock)
            except (RuntimeError, IndexError) as err:
                return f"a candidate failed to run ({err})"

    def side_run(self, kernels: list, lib):
        """A function that makes (inputs first) the function running `kernels` ([(Kernel,
        its output nodes)]) in order from `lib`, as the runner would."""
        def make():
            calls, fixed, made = [], {}, set()
            for i, (k, outputs) in enumerate(kernels):
                specs = [(shape(o.meta["val"]), strides(o.meta["val"]), o.meta["val"].dtype)
                         for o in outputs]
                call = make_call(compiled_kernel(k, lib, k.name, i, specs))
                names = [b.origin for b in k.inputs]
                fixed.update({n: self.tensor(n) for n in names if n not in made})
                calls.append((call, names, [o.name for o in outputs]))
                made.update(o.name for o in outputs)

            def run():
                env = dict(fixed)
                for call, names, outs in calls:
                    env.update(zip(outs, call(*[env[n] for n in names])))
            return run
        return make

    def tensor(self, name: str) -> torch.Tensor:
        """A random tensor with the layout of node `name`'s value (kept for later
        measurements while they hold under KEEP_INPUT_BYTES)."""
        if name in self._inputs:
            return self._inputs[name]
        t = random_input(tensor_spec(self._node(name), self._fallback()))
        size = t.untyped_storage().nbytes()
        if self._kept + size <= KEEP_INPUT_BYTES:
            self._inputs[name] = t
            self._kept += size
        return t

    def _node(self, name: str) -> torch.fx.Node:
        for n in self.gm.graph.nodes:
            if n.name == name:
                return n
        raise LookupError(f"no node {name!r}")     # measured() gives the measurement up

    def _fallback(self) -> int:
        return smallest_dim(self.gm.graph)
