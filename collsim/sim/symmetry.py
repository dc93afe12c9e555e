"""Rank symmetry: simulate rank 0 alone when every rank provably does what rank 0 does, at the same times.

On a switched fabric every rank of a collective usually runs the same
program shifted by its rank: rank ``r`` sends to ``r + 1`` what rank 0 sends
to 1, over links that are the images of rank 0's under the rotation
``r -> r + 1 (mod n)``. Then every rank's operations happen at the same times
as rank 0's, and simulating rank 0 alone gives the launch's result. This
module decides when that holds, and sets up the one-rank simulation.

Conditions, all checked (any that fails means the full simulation runs):

* **Topology** (:func:`rotation_of`): the rotation of the participating GPUs,
  every other node fixed, maps each route ``a -> b`` link by link onto route
  ``a+1 -> b+1`` with the same capacities and latency, and every GPU has the
  same properties. Each link a route uses has ``n`` distinct images (a link
  that is its own image would carry ``n`` ranks' traffic where the one-rank
  simulation puts one rank's).
* **Programs** (:func:`fold_of`): rank ``r``'s bound items have rank 0's
  shape (loops, lane counts, operations) and, position by position, the
  same symbolic operation with the same values (flags, predicates, byte
  counts, operands, registers), lines, and owner shifted by ``r``. And
  memory rotates with the ranks: the map taking the range rank ``r``
  touches at a position to the one rank ``r + 1`` touches there is one
  bijection, which moves each location whole onto another with its lines
  shifted by one offset, or, where a location's ranges never partly
  overlap, range by range. So the writes a poll of rank ``r`` sees are the
  images of those rank 0's poll sees. (Only locations some rank polls are
  checked: a poll is the one operation whose time depends on memory.) A
  multimem op reaches every rank's copy: its range on copy ``k`` of rank
  ``r`` turns into the range on copy ``k + 1`` of rank ``r + 1``.
* **Costs**: every rank starts at once (``start_skew_us = 0``) and transfers
  are whole ranges (``transfer_pieces = 1``).

The one-rank simulation maps every link to one representative of its orbit
(rank 0's transfer to rank ``d`` over ``switch -> d`` stands for rank ``-d``'s
over ``switch -> 0``), and records, for each of rank 0's writes, the same
write by every other rank that lands where rank 0 polls, at rank 0's times
(for a multimem write, rank 0's copy to ``k`` at its time stands for every
rank ``r``'s copy to ``k + r``).
The order in which several ranks' transfers are placed on a shared link is
one thing it cannot reproduce; such links are
:class:`~collsim.sim.links.WatchedPipe`, and a
transfer held back there by others abandons the one-rank simulation for the
full one (:class:`~collsim.sim.links.SharedPipeSaturated`). The order of
writes that become visible at the same instant is the other; where rank 0
polls, two such writes that do not commute abandon it too
(:class:`SimultaneousWrites`). Results are identical to the full
simulation's (a test compares them configuration by configuration); only
the event count is rank 0's.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from collsim.sim.links import FoldAbandoned
from collsim.sim.lower import ATOMIC, BULK_LOAD, EVERY_COPY, LOAD, MC_RED, MC_STORE, POLL, STORE, Block
from collsim.sim.memo import PerTopology

__all__ = ["Rotation", "Fold", "rotation_of", "rotation_or_reason", "fold_of", "fold_or_reason", "SimultaneousWrites",
           "check_commute"]


@dataclass(frozen=True)
class Rotation:
    """The rotation of ``ranks`` GPUs as a symmetry of a topology's routes: ``alias`` maps each link a route
    between participants uses to the representative of its orbit."""

    ranks: int
    alias: dict


@dataclass(frozen=True)
class Fold:
    """Everything a one-rank simulation needs: the topology's rotation; for each of rank 0's writing
    operations, the ``(location key, first line)`` of every other rank's write at that position into a
    location rank 0 polls; the link representatives rank 0's transfers reach through two or more links,
    which carry several ranks' transfers in the full simulation (:class:`WatchedPipe`); and the keys of
    the locations rank 0 polls; and for each of rank 0's multimem writes, per copy ``k`` it reaches, the
    ``(location key, first line)`` of the other ranks' writes that land at rank 0's copy-``k`` time where
    rank 0 polls (rank ``r``'s copy to ``j`` is the image of rank 0's copy to ``j - r``)."""

    rotation: Rotation
    mirrors: dict
    watched: frozenset
    polled: frozenset
    multicast_mirrors: dict = field(default_factory=dict)


#: topology -> {ranks: Rotation or None}
_ROTATIONS = PerTopology()


def rotation_of(topology: Any, ranks: int, route_facts: Any) -> Rotation | None:
    """The rotation of GPUs ``0 .. ranks-1`` of ``topology`` if it is a symmetry of their routes, else None.

    ``route_facts(src, dst)`` gives ``(links with capacities, latency, nvlink_only)`` of a route (the
    simulation's cached facts). Cached per topology and rank count.
    """
    found = rotation_or_reason(topology, ranks, route_facts)
    return found if isinstance(found, Rotation) else None


def rotation_or_reason(topology: Any, ranks: int, route_facts: Any) -> Rotation | str:
    """:func:`rotation_of`, or why the rotation is not a symmetry (a sentence)."""
    return _ROTATIONS.get(topology, ranks, lambda: _rotation(topology, ranks, route_facts))


def _rotation(topology: Any, n: int, route_facts: Any) -> Rotation | str:
    if n < 2:
        return "a single rank"
    gpus = [topology.gpu_node(r) for r in range(n)]
    info = topology.gpu_info(0)
    for r in range(1, n):
        if topology.gpu_info(r) != info:
            return f"GPU {r} differs from GPU 0 ({topology.gpu_info(r)} against {info})"
    turn = {gpus[r]: gpus[(r + 1) % n] for r in range(n)}

    def image(link: tuple) -> tuple:
        return (turn.get(link[0], link[0]), turn.get(link[1], link[1]))

    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            links, latency, nvlink_only = route_facts(a, b)
            other = route_facts((a + 1) % n, (b + 1) % n)
            same = other[1] == latency and other[2] == nvlink_only and len(other[0]) == len(links) and all(
                image(link) == moved and gbps == moved_gbps
                for (link, gbps), (moved, moved_gbps) in zip(links, other[0]))
            if not same:
                return (f"the route {a}->{b} ({_hops(links, latency)}) does not turn into {(a + 1) % n}->"
                        f"{(b + 1) % n} ({_hops(other[0], other[1])}) when the ranks rotate by one")
    alias: dict = {}
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            for link, _ in route_facts(a, b)[0]:
                if link in alias:
                    continue
                orbit = [link]
                while True:
                    nxt = image(orbit[-1])
                    if nxt == link:
                        break
                    orbit.append(nxt)
                if len(orbit) != n:  # a link shared by all of an orbit's ranks at once: not one rank's share
                    return (f"the link {link[0]}->{link[1]} is its own image after {len(orbit)} of {n} rotations: "
                            "it carries several ranks' traffic at once")
                representative = min(orbit, key=repr)
                for member in orbit:
                    alias[member] = representative
    return Rotation(n, alias)


def _hops(links: tuple, latency: float) -> str:
    return " ".join(f"{u}->{v} {gbps:g} GB/s" for (u, v), gbps in links) + f", {latency:g} us"


def _flatten(items: list[Any], out: list[Any]) -> list[Any]:
    """Rank items in walk order, a loop as ``(lanes, iteration count)`` before its iterations."""
    for item in items:
        if item.__class__ is Block:
            out.append((item.lanes, len(item.iterations)))
            for iteration in item.iterations:
                _flatten(iteration, out)
        else:
            out.append(item)
    return out


def _flat(items: list[Any]) -> list[Any]:
    """``items`` flattened, kept on a :class:`~collsim.sim.lower.BoundRank` (bound again for every size of a
    configuration, changed in place, so its flat list stays valid)."""
    order = getattr(items, "walk_order", None)
    if order is None:
        order = _flatten(items, [])
        if hasattr(items, "walk_order"):
            items.walk_order = order
    return order


def _disjoint(spans: set) -> bool:
    """Whether no two of these ``(first line, lines)`` ranges overlap."""
    end = None
    for first, lines in sorted(spans):
        if end is not None and first < end:
            return False
        end = first + lines
    return True


def _operand_kind(operand: Any) -> Any:
    """An atomic's operand as far as timing goes: a value, or a data source's kind (not its offsets)."""
    return operand[:2] if isinstance(operand, tuple) and operand[0] == "reg" else (
        operand[0] if isinstance(operand, tuple) else operand)


def _same_timing(a: Any, b: Any) -> bool:
    """Whether two bound ops of one symbolic op agree in what decides their cost and what polls see."""
    return (a.flag == b.flag and a.pred == b.pred and a.nbytes == b.nbytes
            and _operand_kind(a.operand) == _operand_kind(b.operand))


def fold_of(items: list[list[Any]], lowered: Any, rotation: Rotation, route_facts: Any) -> Fold | None:
    """The :class:`Fold` of the ranks' bound ``items`` (from ``lowered``, a
    :class:`~collsim.sim.lower.SimProgram`) when they are rotations of rank 0's, else None (``route_facts`` as
    for :func:`rotation_of`)."""
    found = fold_or_reason(items, lowered, rotation, route_facts)
    return found if isinstance(found, Fold) else None


def fold_or_reason(items: list[list[Any]], lowered: Any, rotation: Rotation, route_facts: Any) -> Fold | str:
    """:func:`fold_of`, or why the programs are not rotations of rank 0's (a sentence naming an operation)."""
    n = rotation.ranks
    if len(items) != n:
        return f"{len(items)} programs for {n} ranks"
    if getattr(lowered, "value_flow", ""):  # rank 0's values need not stand for the others' (which rank is last)
        return lowered.value_flow
    flats = [_flat(rank_items) for rank_items in items]
    first = flats[0]
    size = len(first)
    for r, flat in enumerate(flats):
        if len(flat) != size:
            return f"rank {r} runs {len(flat)} operations and loops, rank 0 {size}"
    ops = [(p, op) for p, op in enumerate(first) if op.__class__ is not tuple]
    if lowered.rank_shaped:  # a loop count depends on the rank: the trees may differ
        for r, flat in enumerate(flats[1:], 1):
            for a, b in zip(first, flat):
                if a.__class__ is tuple or b.__class__ is tuple:
                    if b != a:
                        return f"rank {r}'s loops differ in shape from rank 0's"
                elif b.op is not a.op:
                    return f"rank {r} runs {b.name} where rank 0 runs {a.name}"
    timed = lowered.rank_timed
    compared = [p for p, op in ops if id(op.op) in timed]
    for r, flat in enumerate(flats[1:], 1):
        for p in compared:
            if not _same_timing(first[p], flat[p]):
                return (f"rank {r}'s {flat[p].name} writes, waits for or moves other values than rank 0's "
                        f"{first[p].name}")
    referenced = [p for p, op in ops if op.ref is not None]
    refs = [[flat[p].ref for p in referenced] for flat in flats]
    owners = [ref[1] for ref in refs[0]]
    lines = [ref[5] for ref in refs[0]]
    # Memory must rotate with the ranks: one bijection taking the range rank r touches at a position to the
    # one rank r + 1 touches there (checked here range by range, then location by location).
    forward: dict = {}   # reference -> the reference of its image
    backward: dict = {}  # the inverse
    for r in range(1, n):
        for index, (ref, owner, count) in enumerate(zip(refs[r], owners, lines)):
            if ref[5] != count or ((ref[1] != EVERY_COPY) if owner == EVERY_COPY else (ref[1] - r - owner) % n):
                return _position_reason(flats, referenced, r, index)
    # Only what polls read decides a simulation's times (a poll is the one operation that looks at memory):
    # ranges in locations no rank polls need not rotate.
    polls = [p for p, op in ops if op.kind == POLL]
    watched_keys = {flat[p].key for flat in flats for p in polls}
    for r in range(n):
        for ref, image in zip(refs[r], refs[(r + 1) % n]):
            # a multimem op touches every rank's copy: copy k of rank r's range turns into copy k + 1 of
            # rank r + 1's, like a unicast range on rank k
            pairs = ([((ref[0], k) + ref[2:], (image[0], (k + 1) % n) + image[2:]) for k in range(n)]
                     if ref[1] == EVERY_COPY else ((ref, image),))
            for ref, image in pairs:
                if ref[:4] not in watched_keys and image[:4] not in watched_keys:
                    continue
                known = forward.get(ref)
                if known is None:
                    if image in backward:
                        return _memory_reason(ref)
                    forward[ref] = image
                    backward[image] = ref
                elif known != image:
                    return _memory_reason(ref)
    reason = _memory_rotates(forward)
    if reason:
        return reason
    polled = {op.key for _, op in ops if op.kind == POLL}
    mirrors: dict = {}
    for p, op in ops:
        if op.kind in (STORE, ATOMIC):
            seen = [(flat[p].key, flat[p].ref[4]) for flat in flats[1:] if flat[p].key in polled]
            if seen:
                mirrors[op] = seen
    multicast_mirrors: dict = {}
    for p, op in ops:
        if op.kind in (MC_STORE, MC_RED):
            buf, _, slot, region = op.key
            copies = [key[1] for key in polled if key[0] == buf and key[2] == slot and key[3] == region]
            if copies:
                multicast_mirrors[op] = {k: [((buf, j, slot, region), flats[(j - k) % n][p].ref[4])
                                             for j in copies if (j - k) % n] for k in range(n)}
    watched = _watched(first, rotation, route_facts)
    if lowered.multicast:
        watched |= _switch_links(rotation, route_facts)
    return Fold(rotation, mirrors, watched, frozenset(polled), multicast_mirrors)


def _position_reason(flats: list, referenced: list, r: int, index: int) -> str:
    a, b = flats[0][referenced[index]], flats[r][referenced[index]]
    if b.ref[5] != a.ref[5]:
        return f"rank {r}'s {b.name} touches {b.ref[5]} lines, rank 0's {a.ref[5]}"
    return (f"rank {r}'s {b.name} is on rank {b.ref[1]}'s memory, rank 0's on rank {a.ref[1]}'s: not the same "
            f"peer shifted by {r}")


def _memory_reason(ref: tuple) -> str:
    return (f"memory does not rotate with the ranks: lines {ref[4]}..{ref[4] + ref[5] - 1} of {ref[0]} on rank "
            f"{ref[1]} (slot {ref[2]}, region {ref[3]}) are not where the next rank's rotation puts them")


def _memory_rotates(forward: dict) -> str | None:
    """None if ``forward``, a bijection between the ranges ranks touch, is a rotation of memory, else why not:
    each location maps whole onto one location, every range shifted by one offset, no two onto the same
    one; or, where a location's ranges never partly overlap, range by range (blocks permuted, as when a
    rank's chunk index wraps around) onto locations whose ranges never partly overlap either."""
    whole: dict = {}   # key -> (image key, shift)
    permuted = set()   # keys whose ranges do not all shift alike
    for ref, image in forward.items():
        key = ref[:4]
        shift = (image[:4], image[4] - ref[4])
        if whole.setdefault(key, shift) != shift:
            permuted.add(key)
    onto: dict = {}  # image key -> the key shifted onto it whole
    for key, (image_key, _) in whole.items():
        if key not in permuted and onto.setdefault(image_key, key) != key:
            return f"memory does not rotate with the ranks: {_where(key)} and {_where(onto[image_key])} map onto one"
    if not permuted:
        return None
    spans: dict = {}  # key -> the (first line, lines) touched there, for the permuted keys and their images
    images = set()
    for ref, image in forward.items():
        if ref[:4] in permuted:
            spans.setdefault(ref[:4], set()).add(ref[4:])
            images.add(image[:4])
    for ref in forward:  # an image location's own ranges: what is touched there
        if ref[:4] in images and ref[:4] not in permuted:
            spans.setdefault(ref[:4], set()).add(ref[4:])
    for key in sorted(permuted | images, key=repr):
        if key in images and key in onto:
            return f"memory does not rotate with the ranks: {_where(key)} gets both whole and permuted ranges"
        if not _disjoint(spans[key]):
            return (f"memory does not rotate with the ranks: {_where(key)} has ranges that partly overlap and do "
                    "not all move alike")
    return None


def _where(key: tuple) -> str:
    return f"{key[0]} on rank {key[1]} (slot {key[2]}, region {key[3]})"


def _watched(ops: list[Any], rotation: Rotation, route_facts: Any) -> frozenset:
    """Representatives of links that rank 0's transfers (not a leader's few bytes, which take no bandwidth)
    reach through more than one link of their orbit."""
    routes = set()
    for op in ops:
        if op.__class__ is tuple or op.ref is None or op.leader or op.ref[1] == 0:
            continue
        if op.kind in (STORE, ATOMIC):
            routes.add((0, op.ref[1]))
        elif op.kind in (LOAD, BULK_LOAD):
            routes.add((op.ref[1], 0))
    reached: dict = {}
    for src, dst in routes:
        for link, _ in route_facts(src, dst)[0]:
            reached.setdefault(rotation.alias[link], set()).add(link)
    return frozenset(rep for rep, links in reached.items() if len(links) > 1)


def _switch_links(rotation: Rotation, route_facts: Any) -> frozenset:
    """Representatives of the links to and from the switch, which a multimem op of rank 0 uses every one of
    (a multicast's copies go down to every rank, a ld_reduce's stream comes up from every rank)."""
    links = route_facts(0, 1)[0]
    return frozenset((rotation.alias[links[0][0]], rotation.alias[links[-1][0]]))


class SimultaneousWrites(FoldAbandoned):
    """Writes that do not commute became visible at the same time on lines rank 0 polls: which one a poll
    sees last depends on the order the simulation records them in. (One argument, the message, as SimPy
    re-raises a process's exception as ``type(e)(*e.args)``.)"""


def check_commute(location: Any, visible: float) -> None:
    """Raise :class:`SimultaneousWrites` if writes visible at ``visible`` overlap and do not commute (two
    adds, two maxima or two sets of the same value do)."""
    visibles = location.visibles
    first, last = bisect_left(visibles, visible), bisect_right(visibles, visible)
    if last - first < 2:
        return
    group = location.writes[first:last]
    for i, a in enumerate(group):
        for b in group[i + 1:]:
            if a.lo < b.hi and b.lo < a.hi and (a.how != b.how or (a.how == "set" and a.value != b.value)):
                raise SimultaneousWrites(f"writes to {location.key} at {visible} us do not commute")
