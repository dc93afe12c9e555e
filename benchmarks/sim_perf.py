"""Speed of the discrete-event simulator: per scenario, per row, per event, versus message size, versus bare SimPy.

Costs every row of the given scenarios with the ``des`` model in this
process and reports CPU seconds (``time.process_time``: the 2-core test
machines are shared, so wall time there is noisy), simulations and events
per second, and the slowest kinds of row. A reference loop (10 million
integer additions) is timed alongside, so figures from a loaded machine can
be put in proportion. Further modes, each also printing the reference loop:

``--sizes``
    events and CPU ms per simulation from 8 B to 4 GiB at 8 ranks
    (hgx-h100) and 72 ranks (gb200-nvl72) for ll one-shot, barrier
    two-shot, simple ring and ll128 ring: neither may grow with the size.
    Each point is the fastest of ``--repeats`` runs after one untimed
    warm-up run per configuration; a point stops repeating once it has
    used 1 s of CPU (a 72-rank ring simulation takes 1-3 s, so it is timed
    once).
``--engine [SCENARIO]``
    the simulator against a bare SimPy loop: for 8 and 72 ranks x (ll
    one-shot, barrier two-shot, simple ring, ll ring) at 1 MiB, the
    simulation's CPU time, its events E and the IR operations it executes
    (summed over ranks), against (a) a bare loop doing E events (``ranks``
    processes in one Environment, each yielding ``env.timeout`` E/ranks
    times: the engine's own limit) and (b) the same loop doing one event
    per operation (the least a simulator scheduling every operation as an
    event would pay). Then the same totals over every row of SCENARIO
    (default scenarios/8gpu.yaml). Goal: collsim <= 2x bare-E. Bare loops
    run with the cyclic collector paused, as a simulation does.
``--memory``
    peak memory of one 72-rank simple ring 1 MiB simulation and of one pass
    over scenarios/8gpu.yaml, each in a fresh interpreter: the maximum
    resident set (``getrusage``) after imports and after a cold run, and
    the ``tracemalloc`` peak of a second, warm run.
``--symmetry``
    the full simulation (every rank) against the rank-symmetric one that
    scenario rows use (rank 0 alone, :mod:`collsim.sim.symmetry`) for every
    shipped protocol and algorithm at 8 and 72 ranks, 1 MiB: CPU ms of each,
    their events, and whether latency, breakdown and every rank's end are
    identical.
``--by-name``
    ``collsim.simulate(topology="gb200-nvl72", ranks=72, ...)`` against the same call with a loaded
    ``Topology``, for ll one-shot, simple two-shot and ll128 ring at three sizes (the kernel cache
    cleared before each call, so both simulate): the preset is built once per process, so the name
    should cost at most 1.5x the object.
``--profile PROTOCOL,ALGORITHM,RANKS,SIZE[,TOPOLOGY]``
    pyinstrument's call tree of one simulation (after one untimed warm-up
    run); needs ``pip install -e '.[bench]'``.

Scenario passes run for the scenarios named, or for scenarios/8gpu.yaml and
scenarios/nvl72.yaml when no mode is asked for.

    python benchmarks/sim_perf.py                          # scenarios/8gpu.yaml and scenarios/nvl72.yaml
    python benchmarks/sim_perf.py scenarios/8gpu.yaml --sizes
    python benchmarks/sim_perf.py --sizes --ranks 8 --max-size 16MiB --repeats 5
    python benchmarks/sim_perf.py --engine                 # totals over scenarios/8gpu.yaml
    python benchmarks/sim_perf.py --engine scenarios/4gpu.yaml --max-rows 100
    python benchmarks/sim_perf.py --memory
    python benchmarks/sim_perf.py --symmetry --ranks 72
    python benchmarks/sim_perf.py --profile simple,ring,72,1MiB
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import simpy  # noqa: E402

from collsim.ir.registry import load_protocol  # noqa: E402
from collsim.models import get_model, simulate  # noqa: E402
from collsim.results import expand_rows  # noqa: E402
from collsim.scenario import load_scenario  # noqa: E402
from collsim.sim.model import SIMULATED_ITER, forget_kernels, program_for  # noqa: E402
from collsim.topology import load_topology  # noqa: E402
from collsim.units import format_size, parse_size  # noqa: E402
from reference import reference_loop_s  # noqa: E402 - benchmarks/, the script's own directory

#: the preset simulated at each rank count
SYSTEMS = {8: "hgx-h100", 72: "gb200-nvl72"}
SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30, 4 << 30]
SIZE_CONFIGS = (("ll", "one-shot"), ("barrier", "two-shot"), ("simple", "ring"), ("ll128", "ring"))
ENGINE_CONFIGS = (("ll", "one-shot"), ("barrier", "two-shot"), ("simple", "ring"), ("ll", "ring"))
ENGINE_SIZE = 1 << 20
#: a point stops repeating once its runs have used this much CPU
REPEAT_BUDGET_S = 1.0


def fastest(fn: Callable[[], Any], repeats: int, budget_s: float = REPEAT_BUDGET_S) -> tuple[float, Any]:
    """The least CPU seconds of up to ``repeats`` calls of ``fn`` (fewer once ``budget_s`` is used), and its result."""
    best, spent, result = float("inf"), 0.0, None
    for _ in range(max(1, repeats)):
        start = time.process_time()
        result = fn()
        took = time.process_time() - start
        best, spent = min(best, took), spent + took
        if spent >= budget_s:
            break
    return best, result


_TOPOLOGIES: dict[str, Any] = {}


def run_one(protocol: str, algorithm: str, ranks: int, size: int, topology: str | None = None) -> Any:
    """One ``des`` simulation; the topology is the preset for ``ranks`` unless named.

    The topology is loaded once per name and reused, as the rows of a scenario share theirs: a name passed
    to ``simulate`` would load it afresh each call and recompute its routes.
    """
    name = topology or SYSTEMS[ranks]
    if name not in _TOPOLOGIES:
        _TOPOLOGIES[name] = load_topology(name)
    forget_kernels()  # a repeated request would otherwise get the kernel simulated before
    return simulate(_TOPOLOGIES[name], ranks=ranks, algorithm=algorithm, protocol=load_protocol(protocol),
                    size_bytes=size, model="des")


def ops_executed(protocol: Any, algorithm: str, ranks: int, size: int) -> int:
    """IR operations the simulated launch executes, summed over ranks (loops unrolled)."""
    lowered = program_for(protocol, algorithm)[1]
    return sum(len(lowered.flat({"RANK": r, "NRANKS": ranks, "ITER": SIMULATED_ITER, "MSG": size}))
               for r in range(ranks))


# --- scenario passes (the default mode) ------------------------------------------------------------------------

def scenario_speed(path: str) -> None:
    scenario = load_scenario(str(ROOT / path))
    rows, skipped = expand_rows(scenario, model="des")
    _, fn = get_model("des")
    per_kind: dict[tuple, list[float]] = defaultdict(list)
    events = 0
    start_wall, start = time.perf_counter(), time.process_time()
    for row in rows:
        t = time.process_time()
        result = fn(row.request())
        per_kind[(row.ranks, row.algorithm, row.protocol.name)].append(time.process_time() - t)
        events += result.events
    cpu, wall = time.process_time() - start, time.perf_counter() - start_wall
    print(f"\n{path}: {len(rows)} simulations ({len(skipped)} combinations skipped)")
    print(f"  CPU {cpu:.2f} s (wall {wall:.2f} s), {cpu / len(rows) * 1e3:.2f} ms per simulation, "
          f"{events / len(rows):.0f} events per simulation, {events / cpu:,.0f} events per CPU second")
    slowest = sorted(per_kind.items(), key=lambda kv: -sum(kv[1]))[:5]
    for (ranks, algorithm, protocol), times in slowest:
        print(f"  {protocol} {algorithm} x{ranks}: {sum(times):.2f} s over {len(times)} sizes "
              f"({sum(times) / len(times) * 1e3:.1f} ms each)")


# --- --sizes -----------------------------------------------------------------------------------------------------

def by_size(ranks: int, sizes: list[int], repeats: int) -> None:
    """Events and CPU ms per simulation at every size, for each of :data:`SIZE_CONFIGS`."""
    topology = SYSTEMS[ranks]
    events: dict[tuple, list[int]] = {}
    millis: dict[tuple, list[float]] = {}
    for name, algorithm in SIZE_CONFIGS:
        run_one(name, algorithm, ranks, sizes[0])  # warm-up: program generation, topology and cost caches
        events[name, algorithm], millis[name, algorithm] = [], []
        for size in sizes:
            seconds, result = fastest(lambda: run_one(name, algorithm, ranks, size), repeats)
            events[name, algorithm].append(result.events)
            millis[name, algorithm].append(seconds * 1e3)
    header = "| protocol | algorithm | " + " | ".join(format_size(s) for s in sizes) + " | max/min |"
    rule = "|---|---|" + "---:|" * (len(sizes) + 1)
    print(f"\nevents per simulation on {topology}, {ranks} ranks:")
    print(header)
    print(rule)
    for (name, algorithm), counts in events.items():
        print(f"| {name} | {algorithm} | " + " | ".join(str(c) for c in counts)
              + f" | {max(counts) / max(1, min(counts)):.2f} |")
    print(f"\nCPU ms per simulation on {topology}, {ranks} ranks (fastest of up to {repeats}):")
    print(header)
    print(rule)
    for (name, algorithm), ms in millis.items():
        print(f"| {name} | {algorithm} | " + " | ".join(f"{m:.1f}" for m in ms)
              + f" | {max(ms) / max(1e-9, min(ms)):.2f} |")


# --- --symmetry --------------------------------------------------------------------------------------------------

def symmetry_gain(ranks_list: list[int], repeats: int) -> None:
    """Full simulation against rank 0 alone, for every shipped protocol and algorithm."""
    from collsim.ir.registry import list_protocols
    from collsim.models import SimRequest
    from collsim.sim.model import run_des

    for ranks in ranks_list:
        topology = SYSTEMS[ranks]
        if topology not in _TOPOLOGIES:
            _TOPOLOGIES[topology] = load_topology(topology)
        print(f"\nfull simulation against rank 0 alone on {topology}, {ranks} ranks, {format_size(ENGINE_SIZE)} "
              f"(CPU ms, fastest of up to {repeats}):")
        print("| protocol | algorithm | full ms | one rank ms | speed-up | full events | one-rank events | identical |")
        print("|---|---|---:|---:|---:|---:|---:|---|")
        for name in list_protocols():
            protocol = load_protocol(name)
            for algorithm in protocol.algorithms:
                request = SimRequest(topology=_TOPOLOGIES[topology], ranks=ranks, algorithm=algorithm,
                                     protocol=protocol, size_bytes=ENGINE_SIZE)
                run_des(request, symmetric=True)  # warm-up: program, routes, the topology's rotation
                full_s, full = fastest(lambda: run_des(request), repeats)
                one_s, one = fastest(lambda: run_des(request, symmetric=True), repeats)
                same = (full.breakdown == one.breakdown and full.latency_us == one.latency_us
                        and full.outcome.ends == one.outcome.ends)
                print(f"| {name} | {algorithm} | {full_s * 1e3:.1f} | {one_s * 1e3:.1f} | {full_s / one_s:.1f}x | "
                      f"{full.outcome.events} | {one.outcome.events} | {'yes' if same else 'NO'} |")


# --- --engine ----------------------------------------------------------------------------------------------------

def bare_simpy_s(events: int, processes: int, repeats: int = 3) -> float:
    """Least CPU seconds of a bare SimPy run: ``processes`` processes in one Environment yielding
    ``events`` timeouts between them, with the cyclic collector paused (as a simulation runs)."""
    processes = max(1, processes)

    def proc(env: simpy.Environment, count: int):
        timeout = env.timeout
        for _ in range(count):
            yield timeout(0.001)

    def once() -> None:
        env = simpy.Environment()
        each, extra = divmod(events, processes)
        for i in range(processes):
            env.process(proc(env, each + (i < extra)))
        env.run()

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return fastest(once, repeats)[0]
    finally:
        if was_enabled:
            gc.enable()


def engine_row(label: str, seconds: float, events: int, ops: int, bare_e: float, bare_ops: float) -> str:
    return (f"| {label} | {seconds * 1e3:.2f} | {events} | {ops} | {bare_e * 1e3:.3f} | {bare_ops * 1e3:.3f} | "
            f"{seconds / max(bare_e, 1e-9):.1f} | {seconds / max(bare_ops, 1e-9):.1f} | "
            f"{events / max(seconds, 1e-9):,.0f} | {ops / max(seconds, 1e-9):,.0f} |")


ENGINE_HEADER = ("| configuration | collsim ms | E | ops | bare-E ms | bare-ops ms | collsim/bare-E | collsim/bare-ops "
                 "| events/s | ops/s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def engine_overhead(scenario: str | None, repeats: int, ranks_list: list[int], max_rows: int | None) -> None:
    per_event = bare_simpy_s(100_000, 8, repeats) / 100_000
    print(f"\nbare SimPy loop: {per_event * 1e6:.2f} us CPU per timeout event (100,000 events, 8 processes)")
    print(f"\ncollsim against a bare SimPy loop, {format_size(ENGINE_SIZE)} per rank "
          f"(CPU ms, fastest of up to {repeats}; goal collsim/bare-E <= 2):")
    print(ENGINE_HEADER)
    for ranks in ranks_list:
        for name, algorithm in ENGINE_CONFIGS:
            run_one(name, algorithm, ranks, ENGINE_SIZE)  # warm-up
            seconds, result = fastest(lambda: run_one(name, algorithm, ranks, ENGINE_SIZE), repeats)
            ops = ops_executed(load_protocol(name), algorithm, ranks, ENGINE_SIZE)
            bare_e, bare_ops = bare_simpy_s(result.events, ranks), bare_simpy_s(ops, ranks)
            print(engine_row(f"{name} {algorithm} x{ranks} {SYSTEMS[ranks]}", seconds, result.events, ops,
                             bare_e, bare_ops))
    if scenario:
        scenario_engine_totals(scenario, repeats, max_rows)


def scenario_engine_totals(path: str, repeats: int, max_rows: int | None) -> None:
    """Every row of one scenario run once, against per-row bare loops of the same events and operations."""
    rows, _ = expand_rows(load_scenario(str(ROOT / path)), model="des")
    rows = rows[:max_rows] if max_rows else rows
    _, fn = get_model("des")
    seconds = bare_e = bare_ops = 0.0
    events = ops = 0
    for row in rows:
        request = row.request()
        start = time.process_time()
        result = fn(request)
        seconds += time.process_time() - start
        n_ops = ops_executed(request.protocol, request.algorithm, request.ranks, request.size_bytes)
        events, ops = events + result.events, ops + n_ops
        bare_e += bare_simpy_s(result.events, request.ranks, repeats)
        bare_ops += bare_simpy_s(n_ops, request.ranks, repeats)
    print(f"\n{path}: {len(rows)} simulations, each run once (cold: first sizes pay program and cache set-up), "
          f"against per-row bare loops:")
    print(ENGINE_HEADER)
    print(engine_row(f"all {len(rows)} rows", seconds, events, ops, bare_e, bare_ops))


# --- --memory ----------------------------------------------------------------------------------------------------

def _maxrss_mib() -> float:
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def memory_child(kind: str, max_rows: int | None) -> None:
    """In a fresh interpreter: maxrss after imports and after a cold run, then the tracemalloc peak of a warm run."""
    import tracemalloc

    if kind == "sim":
        def work() -> None:
            run_one("simple", "ring", 72, 1 << 20)
    else:
        rows, _ = expand_rows(load_scenario(str(ROOT / "scenarios/8gpu.yaml")), model="des")
        rows = rows[:max_rows] if max_rows else rows
        _, fn = get_model("des")

        def work() -> None:
            for row in rows:
                fn(row.request())
    gc.collect()
    before = _maxrss_mib()
    start = time.process_time()
    work()
    cpu = time.process_time() - start
    after = _maxrss_mib()
    gc.collect()
    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"before": before, "after": after, "peak": peak / (1 << 20), "cpu": cpu}))


def memory_peaks(max_rows: int | None) -> None:
    runs = (("sim", "simple ring x72 gb200-nvl72, 1 MiB"), ("scenario", "scenarios/8gpu.yaml pass"))
    print("\npeak memory, each in a fresh interpreter (MiB; maxrss includes the interpreter and imports):")
    print("| run | maxrss after imports | maxrss after cold run | growth | tracemalloc peak (warm run) | CPU s (cold) |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, label in runs:
        command = [sys.executable, str(Path(__file__).resolve()), "--memory-child", kind]
        if max_rows:
            command += ["--max-rows", str(max_rows)]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        m = json.loads(out.strip().splitlines()[-1])
        if kind == "scenario" and max_rows:
            label += f" (first {max_rows} rows)"
        print(f"| {label} | {m['before']:.1f} | {m['after']:.1f} | {m['after'] - m['before']:.1f} | "
              f"{m['peak']:.1f} | {m['cpu']:.2f} |")


# --- --by-name ---------------------------------------------------------------------------------------------------

def by_name(repeats: int) -> None:
    topo = load_topology("gb200-nvl72")
    print("\n72-rank simulate() by preset name against a loaded Topology (CPU ms, fastest of three sizes x "
          f"{repeats}):")
    print("| protocol | algorithm | by name | Topology | ratio |")
    print("|---|---|---:|---:|---:|")
    for protocol, algorithm in (("ll", "one-shot"), ("simple", "two-shot"), ("ll128", "ring")):
        simulate(topo, ranks=72, algorithm=algorithm, protocol=protocol, size_bytes=1024)
        best = {"name": float("inf"), "object": float("inf")}
        for _ in range(repeats):
            for label, spec in (("name", "gb200-nvl72"), ("object", topo)):
                for size in (8 << 10, 16 << 10, 32 << 10):
                    forget_kernels()
                    start = time.process_time()
                    simulate(spec, ranks=72, algorithm=algorithm, protocol=protocol, size_bytes=size + 8)
                    best[label] = min(best[label], time.process_time() - start)
        print(f"| {protocol} | {algorithm} | {best['name'] * 1e3:.1f} | {best['object'] * 1e3:.1f} | "
              f"{best['name'] / best['object']:.2f}x |")


# --- --profile ---------------------------------------------------------------------------------------------------

def profile(spec: str) -> int:
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("\n--profile needs pyinstrument: pip install -e '.[bench]'  (or pip install pyinstrument)",
              file=sys.stderr)
        return 1
    parts = spec.split(",")
    if len(parts) not in (4, 5):
        raise SystemExit(f"--profile wants PROTOCOL,ALGORITHM,RANKS,SIZE[,TOPOLOGY], not {spec!r}")
    name, algorithm, ranks, size = parts[0], parts[1], int(parts[2]), parse_size(parts[3])
    topology = parts[4] if len(parts) == 5 else SYSTEMS.get(ranks)
    if topology is None:
        raise SystemExit(f"no preset for {ranks} ranks: name the topology as a fifth field")
    run_one(name, algorithm, ranks, size, topology)  # warm-up
    profiler = Profiler(interval=0.001)
    start = time.process_time()
    profiler.start()
    result = run_one(name, algorithm, ranks, size, topology)
    profiler.stop()
    cpu = time.process_time() - start
    print(f"\nprofile of {name} {algorithm} x{ranks} {topology}, {format_size(size)}: "
          f"{result.events} events, CPU {cpu:.3f} s (profiled)")
    print(profiler.output_text(unicode=False, color=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*",
                        help="scenario files to run whole (default: 8gpu and nvl72 when no mode is asked for)")
    parser.add_argument("--sizes", action="store_true", help="events and CPU ms per simulation versus size")
    parser.add_argument("--engine", nargs="?", const="scenarios/8gpu.yaml", metavar="SCENARIO",
                        help="collsim against a bare SimPy loop, with totals over SCENARIO (default 8gpu)")
    parser.add_argument("--memory", action="store_true", help="peak memory of one 72-rank simulation and one 8gpu pass")
    parser.add_argument("--symmetry", action="store_true", help="full simulation against rank 0 alone")
    parser.add_argument("--by-name", action="store_true", help="72-rank simulate() by preset name against a Topology")
    parser.add_argument("--profile", metavar="PROTOCOL,ALGORITHM,RANKS,SIZE[,TOPOLOGY]",
                        help="pyinstrument profile of one simulation")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per timed point, the fastest kept (stops after 1 s of CPU; default 3)")
    parser.add_argument("--ranks", type=int, action="append", choices=sorted(SYSTEMS),
                        help="rank counts for --sizes, --engine and --symmetry (repeatable; default 8 and 72)")
    parser.add_argument("--max-size", type=parse_size, help="largest size for --sizes (default 4GiB)")
    parser.add_argument("--max-rows", type=int, help="only the first N rows for --engine and --memory scenario passes")
    parser.add_argument("--memory-child", choices=("sim", "scenario"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child, args.max_rows)
        return 0
    ranks_list = args.ranks or sorted(SYSTEMS)
    modes = args.sizes or args.engine or args.memory or args.profile or args.symmetry or args.by_name
    scenarios = args.scenarios or ([] if modes else ["scenarios/8gpu.yaml", "scenarios/nvl72.yaml"])
    status = 0
    print(f"{time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, SimPy {simpy.__version__}, "
          f"{platform.machine()}, reference loop {reference_loop_s():.2f} s")
    for path in scenarios:
        scenario_speed(path)
    if args.sizes:
        sizes = [s for s in SIZES if args.max_size is None or s <= args.max_size] or SIZES[:1]
        for ranks in ranks_list:
            by_size(ranks, sizes, args.repeats)
    if args.engine:
        engine_overhead(args.engine, args.repeats, ranks_list, args.max_rows)
    if args.memory:
        memory_peaks(args.max_rows)
    if args.symmetry:
        symmetry_gain(ranks_list, args.repeats)
    if args.by_name:
        by_name(args.repeats)
    if args.profile:
        status = profile(args.profile)
    print(f"\nreference loop again: {reference_loop_s():.2f} s")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
