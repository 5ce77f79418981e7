"""Distributed training on CPU: two processes, gloo on loopback, a model compiled by brrr.

DistributedDataParallel: Dynamo's DDP optimizer splits the graph at gradient-bucket
boundaries (bucket_cap_mb=1 over ~1.6 MB of parameters) and brrr compiles each piece;
three SGD steps give the same parameters as eager DDP on the same data. FSDP2
(`fully_shard`, per Linear and on the root) runs on CPU with gloo in this torch, so it
is covered the same way: compiled by brrr against eager FSDP2.

Both ranks run as `python -m tests.e2e.test_distributed RANK PORT` (this file), once for
both checks; each prints one JSON line of results.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
WORLD = 2
STEPS = 3


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.norm = torch.nn.Linear(16, 256), torch.nn.LayerNorm(256)
        self.b, self.c = torch.nn.Linear(256, 512), torch.nn.Linear(512, 512)
        self.d = torch.nn.Linear(512, 4)

    def forward(self, x):
        h = self.norm(F.gelu(self.a(x)))
        h = F.silu(self.b(h))
        return self.d(torch.tanh(self.c(h)) * 2 + h)


def _net() -> Net:
    torch.manual_seed(0)
    return Net()


def _batches(rank: int) -> list:
    gen = torch.Generator().manual_seed(100 + rank)     # each rank its own data
    return [(torch.randn(8, 16, generator=gen), torch.randint(0, 4, (8,), generator=gen))
            for _ in range(STEPS)]


def _train(pairs, rank: int) -> None:
    """STEPS SGD steps on each (callable, module) pair, interleaved."""
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for _, m in pairs]
    for x, y in _batches(rank):
        for (fn, _), opt in zip(pairs, opts):
            opt.zero_grad()
            F.cross_entropy(fn(x), y).backward()
            opt.step()


def _max_param_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    worst = 0.0
    for p, q in zip(a.parameters(), b.parameters()):
        if hasattr(p, "full_tensor"):                    # FSDP2 shards: DTensors
            p, q = p.full_tensor(), q.full_tensor()
        worst = max(worst, (p.detach() - q.detach()).abs().max().item())
    return worst


def _spy_graphs() -> list:
    """Record the kind of every graph brrr compiles in this process."""
    import brrr_compiler.backend as backend
    kinds, real = [], backend.compile_graph

    def spy(gm, cfg, kind, *args, **kwargs):
        kinds.append(kind)
        return real(gm, cfg, kind, *args, **kwargs)

    backend.compile_graph = spy
    return kinds


def _ddp(rank: int, kinds: list) -> dict:
    from torch.nn.parallel import DistributedDataParallel as DDP
    eager, model = DDP(_net(), bucket_cap_mb=1), DDP(_net(), bucket_cap_mb=1)
    torch._dynamo.reset()
    del kinds[:]
    _train([(eager, eager), (torch.compile(model, backend="brrr"), model)], rank)
    return {"diff": _max_param_diff(eager.module, model.module), "graphs": list(kinds)}


def _fsdp2(rank: int, kinds: list) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (WORLD,))
    eager, model = _net(), _net()
    for m in (eager, model):
        for layer in (m.a, m.b, m.c, m.d):
            fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
    torch._dynamo.reset()
    del kinds[:]
    _train([(eager, eager), (torch.compile(model, backend="brrr"), model)], rank)
    return {"diff": _max_param_diff(eager, model), "graphs": list(kinds)}


def worker(rank: int, port: int) -> None:
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    kinds = _spy_graphs()
    result = {}
    for name, run in (("ddp", _ddp), ("fsdp2", _fsdp2)):
        try:
            result[name] = run(rank, kinds)
        except Exception as err:  # noqa: BLE001  (reported to the test)
            result[name] = {"error": f"{type(err).__name__}: {err}"[:2000]}
    dist.barrier()                   # neither rank tears gloo down under the other's feet
    dist.destroy_process_group()
    print("RESULT " + json.dumps(result), flush=True)
    # Leave without interpreter teardown: gloo's C++ threads (and rank 0's TCPStore
    # server) can still be joinable while static destructors run, and std::terminate
    # aborts the process after the results are out (seen once in CI as SIGABRT).
    sys.stderr.flush()
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               BRRR_CACHE_DIR=str(tmp_path_factory.mktemp("dist-cache")))
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "tests.e2e.test_distributed", str(r),
                               str(port)], cwd=str(REPO), env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(WORLD)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("distributed workers timed out")
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert p.returncode == 0 and lines, (f"rc={p.returncode}, results printed: "
                                             f"{bool(lines)}\n{err[-3000:]}")
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return results


@pytest.mark.parametrize("name", ["ddp", "fsdp2"])
def test_three_steps_match_eager(ranks, name):
    for rank, result in enumerate(ranks):
        r = result[name]
        assert "error" not in r, f"rank {rank}: {r.get('error')}"
        assert r["diff"] <= 1e-5, f"rank {rank}: parameters differ from eager by {r['diff']}"
        assert "forward" in r["graphs"] and "backward" in r["graphs"], r["graphs"]


def test_ddp_graph_is_split_at_bucket_boundaries(ranks):
    for result in ranks:
        graphs = result["ddp"]["graphs"]
        assert graphs.count("forward") >= 2, f"one piece per bucket expected: {graphs}"


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]))
