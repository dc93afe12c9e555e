"""NVLink SHARP in the simulator: the switch multicasts writes and reduces loads (the multimem operations).

A buffer bound to a multicast object is reached through the switch that
joins every rank's GPU (on the preset topologies, the ``nvfabric`` node
that stands for the NVSwitch planes; :func:`switch_of` checks every route of
the group is GPU → switch → GPU through one such node). The operations
cost what moves where (times in µs, ``c`` the generation's cost
parameters; "link" below is a GPU's directed link to or from the switch):

multimem.st, multimem.red (issued without blocking, like a store)
    One upstream transfer: the rank's store engine and its link to the
    switch carry the lines' bytes once. The switch replicates them onto its
    link to every rank of the group, the issuer's own copy included, each
    copy placed on that downstream link from the same start and no faster
    than the upstream transfer (cut-through). Bytes on a link are divided by
    ``nvls_link_efficiency`` (multicast and reduction traffic carries less
    payload per link cycle than unicast stores: NCCL's ``nvlsEfficiency``);
    a data ``red`` also pays ``atomic_wire_factor``. Copy ``k`` is visible
    when its downstream transfer is through, plus the route latency from
    the issuer to ``k``, plus ``remote_write_us`` (``atomic_remote_us`` for
    a red: ``k``'s L2 applies it) and ``nvls_multicast_us``. A leader's
    counter red is a few bytes and costs latency only, like a unicast flag.
    A release first waits like a release store.
multimem.ld_reduce (the register is ready later, like a load)
    The request reaches every copy (the longest route latency plus
    ``remote_read_us``); then one stream runs through every rank's upstream
    link (each copy's bytes go to the switch once), the reduction unit of
    the reader's switch port (``nvls_reduce_gbps``), the reader's downstream
    link and its load engine, at the rate the slowest of them leaves
    (:func:`collsim.sim.links.place`). The sum is ready one return latency
    plus ``nvls_reduce_us`` later; an acquire blocks until then.

Every write lands in each copy's :class:`~collsim.sim.memory.Location`
like a unicast one, so polls on a rank's own copy see every rank's
multicast. Transfers are costed whole (``transfer_pieces`` does not split
them).

Under the one-rank fold of :mod:`collsim.sim.symmetry` every link to the
switch is one pipe standing for its orbit, so rank 0's copies to every rank
all go onto the one downstream pipe, as every rank's copies to one rank do
in the full simulation, and rank 0's ld_reduce stream is put on the one
upstream pipe once per rank, as every reader's stream crosses one rank's
upstream link. Both pipes are watched: where the order in which those
transfers were placed would decide which of them waits (a copy held back
by the others, or the readers' streams together over the link's
capacity), the fold is abandoned for the full simulation.

The simulator's walks reach this module through their rules for the three
operations: the lowering's ``visit_multimem_*`` bind them like stores and
loads (:mod:`collsim.sim.lower`), and a rank's ``visit_multimem_*``
(:class:`collsim.sim.rank.Rank`) catch up with the simulation clock and call
:func:`load_reduce`, :func:`multicast_store` or :func:`multicast_red`.
"""
from __future__ import annotations

from typing import Any

from collsim.errors import UnsupportedError
from collsim.sim.links import Pipe, SharedPipeSaturated, Transfer, place
from collsim.sim.lower import MC_STORE
from collsim.sim.memo import PerTopology
from collsim.sim.memory import DATA, RMW_HOW, SENTINEL

__all__ = ["SwitchPorts", "switch_of", "load_reduce", "multicast_store", "multicast_red", "place_copies"]

EPS = 1e-9


class SwitchPorts:
    """The switch between the ranks of one simulation and each rank's links to and from it.

    ``up[k]`` / ``down[k]``: rank ``k``'s directed link to / from the switch (the pipes unicast routes use
    too, so multicast and unicast traffic share them); ``latency[r][k]`` the route latency from ``r`` to
    ``k`` (``r``'s own copy: out to the switch and back, as long as a route to a peer).
    """

    __slots__ = ("switch", "up", "down", "latency", "costs")

    def __init__(self, switch: Any, up: list[Pipe], down: list[Pipe], latency: list[list[float]], costs: Any) -> None:
        self.switch = switch
        self.up = up
        self.down = down
        self.latency = latency
        self.costs = costs


def switch_of(sim: Any) -> SwitchPorts:
    """The switch every route of ``sim``'s ranks passes through (built once per simulation).

    Raises
    ------
    UnsupportedError
        When the topology's switches do not multicast and reduce, or some route is not GPU → switch → GPU
        through one switch (multimem needs one multicast group behind one switch).
    """
    ports = getattr(sim, "nvls_ports", None)
    if ports is not None:
        return ports
    n = sim.size
    found = _SWITCHES.get(sim.topology, n, lambda: _switch(sim))
    if isinstance(found, str):
        raise UnsupportedError(found)
    middle, latency = found
    up = [sim.route(k, (k + 1) % n).pipes[0] for k in range(n)]
    down = [sim.route((k + 1) % n, k).pipes[-1] for k in range(n)]
    ports = sim.nvls_ports = SwitchPorts(middle, up, down, latency, sim.route(0, 1).costs)
    return ports


#: topology -> {ranks: (the switch, route latencies) or why multimem cannot run there}
_SWITCHES = PerTopology()


def _switch(sim: Any) -> tuple[Any, list[list[float]]] | str:
    """The switch between ``sim``'s ranks and the route latency from each rank to each copy, or why none."""
    topo = sim.topology
    fabric = getattr(topo, "fabric", None)
    if fabric is None or not (fabric.multicast and fabric.reduction):
        return f"topology {topo.name!r} has no switch that multicasts and reduces (NVLink SHARP)"
    n = sim.size
    if n < 2:
        return "a multicast group needs at least 2 ranks"
    middle = None
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            path = topo.route(a, b).path
            if len(path) != 3 or (middle is not None and path[1] != middle):
                return f"multimem needs every rank behind one switch; the route {a}->{b} is {' -> '.join(map(str, path))}"
            middle = path[1]
    return middle, [[sim.route(r, k if k != r else (r + 1) % n).latency for k in range(n)] for r in range(n)]


def multicast_store(rank: Any, th: Any, op: Any) -> None:
    """``multimem.st`` on ``rank``'s thread ``th``: one upstream transfer, a copy to every rank's memory."""
    _multicast(rank, th, op, red=False)


def multicast_red(rank: Any, th: Any, op: Any) -> None:
    """``multimem.red``: as :func:`multicast_store`, each copy applied by its owner's L2 as an atomic."""
    _multicast(rank, th, op, red=True)


def _landing(op: Any, red: bool) -> tuple[str | None, Any]:
    """What the operation does to the words a poll inspects: ``(how, value)`` (as :meth:`Rank._store` and
    :meth:`Rank._atomic` decide for unicast writes)."""
    data = op.src if op.kind == MC_STORE else op.operand
    if red:
        how = RMW_HOW.get(op.op.op, "set")
        if op.flag is not None and op.polls_flags:
            return how, op.flag
        return how, DATA if isinstance(data, tuple) else data
    if op.polls_flags:
        return ("set", op.flag) if op.flag is not None else (None, None)
    if data is None:
        return "set", op.flag
    if data[0] == "fill":
        return "set", SENTINEL if data[1] == "sentinel" else 0
    return "set", DATA


def _multicast(rank: Any, th: Any, op: Any, red: bool) -> None:
    ports = switch_of(rank.sim)
    c = ports.costs
    source = op.operand if red else op.src
    data = isinstance(source, tuple)
    not_before = 0.0
    if data and source[0] == "reg":  # streams through the register as its producer fills it
        not_before, _ = rank._stream_register(th, source[1], op)
    if op.releasing:
        rank._fence(th, op, op.scope, None, "release fence before the multimem op")
    th.t += rank.c.op_overhead_us
    t = th.t
    node = rank._issue_node(th, op, data)
    me = rank.rank
    lines = op.ref[5]
    wire = lines * op.line_bytes / c.nvls_link_efficiency
    if red and data:
        wire *= c.atomic_wire_factor
    if op.leader:  # a counter: a few bytes, interleaved with bulk traffic (latency only)
        up_finish = t
        finishes = [t] * len(ports.down)
    else:
        up_finish = max(rank._reserve((rank.st_engine, ports.up[me]), wire, t), not_before)
        rate = wire / (up_finish - t) if up_finish > t + EPS else float("inf")
        finishes = place_copies(ports.down, wire, t, rate)
    delay = (c.atomic_remote_us if red else c.remote_write_us) + c.nvls_multicast_us
    how, value = _landing(op, red)
    buf, _, slot, region, line, _ = op.ref
    what = "multimem.red" if red else "multimem.st"
    for k, finish in enumerate(finishes):
        visible = max(finish, up_finish) + ports.latency[me][k] + delay
        ack = visible + ports.latency[k][me]
        tr = Transfer(me, k, wire, t, t, max(finish, up_finish), visible, ack, node, data, op, False, what)
        land = None if how is None else (rank.memory.location((buf, k, slot, region)), line, lines, how, value)
        rank._issued(th, tr, land)


def place_copies(pipes: list[Pipe], nbytes: float, start: float, rate: float) -> list[float]:
    """:func:`~collsim.sim.links.place` the same transfer on each of ``pipes`` alone; the finish on each.

    The switch's copies of one multicast go onto every rank's downstream link, which in a rank-symmetric
    program carry the same allocations: a pipe whose capacity and allocations equal an earlier one's gets
    that one's placement copied, not computed again (the same floats, so the same result; a 72-rank
    multicast is then one placement, not 72).

    >>> a, b = Pipe("switch->gpu0", 100.0), Pipe("switch->gpu1", 100.0)
    >>> place_copies([a, b], 100_000, 0.0, float("inf")), place_copies([a, b], 100_000, 0.5, float("inf"))
    ([1.0, 1.0], [2.0, 2.0])
    >>> a.times == b.times and a.used == b.used
    True
    """
    placed: dict = {}  # (capacity, allocations before) -> (finish, allocations after)
    finishes = []
    seen: set = set()
    for pipe in pipes:
        if id(pipe) in seen:  # one pipe for every copy (a fold): each copy goes on top of the others
            finishes.append(place((pipe,), nbytes, start, rate))
            continue
        seen.add(id(pipe))
        key = (pipe.rate, tuple(pipe.times), tuple(pipe.used))
        found = placed.get(key)
        if found is None:
            finish = place((pipe,), nbytes, start, rate)
            placed[key] = (finish, pipe.times, pipe.used)
        else:
            finish, times, used = found
            pipe.times, pipe.used = list(times), list(used)
        finishes.append(finish)
    return finishes


def load_reduce(rank: Any, th: Any, op: Any) -> None:
    """``multimem.ld_reduce`` on ``rank``'s thread ``th``: every copy streams through the switch's reduction
    unit into one register (ready like a load's)."""
    ports = switch_of(rank.sim)
    c = ports.costs
    me = rank.rank
    th.t += rank.c.op_overhead_us
    t = th.t
    node = rank._issue_node(th, op, True)
    wire = op.ref[5] * op.line_bytes / c.nvls_link_efficiency
    start = t + max(ports.latency[me]) + c.remote_read_us
    unit = _reduction_unit(rank, ports, c)
    up = ports.up
    if up[0] is up[-1]:  # one upstream pipe for every rank's link (a fold): see the module docstring
        finish = _reduce_folded(rank, (rank.ld_engine, ports.down[me], unit), up[0], len(up), wire, start)
    else:
        finish = rank._reserve((rank.ld_engine, ports.down[me], unit) + tuple(up), wire, start)
    ready = finish + max(ports.latency[k][me] for k in range(len(ports.up))) + c.nvls_reduce_us
    rank._loaded(th, op, Transfer(me, me, wire, t, start, finish, ready, ready, node, True, op, False,
                                  "multimem.ld_reduce"))


def _reduce_folded(rank: Any, pipes: tuple, up: Pipe, copies: int, wire: float, start: float) -> float:
    """Place a ld_reduce of a fold: ``pipes`` and the one upstream pipe ``up``, which then carries the stream
    ``copies`` times (every reader's over one rank's link, allocated as each reader's would be). Raises
    :class:`~collsim.sim.links.SharedPipeSaturated` when they do not all fit: in the full simulation the
    readers placed later would wait for the earlier ones."""
    up.log = []
    try:
        finish = rank._reserve(pipes + (up,), wire, start)
        profiles = up.log
    finally:
        up.log = None
    for _ in range(copies - 1):
        for profile in profiles:
            up.add_profile(profile)
    limit = up.rate * (1.0 + 1e-9)
    if any(used > limit for used in up.used):
        raise SharedPipeSaturated(f"{copies} ld_reduce streams do not fit together on {up.name}")
    return finish


def _reduction_unit(rank: Any, ports: SwitchPorts, c: Any) -> Pipe:
    """The reduction unit of ``rank``'s switch port (one per port: a rank's ld_reduces share it)."""
    unit = getattr(rank, "nvls_reduce", None)
    if unit is None:
        unit = rank.nvls_reduce = Pipe(f"{ports.switch}.reduce->rank{rank.rank}", c.nvls_reduce_gbps)
    return unit
