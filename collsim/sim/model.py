"""The ``des`` model: generate the protocol's program, simulate one launch, attribute its time.

:func:`run_des` returns everything a caller may want to look at (the
critical path for ``collsim explain``, the raw outcome); :func:`des_model`
is the registered model function and returns a
:class:`~collsim.models.SimResult`.
"""
from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Sequence

from collsim.algorithms import generate
from collsim.errors import CollsimError, InputError
from collsim.ir.program import Program
from collsim.models import LAUNCH_MODES, SimRequest, SimResult
from collsim.sim.channels import default_channels, ring_channels
from collsim.sim.costs import GENERATIONS, Costs, load_costs
from collsim.sim.links import FoldAbandoned
from collsim.sim.lower import SimProgram, lower_for_sim
from collsim.sim.memo import LruCache, PerTopology
from collsim.sim.simulation import Outcome, Simulation, _route_facts, _route_table, buffer_inits
from collsim.sim.symmetry import Fold, Rotation, fold_or_reason, rotation_or_reason
from collsim.sim.trace import PathStep, breakdown_of, critical_path

__all__ = ["DesRun", "run_des", "run_launches", "des_model", "program_for", "generation_of", "symmetry_of",
           "harness_us", "forget_kernels"]

#: The launch index simulated: the first use of every slot, which costs what a steady-state launch does
#: (see collsim.sim.memory).
SIMULATED_ITER = 0


@dataclass
class DesRun:
    """One simulated launch: the request, what it used, what happened and the critical path."""

    request: SimRequest
    costs: Costs
    channels: int
    outcome: Outcome
    steps: list[PathStep]
    breakdown: dict[str, float]
    notes: list[str]
    #: how the launch was simulated: rank 0 alone for all ranks, or every rank and why (see collsim.sim.symmetry)
    symmetry: str = "every rank simulated"
    #: what the measurement harness charged before the kernel started (in ``breakdown["launch"]``)
    before_kernel_us: float = 0.0

    @property
    def latency_us(self) -> float:
        return sum(self.breakdown.values())


def _protocol_key(protocol: Any) -> tuple:
    params = getattr(protocol, "params", {}) or {}
    return (type(protocol), tuple(sorted((k, repr(v)) for k, v in params.items())))


#: (protocol key, algorithm) -> (program, its lowering)
_PROGRAMS = LruCache(256)


def program_for(protocol: Any, algorithm: str) -> tuple[Program, SimProgram]:
    """The generated program and its lowered form, cached per protocol class, parameters and algorithm."""
    def build() -> tuple[Program, SimProgram]:
        program = generate(protocol, algorithm)
        return program, lower_for_sim(program)

    return _PROGRAMS.get((_protocol_key(protocol), algorithm), build)


def per_cta_rate(lowered: SimProgram, costs: Costs, topology: Any, ranks: int) -> float:
    """The per-CTA bandwidth (GB/s) of the slowest op kind that moves the program's data (all-thread loads,
    stores and atomics): what decides how many CTAs saturate the links. A CTA pulls the loads it keeps in
    flight over the round trip to a peer (rank 0 to rank 1)."""
    c = costs.nvlink
    if not lowered.loads_data:
        return c.cta_store_gbps
    facts = _route_facts(topology, _route_table(topology), 0, 1), _route_facts(topology, _route_table(topology), 1, 0)
    route_costs = costs.for_route(facts[0][2] and facts[1][2])
    load = route_costs.cta_bytes_in_flight / (facts[0][1] + route_costs.remote_read_us + facts[1][1]) / 1e3
    return min(load, c.cta_store_gbps) if lowered.stores_data else load


def channels_for(request: SimRequest, costs: Costs, program: Program, lowered: SimProgram) -> int:
    """The channels (CTAs per rank) a launch uses: the request's, else what NCCL would give a ring and what
    the symmetric-memory kernels give one-shot and two-shot programs (:mod:`collsim.sim.channels`). A program
    that states its CTAs per rank (:attr:`collsim.ir.protocol.Protocol.ctas`) runs that many."""
    if program.ctas > 1:
        return program.ctas
    if request.channels:
        return request.channels
    topo, n = request.topology, request.ranks
    if program.algorithm == "ring":
        return ring_channels(topo, n, costs, request.protocol.analytic_family, request.size_bytes)
    return default_channels(topo, n, costs, request.size_bytes, per_cta_rate(lowered, costs, topo, n))


def harness_us(costs: Costs, launch: str, kernel_us: float) -> float:
    """What the measurement harness ``launch`` adds to a kernel that takes ``kernel_us`` in CUDA-graph steady
    state (:data:`collsim.models.LAUNCH_MODES`).

    ``graph``: nothing (the kernel's start is part of it). ``eager`` and ``host-loop``: back-to-back launches
    overlap the running kernel, so a call costs the slower of the host's part of the call (a collective
    library's launch, ``launch_overhead_us``, or one custom-op call from a host loop, ``host_call_us``) and
    the kernel behind the stream gap a stream-ordered launch pays. ``events``: one call between two CUDA
    events with its launch hidden: the stream gap, the event pair's floor and what the harness's cache flush
    costs the call. ``single-call``: one call on an idle stream between two CUDA events (after a barrier):
    the host's launch falls inside the interval, so the event pair's floor and the whole launch.

    >>> costs = load_costs("hopper", {"launch_overhead_us": 4.0})
    >>> harness_us(costs, "graph", 10.0), harness_us(costs, "eager", 10.0), harness_us(costs, "eager", 1.0)
    (0.0, 0.6, 3.0)
    """
    c = costs.nvlink
    if launch == "graph":
        return 0.0
    if launch == "eager":
        return max(c.launch_overhead_us - kernel_us, c.stream_gap_us)
    if launch == "host-loop":
        return max(c.host_call_us - kernel_us, c.stream_gap_us)
    if launch == "events":
        return c.stream_gap_us + c.event_pair_us + c.harness_cold_us
    if launch == "single-call":
        return c.event_pair_us + c.launch_overhead_us
    raise InputError(f"unknown launch mode {launch!r}", field="launch", choices=LAUNCH_MODES)


def generation_of(topology: Any, ranks: int) -> str:
    """The oldest GPU generation among GPUs ``0 .. ranks-1`` (NCCL indexes its tables the same way)."""
    gens = _generations(topology, ranks)
    unknown = sorted(gens - set(GENERATIONS))
    if unknown:
        raise InputError(f"the des model has no cost file for GPU generation {unknown[0]!r}", field="topology",
                         choices=GENERATIONS)
    return min(gens, key=GENERATIONS.index)


#: topology -> {ranks: the generations of GPUs 0 .. ranks-1}
_GENERATIONS = PerTopology()


def _generations(topology: Any, ranks: int) -> frozenset:
    return _GENERATIONS.get(topology, ranks,
                            lambda: frozenset(str(topology.generation(r)).lower() for r in range(ranks)))


#: (generation, frozen overrides) -> the resolved cost set
_COSTS = LruCache(256)


def _cached_costs(generation: str, overrides: tuple) -> Costs:
    return _COSTS.get((generation, overrides), lambda: load_costs(generation, dict(overrides)))


def _freeze(costs: Any) -> tuple:
    items = []
    for key, value in sorted((costs or {}).items(), key=lambda kv: str(kv[0])):
        if isinstance(value, dict):
            value = tuple(sorted(value.items()))
        items.append((key, value))
    return tuple(items)


#: topology -> {ranks: whether every route among GPUs 0 .. ranks-1 is NVLink only}
_NVLINK_ONLY = PerTopology()


def _all_nvlink(topo: Any, n: int) -> bool:
    """Whether every route among GPUs ``0 .. n-1`` is NVLink only (cached: it is asked once per row)."""
    return _NVLINK_ONLY.get(
        topo, n, lambda: all(topo.route(a, b).nvlink_only for a in range(n) for b in range(n) if a != b))


def _notes(request: SimRequest) -> list[str]:
    notes = []
    topo, n = request.topology, request.ranks
    assumptions = tuple(getattr(request.protocol, "assumptions", ()) or ())
    if assumptions and not _all_nvlink(topo, n):
        notes.append(f"{request.protocol.name} relies on {', '.join(assumptions)}, which only verified NVLink "
                     "paths are trusted to provide; costed anyway over this non-NVLink route")
    ctas = getattr(request.protocol, "ctas", 1)
    if ctas > 1 and request.channels and request.channels != ctas:
        notes.append(f"{request.protocol.name} runs {ctas} CTAs per rank, which work together on the message: "
                     f"channels = {request.channels} is not applied")
    return notes


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector for one simulation.

    A simulation allocates a chain of nodes and transfers that stays alive until it ends (the critical
    path walks it backwards), so every collection during the run scans all of it again and finds almost
    nothing: at 72 ranks that was half to two thirds of the run time. Reference counting still frees
    what it can; cycles left over (SimPy's processes and their environment) are collected after the run,
    when the collector is on again. Nested uses leave the collector to the outermost.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_des(request: SimRequest, symmetric: bool = False) -> DesRun:
    """Simulate one launch of ``request`` (see :mod:`collsim.sim`).

    With ``symmetric``, a launch whose ranks provably all do what rank 0 does is simulated as rank 0 alone
    (:mod:`collsim.sim.symmetry`): the same latency and breakdown, rank 0's events, and a critical path
    whose steps all name rank 0.
    """
    with _collector_paused():
        return _run_des(request, symmetric)


def run_launches(request: SimRequest, sizes: "Sequence[int]", symmetric: bool = False) -> list[DesRun]:
    """Simulate consecutive launches whose message sizes differ (``sizes``, bytes per rank), each at its own size.

    A protocol declares ``varying_sizes`` when its kernel takes the size as an argument and its buffers are
    allocated once, for the largest message: each launch then moves, polls and waits for exactly its own
    lines, and costs what a launch of that size costs (the size sets the bytes on the wire, the lines polled
    and the loop trips; the allocation costs nothing at run time). ``request.size_bytes`` is ignored.

    Raises
    ------
    InputError
        when the sizes differ but the protocol runs every launch at one size (no ``varying_sizes``).

    Examples
    --------
    >>> from collsim.models import SimRequest, resolve_protocol
    >>> from collsim.topology import load_topology
    >>> req = SimRequest(topology=load_topology("hgx-h100"), ranks=4, algorithm="one-shot",
    ...                  protocol=resolve_protocol("ll"), size_bytes=64)
    >>> first, second = run_launches(req, [1024, 1024])
    >>> first.latency_us == second.latency_us == run_des(replace(req, size_bytes=1024)).latency_us
    True
    """
    sizes = [int(size) for size in sizes]
    if len(set(sizes)) > 1 and not getattr(request.protocol, "varying_sizes", False):
        raise InputError(f"protocol {request.protocol.name!r} runs every launch at one message size (it does not "
                         "declare varying_sizes): per-launch sizes do not apply", field="sizes")
    return [run_des(replace(request, size_bytes=size), symmetric=symmetric) for size in sizes]


def _fold(request: SimRequest, costs: Costs, lowered: SimProgram, items: list[list[Any]]) -> Fold | str:
    """The rank-symmetry fold of this launch, or why it cannot be simulated as one rank."""
    c = costs.nvlink
    if request.timeline:
        return "a timeline shows every rank"
    if c.start_skew_us:
        return f"ranks start at different times (start_skew_us = {c.start_skew_us})"
    if c.transfer_pieces > 1 or costs.pcie.transfer_pieces > 1:
        return "transfers are issued in pieces (transfer_pieces > 1)"
    if lowered.host_memory:
        return "host memory and host proxy threads are simulated rank by rank"
    topo = request.topology
    table = _route_table(topo)

    def facts(src: int, dst: int) -> tuple:
        return _route_facts(topo, table, src, dst)

    rotation = rotation_or_reason(topo, request.ranks, facts)
    return fold_or_reason(items, lowered, rotation, facts) if isinstance(rotation, Rotation) else rotation


def symmetry_of(request: SimRequest) -> str | None:
    """None if scenario rows would simulate ``request`` as rank 0 alone (before running it), else why not."""
    topo, n = request.topology, request.ranks
    costs = _cached_costs(generation_of(topo, n), _freeze(request.costs))
    program, lowered = program_for(request.protocol, request.algorithm)
    if program.ctas > 1:
        return _SEVERAL_CTAS
    items = _bound_items(program, lowered, n, request.size_bytes)
    fold = _fold(replace(request, timeline=False), costs, lowered, items)
    return None if isinstance(fold, Fold) else fold


#: why a program of several CTAs per rank is not folded to rank 0 (the fold rotates one process per rank)
_SEVERAL_CTAS = "several CTAs per rank: every CTA of every rank simulated"


def _bound_items(program: Program, lowered: SimProgram, n: int, size: int) -> list[list[Any]]:
    """Each rank's bound items; with several CTAs per rank, each CTA's (rank-major: rank r's CTA c at
    ``r * ctas + c``)."""
    env = {"NRANKS": n, "ITER": SIMULATED_ITER, "MSG": size}
    if program.ctas == 1:
        return [lowered.bind(program.cta_env({"RANK": r, **env}, 0), reuse=True) for r in range(n)]
    return [lowered.bind(program.cta_env({"RANK": r, **env}, c)) for r in range(n) for c in range(program.ctas)]


def _run_des(request: SimRequest, symmetric: bool = False) -> DesRun:
    topo, n = request.topology, request.ranks
    costs = _cached_costs(generation_of(topo, n), _freeze(request.costs))
    program, lowered = program_for(request.protocol, request.algorithm)
    channels = channels_for(request, costs, program, lowered)
    c = costs.nvlink
    # what the harness charges before the kernel (the part of it that depends on the kernel's own length,
    # a launch-bound eager loop, is added to the result by des_model)
    launch_us = harness_us(costs, request.launch, math.inf) if request.launch != "graph" else 0.0
    start = launch_us + c.kernel_start_us
    items = _bound_items(program, lowered, n, request.size_bytes)
    inits = buffer_inits(program)
    outcome = None
    symmetry = "every rank simulated"
    fold = (_fold(request, costs, lowered, items) if program.ctas == 1 else _SEVERAL_CTAS) if symmetric else None
    if isinstance(fold, Fold):
        try:
            outcome = Simulation(topo, n, items, inits, costs, channels, start, launch_us, fold=fold,
                                 elem_bytes=request.elem_bytes, data_atomics=lowered.data_atomics).run()
            symmetry = f"rank 0 simulated for all {n} ranks: each runs rank 0's program rotated by its rank"
        except (FoldAbandoned, CollsimError) as err:
            # order-dependent sharing or writes, or a hang: the full simulation decides
            symmetry = f"every rank simulated: one rank's simulation was abandoned ({err})"
    elif fold is not None:
        symmetry = f"every rank simulated: {fold}"
    if outcome is None:
        outcome = Simulation(topo, n, items, inits, costs, channels, start, launch_us,
                             record=request.timeline, elem_bytes=request.elem_bytes,
                             data_atomics=lowered.data_atomics, ctas=program.ctas).run()
    steps = critical_path(outcome.finals[outcome.slowest])
    return DesRun(request, costs, channels, outcome, steps, breakdown_of(steps), _notes(request), symmetry,
                  launch_us)


def _timeline(run: DesRun) -> list[dict[str, Any]]:
    events = []
    for node in run.outcome.nodes:
        if node.end > node.start:
            cause = node.cause
            peer = getattr(cause, "rank", None) if cause is not None and node.cause_at > node.start else None
            events.append({"rank": node.rank, "kind": node.kind, "start_us": node.start, "end_us": node.end,
                           "peer": peer if peer != node.rank else None, "bytes": 0,
                           "label": f"{node.what} {node.name}".strip()})
    for tr in run.outcome.transfers:
        if tr.finish > tr.start:
            events.append({"rank": tr.rank, "kind": "data" if tr.payload else "sync", "start_us": tr.start,
                           "end_us": tr.finish, "peer": None if tr.local else tr.peer, "bytes": int(tr.nbytes),
                           "label": f"{tr.what} {tr.name}"})
    events.sort(key=lambda e: (e["rank"], e["start_us"], e["end_us"]))
    return events


#: topology -> its simulated kernels, {kernel key: (breakdown, events, notes, channels)}
_KERNELS = PerTopology()
#: Kernels kept per topology: a scenario lists every size of a configuration for one launch mode, then
#: for the other, so the same kernel comes back a few dozen rows later.
KERNELS_KEPT = 256


def forget_kernels() -> None:
    """Empty the cache of simulated kernels, so that the next request simulates (for benchmarks that time
    repeated requests; results do not change)."""
    _KERNELS.clear()


def _kernel_key(request: SimRequest) -> tuple:
    """Everything a kernel's simulation depends on; the launch mode is not part of it (see des_model)."""
    return (request.ranks, request.algorithm, _protocol_key(request.protocol), request.size_bytes,
            request.channels, _freeze(request.costs))


def _kernel(request: SimRequest) -> tuple[dict[str, float], int, tuple[str, ...], int]:
    """``(breakdown, events, notes, channels)`` of the kernel alone (a graph launch), simulated once per
    kernel key and topology while it stays among the :data:`KERNELS_KEPT` most recent."""
    def simulate() -> tuple[dict[str, float], int, tuple[str, ...], int]:
        run = run_des(replace(request, launch="graph"), symmetric=True)
        return run.breakdown, run.outcome.events, tuple(run.notes), run.channels

    kernels = _KERNELS.get(request.topology, "kernels", lambda: LruCache(KERNELS_KEPT))
    return kernels.get(_kernel_key(request), simulate)


def des_model(request: SimRequest) -> SimResult:
    """The registered ``des`` model function.

    Every measurement harness times the same kernel (:func:`harness_us` says what each adds to it), and
    nothing in the model depends on absolute time, so the kernel is simulated once, as a graph launch, and
    each launch mode's result is that kernel's with its harness added to ``launch``: a scenario with
    several modes simulates each kernel once. (A timeline is simulated with the harness before the
    kernel, at its absolute times.)
    """
    # The run's nodes are freed (by reference counting) before the collector is on again, so it has
    # little left to scan.
    with _collector_paused():
        costs = _cached_costs(generation_of(request.topology, request.ranks), _freeze(request.costs))
        if request.timeline:
            run = run_des(request)
            breakdown = dict(run.breakdown)
            kernel = sum(breakdown.values()) - run.before_kernel_us
            breakdown["launch"] += harness_us(costs, request.launch, kernel) - run.before_kernel_us
            result = SimResult.from_breakdown(request, breakdown, model="des", timeline=_timeline(run),
                                              events=run.outcome.events, notes=run.notes, channels=run.channels)
            del run
            return result
        breakdown, events, notes, channels = _kernel(request)
        if request.launch != "graph":
            breakdown = dict(breakdown)
            breakdown["launch"] += harness_us(costs, request.launch, sum(breakdown.values()))
        return SimResult.from_breakdown(request, breakdown, model="des", events=events, notes=list(notes),
                                        channels=channels)
