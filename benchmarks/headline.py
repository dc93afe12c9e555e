"""The simulator's headline answers: barrier shares, protocol crossovers, bandwidth plateaus, rank scaling.

What a protocol designer asks first, printed for the default ``des`` model (and NCCL's own tuning model,
``analytic``, where it has an answer):

* the share of a barrier protocol's small-message latency spent in its barriers (one-shot and two-shot,
  8 x H100, 8 B .. 1 KiB), and how much faster the barrier-free protocols are;
* the ring's LL -> LL128 -> Simple crossovers on 8 x H100;
* ring Simple bus bandwidth at 256 MiB on 8 x A100 / H100 / H200 / B200;
* LL one-shot at 8 B from 2 to 72 ranks (GB200 NVL72);
* the same small-message latencies on three GPU generations.

    python benchmarks/headline.py
    python benchmarks/headline.py --launch events   # another measurement harness
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from collsim.ir.registry import load_protocol  # noqa: E402
from collsim.models import SimRequest, get_model  # noqa: E402
from collsim.sim.model import run_des  # noqa: E402
from collsim.topology import load_topology  # noqa: E402

_TOPOLOGIES: dict[str, object] = {}


def topology(name: str) -> object:
    if name not in _TOPOLOGIES:
        _TOPOLOGIES[name] = load_topology(name)
    return _TOPOLOGIES[name]


def request(topo: str, ranks: int, algorithm: str, protocol: str, size: int, launch: str) -> SimRequest:
    return SimRequest(topology=topology(topo), ranks=ranks, algorithm=algorithm, protocol=load_protocol(protocol),
                      size_bytes=size, launch=launch)


def latency(model: str, *args) -> float:
    return get_model(model)[1](request(*args)).latency_us


def barrier_share(topo: str, ranks: int, algorithm: str, size: int, launch: str,
                  protocol: str = "barrier") -> tuple[float, float, float]:
    """``(latency, share of the critical path in barrier operations, share in sync)`` of a barrier protocol
    (``barrier``: flag stores; ``signal-pad``: PyTorch SymmetricMemory's atomic signals)."""
    run = run_des(request(topo, ranks, algorithm, protocol, size, launch))
    total = run.latency_us
    barrier = sum(s.duration_us for s in run.steps if _is_barrier(s))
    return total, barrier / total, run.breakdown["sync"] / total


def _is_barrier(step) -> bool:
    label = getattr(step, "op_label", None)
    if label is not None:
        return label.startswith("barrier.")
    return "barrier." in step.text.split(":")[0]  # the op's name leads the step's text


def sizes(lo: int, hi: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def crossovers(model: str, topo: str, ranks: int, launch: str) -> tuple[list[str], dict[str, list[float]]]:
    """The sizes where the fastest ring protocol changes, and every protocol's latency per size."""
    grid = sizes(8, 256 << 20)
    table = {p: [latency(model, topo, ranks, "ring", p, s, launch) for s in grid] for p in ("ll", "ll128", "simple")}
    changes, best = [], None
    for i, s in enumerate(grid):
        winner = min(table, key=lambda p: table[p][i])
        if winner != best:
            changes.append(f"{winner} from {_size(s)}")
            best = winner
    return changes, table


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launch", default="graph", help="launch mode / measurement harness (default graph)")
    args = parser.parse_args(argv)
    launch = args.launch

    print(f"## Barrier share, 8 x H100 ({launch})")
    print("| protocol | algorithm | size | latency us | barrier ops share | sync share | ll us | sentinel us | "
          "protocol / ll |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for protocol in ("barrier", "signal-pad"):
        for algorithm in ("one-shot", "two-shot"):
            for size in (8, 64, 256, 1024):
                total, share, sync = barrier_share("hgx-h100", 8, algorithm, size, launch, protocol)
                ll = latency("des", "hgx-h100", 8, algorithm, "ll", size, launch)
                sentinel = latency("des", "hgx-h100", 8, algorithm, "sentinel", size, launch)
                print(f"| {protocol} | {algorithm} | {size} | {total:.2f} | {share * 100:.0f} % | {sync * 100:.0f} % | "
                      f"{ll:.2f} | {sentinel:.2f} | {total / ll:.2f}x |")

    print(f"\n## Ring at 8 B, 8 x H100 ({launch})")
    for model in ("des", "analytic"):
        values = {p: latency(model, "hgx-h100", 8, "ring", p, 8, launch) for p in ("ll", "ll128", "simple")}
        print(f"{model:>8}: " + ", ".join(f"{p} {v:.2f} us" for p, v in values.items()))
    print("two-shot simple at 8 B, 72 ranks (gb200-nvl72): "
          f"{latency('des', 'gb200-nvl72', 72, 'two-shot', 'simple', 8, launch):.2f} us")

    print(f"\n## Ring protocol crossovers, 8 x H100 ({launch})")
    for model in ("des", "analytic"):
        changes, _ = crossovers(model, "hgx-h100", 8, launch)
        print(f"{model:>8}: " + "; ".join(changes))

    print(f"\n## Ring Simple bus bandwidth at 256 MiB, 8 ranks ({launch})")
    for topo in ("dgx-a100", "hgx-h100", "hgx-h200", "hgx-b200"):
        r = get_model("des")[1](request(topo, 8, "ring", "simple", 256 << 20, launch))
        print(f"{topo:>10}: {r.busbw_gbps:.0f} GB/s")

    print(f"\n## LL one-shot at 8 B, gb200-nvl72 ({launch})")
    ranks = (2, 4, 8, 16, 32, 64, 72)
    print(" ".join(f"x{n}: {latency('des', 'gb200-nvl72', n, 'one-shot', 'll', 8, launch):.2f}" for n in ranks))

    print(f"\n## Generations, 8 ranks ({launch})")
    print("| preset | ll one-shot 8 B | ll one-shot 64 KiB | barrier one-shot 8 B | ring ll 8 B |")
    print("|---|---:|---:|---:|---:|")
    for topo in ("dgx-a100", "hgx-h100", "hgx-b200"):
        print(f"| {topo} | {latency('des', topo, 8, 'one-shot', 'll', 8, launch):.2f} | "
              f"{latency('des', topo, 8, 'one-shot', 'll', 65536, launch):.2f} | "
              f"{latency('des', topo, 8, 'one-shot', 'barrier', 8, launch):.2f} | "
              f"{latency('des', topo, 8, 'ring', 'll', 8, launch):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
