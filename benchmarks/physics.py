"""Physics rules every answer of a performance model must obey, checked over a sweep.

Sweeps every shipped protocol x algorithm x topology preset, sizes 8 B .. 256 MiB (x2), ranks 2 .. 8
(2 .. 72 on gb200-nvl72), and prints each rule with its violations and a total:

``size-monotone``
    latency does not decrease when the message grows (same launch otherwise);
``rank-monotone``
    one-shot and two-shot at <= 64 KiB are not faster with more ranks (every rank talks to every other),
    on every topology where a GPU reaches all its peers through the same first link (switched NVLink
    fabrics, PCIe trees). On a direct-link mesh (dgx1-v100's hybrid cube-mesh) each added peer brings its
    own NVLinks, so a two-shot that is link-bound on one pair's single link at 2 ranks is faster at 3:
    the rule's premise does not hold there, and those topologies are reported apart, not counted;
``busbw-bound``
    bus bandwidth stays within the GPU's effective link bandwidth times the protocol's payload share
    (LL 1/2, LL128 15/16, plain lines 1); a program that reduces in the switch (multimem operations) sends
    its data up once and receives the sum down once, so its bound is that times 2 (n - 1) / n, the busbw of
    moving the message once each way;
``ring-8B-order``
    at 8 B the ring kernel (CUDA-graph launch) is fastest with LL, then LL128, then Simple (their per-step
    handshakes: flag in the line, a warp's flag check, fence then flag); harnesses whose back-to-back
    launches are host-bound (eager, host-loop) time the launch, the same for every protocol, so the rule
    is about the kernel;
``eager-ge-graph``
    an eager launch is never faster than the same kernel in CUDA-graph steady state.

Tolerance 0.5 %: a monotonicity rule is violated when the later value is more than 0.5 % below the
earlier one; an ordering rule when the faster protocol is not at least 0.5 % faster; the bandwidth
bound when busbw exceeds it by more than 0.5 %.

    python benchmarks/physics.py                  # the full sweep (2 worker processes)
    python benchmarks/physics.py --reduced        # the reduced sweep the test suite runs
    python benchmarks/physics.py --model analytic # another model
    python benchmarks/physics.py --examples 10    # more violations printed per rule
    python benchmarks/physics.py --protocols nvls,nvls-poison   # only these protocols

Exit status 0 when no rule is violated, 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOLERANCE = 0.005
#: Rules in the order they are printed.
RULES = ("size-monotone", "rank-monotone", "busbw-bound", "ring-8B-order", "eager-ge-graph")
#: The largest size at which one-shot and two-shot must not get faster with more ranks.
RANK_RULE_MAX_BYTES = 64 * 1024
#: Ring protocols in the order they must rank at 8 B.
RING_ORDER = ("ll", "ll128", "simple")


def full_sizes() -> list[int]:
    """8 B .. 256 MiB, doubling."""
    return [8 << k for k in range(26)]


@dataclass(frozen=True)
class Sweep:
    """Which configurations to simulate: topology -> rank counts, the sizes, and the launch modes."""

    ranks: dict[str, tuple[int, ...]]
    sizes: tuple[int, ...]
    launches: tuple[str, ...] = ("graph", "eager")


def full_sweep() -> Sweep:
    from collsim.topology import list_presets, load_topology

    ranks = {}
    for name in list_presets():
        gpus = load_topology(name).num_gpus
        top = gpus if name == "gb200-nvl72" else min(8, gpus)
        ranks[name] = tuple(range(2, top + 1))
    return Sweep(ranks, tuple(full_sizes()))


def reduced_sweep() -> Sweep:
    """A sweep small enough for the test suite: every rule, every protocol, four topologies."""
    sizes = tuple(8 << k for k in range(0, 26, 3)) + (64 * 1024,)
    return Sweep({"hgx-h100": (2, 3, 4, 8), "dgx-a100": (2, 8), "pcie-gen5": (2, 4),
                  "gb200-nvl72": (8, 9, 16, 72)}, tuple(sorted(set(sizes))))


@dataclass(frozen=True)
class Point:
    """One simulated configuration."""

    topology: str
    protocol: str
    algorithm: str
    ranks: int
    size: int
    launch: str
    latency_us: float
    busbw_gbps: float
    bound_gbps: float  # effective link bandwidth x payload share
    shared_egress: bool = True  # GPU 0 reaches every peer through one first link (the rank rule's premise)

    @property
    def config(self) -> str:
        return f"{self.topology} {self.protocol}/{self.algorithm} x{self.ranks} {self.launch}"


def _simulate_group(args: tuple) -> list[Point]:
    """Every size and launch of one (topology, protocol, algorithm, ranks)."""
    topology_name, protocol_name, algorithm, ranks, sizes, launches, model = args
    from collsim.ir.registry import load_protocol
    from collsim.config import fabric_needs
    from collsim.models import SimRequest, get_model
    from collsim.topology import load_topology

    topo = _topology(topology_name, load_topology)
    protocol = load_protocol(protocol_name)
    _, fn = get_model(model)
    egress = min(topo.gpu_egress_gbps(r, effective=True) for r in range(ranks))
    bound = egress * protocol.payload_efficiency
    if fabric_needs(protocol, algorithm):  # reduced in the switch: the data crosses each link once each way
        bound *= 2 * (ranks - 1) / ranks
    shared = len({tuple(topo.route(0, p).links[:1]) for p in range(1, topo.num_gpus)}) == 1
    out = []
    for launch in launches:
        for size in sizes:
            result = fn(SimRequest(topology=topo, ranks=ranks, algorithm=algorithm, protocol=protocol,
                                   size_bytes=size, launch=launch))
            out.append(Point(topology_name, protocol_name, algorithm, ranks, size, launch, result.latency_us,
                             result.busbw_gbps, bound, shared))
    return out


_TOPOLOGIES: dict[str, object] = {}


def _topology(name: str, load) -> object:
    found = _TOPOLOGIES.get(name)
    if found is None:
        found = _TOPOLOGIES[name] = load(name)
    return found


def groups(sweep: Sweep, model: str, only: frozenset[str] | None = None) -> list[tuple]:
    """The simulation tasks of ``sweep``: one per (topology, protocol, algorithm, ranks), costliest first; a
    program the topology cannot run (multimem operations without NVLink SHARP switches) is left out."""
    from collsim.config import unsupported_reason
    from collsim.ir.registry import list_protocols, load_protocol
    from collsim.topology import load_topology

    tasks = []
    for name, counts in sweep.ranks.items():
        topo = _topology(name, load_topology)
        for protocol_name in list_protocols():
            if only is not None and protocol_name not in only:
                continue
            protocol = load_protocol(protocol_name)
            for algorithm in protocol.algorithms:
                for n in counts:
                    if unsupported_reason(protocol, algorithm, n, topo):
                        continue
                    tasks.append((name, protocol_name, algorithm, n, sweep.sizes, sweep.launches, model))
    tasks.sort(key=lambda t: -t[3] ** 2)
    return tasks


def simulate(sweep: Sweep, model: str = "des", workers: int = 1,
             only: frozenset[str] | None = None) -> list[Point]:
    """Simulate every configuration of ``sweep`` (of the protocols ``only`` names, when given)."""
    tasks = groups(sweep, model, only)
    if workers <= 1:
        return [p for task in tasks for p in _simulate_group(task)]
    with ProcessPoolExecutor(workers) as pool:
        return [p for part in pool.map(_simulate_group, tasks, chunksize=4) for p in part]


@dataclass(frozen=True)
class Violation:
    rule: str
    text: str
    excess: float  # how far past the tolerance, as a fraction, for sorting

    @property
    def topology(self) -> str:
        return self.text.split()[0]


def _by(points: Iterable[Point], *fields: str) -> dict[tuple, list[Point]]:
    out: dict[tuple, list[Point]] = {}
    for p in points:
        out.setdefault(tuple(getattr(p, f) for f in fields), []).append(p)
    return out


def size_monotone(points: list[Point]) -> tuple[int, list[Violation]]:
    checks, found = 0, []
    for _, series in _by(points, "topology", "protocol", "algorithm", "ranks", "launch").items():
        series.sort(key=lambda p: p.size)
        for a, b in zip(series, series[1:]):
            checks += 1
            if b.latency_us < a.latency_us * (1 - TOLERANCE):
                drop = 1 - b.latency_us / a.latency_us
                found.append(Violation("size-monotone", f"{a.config}: {a.size} B {a.latency_us:.3f} us -> "
                                       f"{b.size} B {b.latency_us:.3f} us ({-drop * 100:.2f} %)", drop))
    return checks, found


def rank_monotone(points: list[Point]) -> tuple[int, list[Violation]]:
    checks, found = 0, []
    small = [p for p in points if p.algorithm in ("one-shot", "two-shot") and p.size <= RANK_RULE_MAX_BYTES
             and p.shared_egress]
    for _, series in _by(small, "topology", "protocol", "algorithm", "size", "launch").items():
        series.sort(key=lambda p: p.ranks)
        for a, b in zip(series, series[1:]):
            checks += 1
            if b.latency_us < a.latency_us * (1 - TOLERANCE):
                drop = 1 - b.latency_us / a.latency_us
                found.append(Violation("rank-monotone", f"{a.topology} {a.protocol}/{a.algorithm} {a.size} B "
                                       f"{a.launch}: x{a.ranks} {a.latency_us:.3f} us -> x{b.ranks} "
                                       f"{b.latency_us:.3f} us ({-drop * 100:.2f} %)", drop))
    return checks, found


def busbw_bound(points: list[Point]) -> tuple[int, list[Violation]]:
    checks, found = 0, []
    for p in points:
        checks += 1
        if p.busbw_gbps > p.bound_gbps * (1 + TOLERANCE):
            excess = p.busbw_gbps / p.bound_gbps - 1
            found.append(Violation("busbw-bound", f"{p.config} {p.size} B: busbw {p.busbw_gbps:.1f} GB/s > "
                                   f"{p.bound_gbps:.1f} GB/s (+{excess * 100:.2f} %)", excess))
    return checks, found


def ring_order(points: list[Point]) -> tuple[int, list[Violation]]:
    checks, found = 0, []
    ring = [p for p in points if p.algorithm == "ring" and p.size == 8 and p.protocol in RING_ORDER
            and p.launch == "graph"]
    for key, series in _by(ring, "topology", "ranks", "launch").items():
        by_protocol = {p.protocol: p for p in series}
        for faster, slower in zip(RING_ORDER, RING_ORDER[1:]):
            if faster not in by_protocol or slower not in by_protocol:
                continue
            checks += 1
            a, b = by_protocol[faster].latency_us, by_protocol[slower].latency_us
            if a > b * (1 - TOLERANCE):
                found.append(Violation("ring-8B-order", f"{key[0]} ring x{key[1]} {key[2]} 8 B: {faster} "
                                       f"{a:.3f} us is not below {slower} {b:.3f} us", a / b - 1 + TOLERANCE))
    return checks, found


def eager_ge_graph(points: list[Point]) -> tuple[int, list[Violation]]:
    checks, found = 0, []
    for key, pair in _by(points, "topology", "protocol", "algorithm", "ranks", "size").items():
        modes = {p.launch: p for p in pair}
        if "eager" not in modes or "graph" not in modes:
            continue
        checks += 1
        eager, graph = modes["eager"].latency_us, modes["graph"].latency_us
        if eager < graph * (1 - TOLERANCE):
            found.append(Violation("eager-ge-graph", f"{modes['graph'].config} {key[4]} B: eager {eager:.3f} us "
                                   f"< graph {graph:.3f} us", 1 - eager / graph))
    return checks, found


CHECKS = {"size-monotone": size_monotone, "rank-monotone": rank_monotone, "busbw-bound": busbw_bound,
          "ring-8B-order": ring_order, "eager-ge-graph": eager_ge_graph}


def check(points: list[Point]) -> dict[str, tuple[int, list[Violation]]]:
    """``rule -> (checks made, violations)`` for every rule of :data:`RULES`."""
    return {rule: CHECKS[rule](points) for rule in RULES}


def report(results: dict[str, tuple[int, list[Violation]]], examples: int) -> int:
    """Print each rule's violations (worst first, ``examples`` of them) and return the total."""
    total = 0
    for rule in RULES:
        checks, found = results[rule]
        total += len(found)
        by_topology: dict[str, int] = {}
        for v in found:
            by_topology[v.topology] = by_topology.get(v.topology, 0) + 1
        where = ", ".join(f"{t} {n}" for t, n in sorted(by_topology.items()))
        print(f"{rule:<16} {len(found):>6} violations of {checks} checks" + (f" ({where})" if where else ""))
        for v in sorted(found, key=lambda v: -v.excess)[:examples]:
            print(f"    {v.text}")
    print(f"{'total':<16} {total:>6} violations")
    return total


def unshared(points: list[Point]) -> None:
    """What the rank rule would say where its premise fails (topologies whose GPUs reach peers over
    different links), for the record."""
    mesh = [p for p in points if not p.shared_egress]
    if not mesh:
        return
    flipped = [Point(p.topology, p.protocol, p.algorithm, p.ranks, p.size, p.launch, p.latency_us, p.busbw_gbps,
                     p.bound_gbps, True) for p in mesh]
    checks, found = rank_monotone(flipped)
    names = ", ".join(sorted({p.topology for p in mesh}))
    print(f"(not counted: on {names}, where each added peer brings its own links, more ranks are faster "
          f"{len(found)} times of {checks})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="the reduced sweep the test suite runs")
    parser.add_argument("--model", default="des", help="performance model (default des)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--examples", type=int, default=5, help="violations printed per rule (default 5)")
    parser.add_argument("--protocols", help="comma-separated protocols to sweep (default: every shipped one)")
    args = parser.parse_args(argv)
    sweep = reduced_sweep() if args.reduced else full_sweep()
    only = None
    if args.protocols:
        from collsim.ir.registry import list_protocols

        only = frozenset(p.strip() for p in args.protocols.split(",") if p.strip())
        unknown = sorted(only - set(list_protocols()))
        if unknown:
            parser.error(f"--protocols: unknown protocol(s) {', '.join(unknown)} "
                         f"(valid: {', '.join(list_protocols())})")
    t0 = time.perf_counter()
    points = simulate(sweep, args.model, args.workers, only)
    wall = time.perf_counter() - t0
    configs = len(points)
    which = ("reduced" if args.reduced else "full") + (", protocols " + ",".join(sorted(only)) if only else "")
    print(f"# {args.model}: {configs} simulated points ({which} sweep) in {wall:.1f} s, {time.strftime('%Y-%m-%d')}")
    total = report(check(points), args.examples)
    unshared(points)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
