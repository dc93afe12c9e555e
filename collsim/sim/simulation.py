"""One simulated launch: all ranks' programs on one topology, in one SimPy environment.

:class:`Simulation` owns what ranks share: the clock, the pipes (every
directed link used, each rank's store/load engines and HBM), symmetric
memory, and the record of nodes and transfers for the timeline. Ranks
start together (the previous launch has completed everywhere) after the
launch overhead (eager mode only) and the kernel start.

Scale rule: a simulation schedules a bounded number of SimPy events per
operation of the program (a catch-up timeout before shared work, one wake-up
per poll, one process per lane of a loop that polls) and none per byte or
line, so its event count does not depend on the message size (see
:mod:`collsim.sim.links` for how a range is costed whole). With
``transfer_pieces = P > 1`` every remote range is instead issued as ``P``
pieces, each placed when the previous one is through, so concurrent
transfers interleave piece by piece: a fine-grained reference whose event
count grows with ``P``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import simpy

from collsim.errors import CollsimError, InputError
from collsim.sim.host import host_link, is_host_owner
from collsim.sim.costs import Costs
from collsim.sim.links import Pipe, Transfer, WatchedPipe, place, reserve
from collsim.sim.lower import ATOMIC, Block, cta_copy
from collsim.sim.memo import PerTopology
from collsim.sim.memory import SENTINEL, Memory
from collsim.sim.folded import FoldedRank
from collsim.sim.rank import Rank
from collsim.sim.trace import PathNode

__all__ = ["RouteInfo", "Simulation", "Outcome", "ATOMIC_OP_BYTES"]

#: Payload of one vector atomic (red.add.v4.f32), the unit in which a destination's L2 atomic rate is counted.
ATOMIC_OP_BYTES = 16


#: topology -> {(src, dst): (((u, v), effective GB/s) per link, latency, nvlink_only)}; routes do not change
_ROUTE_FACTS = PerTopology()


def _route_table(topology: Any) -> dict:
    """This topology's route facts, ``{(src, dst): facts}``, filled as routes are asked for."""
    return _ROUTE_FACTS.table(topology)


def _route_facts(topology: Any, table: dict, src: int, dst: int) -> tuple:
    facts = table.get((src, dst))
    if facts is None:
        route = topology.route(src, dst)
        links = tuple(((u, v), topology.directed_link_capacity(u, v)[1]) for u, v in route.links)
        facts = table[(src, dst)] = (links, float(route.latency_us), bool(route.nvlink_only))
    return facts


class RouteInfo(NamedTuple):
    """The pipes (directed links, in order), latency and cost parameters of one rank-to-rank route.

    (A named tuple: a 72-rank simulation makes one per ordered pair of ranks, about 5000.)"""

    pipes: tuple[Pipe, ...]
    latency: float
    costs: Any
    nvlink_only: bool


@dataclass
class Outcome:
    """What a simulation produced: per-rank end times and final nodes, the events processed, the records."""

    ends: list[float]
    finals: list[PathNode]
    events: int
    nodes: list[PathNode] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)

    @property
    def slowest(self) -> int:
        """The rank that finished last (lowest index among ties)."""
        return max(range(len(self.ends)), key=lambda r: (self.ends[r], -r))


class Simulation:
    """Shared state of one launch (see the module docstring).

    Parameters
    ----------
    topology : Topology
    ranks : int
        GPUs ``0 .. ranks-1`` take part.
    programs : list
        Each rank's bound item tree (:meth:`collsim.sim.lower.SimProgram.bind`).
    inits : dict
        Buffer name -> initial polled-word value (0 or :data:`SENTINEL`).
    costs : Costs
    channels : int
        CTAs per rank: the store and load engines run at ``channels ×`` the
        per-CTA bandwidth.
    start_us : float
        When the kernels start running (what the harness charges before the kernel, and its start).
    launch_us : float
        The part of ``start_us`` the harness charges before the kernel.
    record : bool
        Keep every node and transfer (for the timeline).
    fold : Fold, optional
        Simulate rank 0 alone and give every rank its end (see :mod:`collsim.sim.symmetry`, which decides
        when that is exact).
    elem_bytes : int
        Bytes of one element (what a reduce adds).
    data_atomics : bool
        Whether the programs apply data atomics (then the ranks sharing each owner's L2 atomic unit are
        counted).
    ctas : int
        CTAs per rank of a program that states them (:attr:`collsim.ir.program.Program.ctas`): ``programs``
        then holds each CTA's items (rank ``r``'s CTA ``c`` at ``r * ctas + c``), every CTA is a process of
        its own on its own SM, and a rank's CTAs share its engines (``channels`` = ``ctas`` CTAs' worth),
        its HBM, its links and its memory; the rank ends when its last CTA does.
    """

    def __init__(self, topology: Any, ranks: int, programs: list[list[Any]], inits: dict[str, Any], costs: Costs,
                 channels: int, start_us: float, launch_us: float, record: bool = False, fold: Any = None,
                 elem_bytes: int = 4, data_atomics: bool = False, ctas: int = 1) -> None:
        self.env = simpy.Environment()
        self.topology = topology
        self.costs = costs
        self.channels = channels
        self.ctas = ctas
        #: CTAs one rank process stands for: the launch's channels, or one where every CTA is a process
        self.process_ctas = channels if ctas == 1 else 1
        self._pipes: dict[int, tuple] = {}
        self.record = record
        self.fine = costs.nvlink.transfer_pieces > 1 or costs.pcie.transfer_pieces > 1
        self.memory = Memory(inits)
        self.events = 0
        self.nodes: list[PathNode] = []
        self.transfers: list[Transfer] = []
        self._links: dict[tuple, Pipe] = {}
        self._routes: dict[tuple[int, int], RouteInfo] = {}
        self._host_links: dict[int, Any] = {}  # rank -> its GPU's link to host memory (collsim.sim.host)
        self._route_table = _route_table(topology)
        self._route_costs = {flag: costs.for_route(flag) for flag in (True, False)}
        self.start_us = start_us
        self.launch_us = launch_us
        self.size = ranks
        self.elem_bytes = elem_bytes
        self._atomic_shares: dict[int, float] = {}
        #: owner -> how many ranks' programs apply data atomics to its memory
        self._atomic_senders, self._atomic_fan_out = (_atomic_senders(programs, ctas) if data_atomics
                                                      else ({}, {}))
        if fold is None:
            self._alias: dict = {}
            self._watched: frozenset = frozenset()
            self.ranks = [Rank(self, i // ctas, programs[i]) for i in range(ranks * ctas)]
        else:
            self._alias, self._watched = fold.rotation.alias, fold.watched
            self.ranks = [FoldedRank(self, programs[0], fold)]

    # ------------------------------------------------------------------ shared resources

    def rank_pipes(self, rank: int) -> tuple[Pipe, Pipe, Pipe, Pipe]:
        """``(store engine, remote load engine, HBM, local load engine)`` of ``rank``: its CTAs' stores, their
        remote loads (the loads in flight over the shortest round trip to a peer), its HBM, and its CTAs'
        loads of local memory (polled lines, reduce inputs). The processes of one rank's CTAs share them."""
        pipes = self._pipes.get(rank)
        if pipes is None:
            pipes = self._pipes[rank] = self._new_rank_pipes(rank)
        return pipes

    def _new_rank_pipes(self, rank: int) -> tuple[Pipe, Pipe, Pipe, Pipe]:
        info = self.topology.gpu_info(rank)
        c = self.costs.nvlink
        hbm = float(info.get("hbm_gbps") or 0.0)
        if hbm <= 0:
            raise InputError(f"GPU {rank} of topology {self.topology.name!r} has no HBM bandwidth", field="topology")
        peers = [p for p in range(self.size) if p != rank] or [rank]
        in_flight = max(self.route(p, rank).costs.cta_bytes_in_flight / self.round_trip(rank, p) for p in peers)
        return (Pipe(f"rank{rank}.store_engine", self.channels * c.cta_store_gbps),
                Pipe(f"rank{rank}.load_engine", self.channels * in_flight / 1e3),
                Pipe(f"rank{rank}.hbm", hbm * c.hbm_efficiency),
                Pipe(f"rank{rank}.local_loads", self.channels * c.cta_local_load_gbps))

    def round_trip(self, rank: int, peer: int) -> float:
        """µs for a load from ``rank`` to be served by ``peer`` and come back (a local L2 hit for itself)."""
        if peer == rank:
            return self.costs.nvlink.remote_read_us
        there, back = self.route(rank, peer), self.route(peer, rank)
        return there.latency + back.costs.remote_read_us + back.latency

    def atomic_share(self, owner: int) -> float:
        """Bytes per µs (wire bytes of red.add.v4 operations) one rank's data atomics into ``owner`` may run at:
        the owner's L2 atomic throughput divided among the ranks whose programs add into its memory."""
        share = self._atomic_shares.get(owner)
        if share is None:
            c = self.costs.nvlink
            senders = self._atomic_senders.get(owner, 1)
            share = self._atomic_shares[owner] = (c.l2_atomic_gops * ATOMIC_OP_BYTES * c.atomic_wire_factor * 1e3
                                                  / senders)
        return share

    def atomic_fan_out(self, rank: int) -> int:
        """How many other ranks' memory ``rank``'s program applies data atomics to (at least 1)."""
        return self._atomic_fan_out.get(rank, 1)

    def route(self, src: int, dst: int) -> RouteInfo:
        """The route ``src -> dst`` with this simulation's pipes for its links (cached); either end may be a
        rank's host memory (:func:`collsim.sim.host.host_owner`): the GPU's host link, at PCIe costs."""
        key = (src, dst)
        info = self._routes.get(key)
        if info is None and (is_host_owner(src) or is_host_owner(dst)):
            gpu = dst if is_host_owner(src) else src
            link = self._host_links.get(gpu)
            if link is None:
                link = self._host_links[gpu] = host_link(self.topology, gpu)
            pipe = link.down if is_host_owner(src) else link.up
            info = self._routes[key] = RouteInfo((pipe,), link.latency, self._route_costs[False], False)
        if info is None:
            links, latency, nvlink_only = _route_facts(self.topology, self._route_table, src, dst)
            pipes = []
            alias = self._alias
            for link, effective in links:
                if alias:  # one pipe stands for a link's whole orbit (see collsim.sim.symmetry)
                    link = alias[link]
                pipe = self._links.get(link)
                if pipe is None:
                    kind = WatchedPipe if link in self._watched else Pipe
                    pipe = self._links[link] = kind(f"{link[0]}->{link[1]}", effective)
                pipes.append(pipe)
            info = self._routes[key] = RouteInfo(tuple(pipes), latency, self._route_costs[nvlink_only], nvlink_only)
        return info

    def issue_pieces(self, pipes: tuple[Pipe, ...], nbytes: float, start: float, pieces: int,
                     finished: Callable[[float], Any], cap: float = math.inf, sustained: float = math.inf,
                     burst: float = 0.0):
        """Fine-grained reference: issue ``pieces`` equal parts, each when the previous one is through, paced
        as a whole-range transfer is (:meth:`Rank._place_burst`: the first ``burst`` bytes leave without the
        issuing engine's pacing, the rest at most at ``sustained``, all at most at ``cap``)."""
        env = self.env
        part = nbytes / pieces
        t = start
        finish = start
        for _ in range(pieces):
            if t > env.now:
                self.events += 1
                yield env.timeout(t - env.now)
            finish = Rank._place_burst(pipes, part, max(t, env.now), burst, sustained, cap)
            burst = burst - part if burst > part else 0.0
            t = finish
        return finished(finish)

    # ------------------------------------------------------------------ run

    def run(self) -> Outcome:
        """Run every rank to its kernel end; raise if a rank never gets there (a hang)."""
        n = self.size
        skew = self.costs.nvlink.start_skew_us
        for rank in self.ranks:
            start = self.start_us + (skew * rank.rank / (n - 1) if n > 1 else 0.0)
            launch = PathNode(rank.rank, 0.0, start, "launch", "kernel_start", None,
                          what="launch overhead and kernel start" if self.launch_us else "kernel start")
            if self.record:
                self.nodes.append(launch)
            self.env.process(rank.process(start, launch))
        self.events += len(self.ranks)
        self.env.run()
        stuck = sorted({r.rank for r in self.ranks if r.final is None})
        if stuck:
            waiting = [key for key, loc in self.memory.locations.items() if loc.waiters]
            raise CollsimError(
                f"the simulated launch hangs: ranks {stuck} never reach the kernel end; polls still waiting on "
                f"{[f'{b}@rank{r}[slot {s}, region {g}]' for b, r, s, g in waiting[:4]]} (no write ever satisfies "
                "them; the verifier can show why)")
        ends, finals = [r.end for r in self.ranks], [r.final for r in self.ranks]
        if self.ctas > 1:  # a rank ends with its last CTA
            last = [max(self.ranks[r * self.ctas:(r + 1) * self.ctas], key=lambda p: p.end) for r in range(n)]
            ends, finals = [p.end for p in last], [p.final for p in last]
        if len(self.ranks) < n:  # one rank simulated for all (a fold): every rank ends as it does
            ends, finals = ends * n, finals * n
        outcome = Outcome(ends, finals, self.events, self.nodes, self.transfers)
        self._release()
        return outcome

    def _release(self) -> None:
        """Drop the references that make the run's state a cycle (ranks <-> simulation, locations <-> their
        waiters), so reference counting frees it as soon as the outcome is gone, instead of a garbage
        collection pass over every node and transfer of the run."""
        for rank in self.ranks:
            rank.sim = None
            rank.regs.clear()
            rank.reg_pending.clear()
        for location in self.memory.locations.values():
            location.waiters.clear()
        self.memory.locations.clear()
        self._routes.clear()
        self._links.clear()
        self.ranks = []
        self.env = None


def _atomic_senders(programs: list[list[Any]], ctas: int = 1) -> tuple[dict[int, int], dict[int, int]]:
    """``(owner -> the number of ranks whose items apply a data atomic to its memory, rank -> the number of
    other ranks its items apply data atomics to)``."""
    senders: dict[int, set[int]] = {}

    def walk(items: list[Any], rank: int) -> None:
        for item in items:
            if item.__class__ is Block:
                for iteration in item.iterations:
                    walk(iteration, rank)
            elif item.kind == ATOMIC and not item.leader and isinstance(item.operand, tuple):
                senders.setdefault(item.ref[1], set()).add(rank)

    for index, items in enumerate(programs):
        walk(items, index // ctas)
    fan_out: dict[int, int] = {}
    for owner, ranks in senders.items():
        for rank in ranks:
            if rank != owner:
                fan_out[rank] = fan_out.get(rank, 0) + 1
    return {owner: len(ranks) for owner, ranks in senders.items()}, fan_out


def buffer_inits(program: Any) -> dict[str, Any]:
    """Buffer name -> the polled word's initial value (0, or the sentinel for ``init="sentinel"``); each CTA's
    copy of a ``per_cta`` buffer (:func:`~collsim.sim.lower.cta_copy`) in a program of several CTAs per rank.

    A buffer whose contents start arbitrary (``init="arbitrary"``) starts as 0 here: the simulator times the
    execution the protocol intends, and whether garbage can pass a poll is the verifier's question."""
    inits = {buf.name: (SENTINEL if buf.init == "sentinel" else 0) for buf in program.buffers}
    for buf in program.buffers:
        if buf.per_cta and program.ctas > 1:
            inits.update({cta_copy(buf.name, c): inits[buf.name] for c in range(program.ctas)})
    return inits
