"""One rank's program as a SimPy process: what every operation costs and what it waits for.

A rank's threads are one process walking the bound ops in program order
(:mod:`collsim.sim.lower`), standing for the rank's channels; a program of
several CTAs per rank (:attr:`collsim.ir.program.Program.ctas`) is one
process per CTA, each with one CTA's burst and add rate, sharing the rank's
engines, HBM, links and memory (:class:`~collsim.sim.simulation.Simulation`); a loop whose iterations are lanes gives each
lane its own clock, starting when the loop starts, and ends when its
slowest lane ends. A clock advances only through blocking work. The
process yields to SimPy only when a poll must wait for writes that are not
issued yet, and to catch its clock up before reserving shared links, so
transfers on shared links are costed in time order (a lane that starts
behind the simulation clock reserves at its own earlier time).

Operation semantics (all times in µs; ``c`` are the cost parameters)
------------------------------------------------------------------
Store / Atomic (non-blocking issue)
    Waits for its source register; a release (``sem`` release/acq_rel)
    first fences. Wire bytes are ``lines × line_bytes`` of the destination
    buffer's layout (so LL moves 2× the data, LL128 16/15×), × the atomic
    wire factor for data atomics. Local: through the rank's HBM pipe.
    Remote: through the rank's store engine (``channels × cta_store_gbps``)
    and the route's directed links (a leader's flag or counter, a few
    bytes, only pays latency: link arbitration interleaves packets, so it
    never queues behind bulk transfers), visible
    ``route latency + remote_write_us`` (atomics: ``atomic_remote_us``)
    after its last byte, acknowledged one return latency later. An atomic
    with a result waits for that.
Load (non-blocking; the register is ready later)
    Remote: the request travels to the owner (route latency +
    ``remote_read_us``), the bytes come back through the owner→reader links
    and the reader's load engine (``channels × cta_bytes_in_flight`` per
    round trip, Little's law), plus the return latency. Local: through HBM
    and the local-load engine. Acquire loads block until ready.
PollUntil (blocking)
    Samples its lines every ``poll_period_us`` (local) or every round trip
    (remote, each sample being a remote load) from when it starts; it
    completes on the first sample that observes every line satisfying the
    predicate (:mod:`collsim.sim.memory`), i.e. up to one period after the
    satisfying writes became visible, and not before its own read of the
    lines (``lines × line_bytes`` from HBM) is done. Acquire adds
    ``acquire_us``.
Fence (blocking)
    Waits until every store, atomic and load the thread issued is
    acknowledged, then ``fence_sys_us`` (``fence_gpu_us`` at gpu scope,
    plus ``fence_sc_extra_us`` for ``fence.sc``).
Reduce / WriteOutput (non-blocking side work of the thread)
    Start as their register sources start filling (a register filled by a
    long load or receive streams: its first bytes are ready before its
    last) and end no earlier than the last source. A reduce adds
    ``operands − 1`` vectors at ``channels × fp32_lanes_per_sm ×
    sm_clock_ghz`` elements per µs and reads its input operand through HBM
    (``hbm_efficiency × hbm_gbps``) and the local-load engine
    (``channels × cta_local_load_gbps``); an output write moves its bytes
    through HBM. Their end is outstanding work a group barrier, fence or
    kernel end waits for.
SyncGroup (blocking)
    Waits until the thread group finished issuing everything it issued
    (stores drained into the network, loads returned), then
    ``sync_group_us``.
KernelBoundary
    Waits for every outstanding operation to be acknowledged, then
    ``kernel_end_us``.
Multimem ops (NVLink SHARP)
    Costed by :mod:`collsim.sim.fabric`: the switch replicates one upstream
    transfer (``multimem.st``/``red``) or reduces every copy into one stream
    (``multimem.ld_reduce``).
HostMemset / HostBarrier (host actions, before the launch's first device op)
    A memset is a memset node on the rank's stream: ``lines × line_bytes``
    through the rank's HBM pipe, the range then reads as the pattern, and
    the kernel starts ``stream_gap_us`` after it. A host barrier waits for
    the last rank's host (the start skew), then ``host_barrier_us`` for the
    rendezvous, then ``launch_overhead_us + kernel_start_us``: the launch
    is issued only after the hosts met, so it is not hidden behind the
    previous kernel.
BulkLoad / ProxyFence (the async proxy)
    A bulk copy (``cp.async.bulk``) is costed as a load of its lines that
    the CTA waits for (its mbarrier); a proxy fence costs its issue.
ProxyThread
    Starts the rank's host proxy thread, a process of its own
    (:mod:`collsim.sim.host`, which also costs the kernel's accesses to
    host memory).
Every op also costs ``op_overhead_us`` of instruction issue.
"""
from __future__ import annotations

import copy
import math
from typing import Any

from collsim.errors import UnsupportedError
from collsim.ir.ops import OP_TYPES, AtLeast
from collsim.ir.types import FenceKind, Scope
from collsim.ir.visit import OpVisitor, method_name
from collsim.sim import fabric, host
from collsim.sim.links import Transfer, place, reserve
from collsim.sim.lower import ATOMIC, FENCE, KERNEL_END, LOAD, REDUCE, STORE, SYNC, Block, SimKind
from collsim.sim.memory import DATA, RMW_HOW, SENTINEL, Write, stored
from collsim.sim.trace import PathNode

__all__ = ["Rank", "Thread"]

EPS = 1e-9
#: Round-robin slices per member when a loop's lanes issue their transfers together, and the most
#: placements one batch may make (8 ranks: 2 slices of each of 7 sends; 72 ranks: one slice each).
BATCH_SLICES, BATCH_PLACEMENTS = 2, 16


_new_thread = object.__new__


class Thread:
    """A thread group's clock, last node and outstanding work (a rank's main thread or one lane)."""

    __slots__ = ("t", "node", "issued", "issued_by", "acked", "acked_by", "loaded", "loaded_by", "pending")

    def __init__(self, t: float, node: PathNode) -> None:
        self.t = t
        self.node = node
        self.issued = self.acked = self.loaded = 0.0
        self.issued_by = self.acked_by = self.loaded_by = None
        self.pending: list[Any] = []  # piecewise transfers still being issued (fine-grained mode only)

    def fork(self) -> "Thread":
        """A lane starting from this thread's state (its clock, node and outstanding work)."""
        lane = _new_thread(Thread)  # skips __init__: a 72-rank two-shot forks 20 000 lanes
        lane.t, lane.node = self.t, self.node
        lane.issued, lane.issued_by = self.issued, self.issued_by
        lane.acked, lane.acked_by = self.acked, self.acked_by
        lane.loaded, lane.loaded_by = self.loaded, self.loaded_by
        lane.pending = []
        return lane

    def absorb(self, other: "Thread") -> None:
        self.pending.extend(other.pending)
        if other.issued > self.issued:
            self.issued, self.issued_by = other.issued, other.issued_by
        if other.acked > self.acked:
            self.acked, self.acked_by = other.acked, other.acked_by
        if other.loaded > self.loaded:
            self.loaded, self.loaded_by = other.loaded, other.loaded_by


class _PollWatch:
    """A poll that waits for writes: re-evaluated on every new write to its location, it wakes when the
    satisfying time it found has passed without being revised (see :meth:`Rank._wait_poll`)."""

    __slots__ = ("sim", "loc", "lo", "hi", "pred", "first", "decided", "wake", "token", "found", "seen")

    def __init__(self, sim: Any, loc: Any, lo: int, hi: int, pred: Any, first: float, found: Any) -> None:
        self.sim, self.loc, self.lo, self.hi, self.pred, self.first = sim, loc, lo, hi, pred, first
        self.decided = sim.env.event()
        self.wake: float | None = None  # when the current timer fires
        self.token = 0                  # which timer is current
        self.found = found              # the last finding, and how many writes it saw
        self.seen = len(loc.writes)

    def written(self, write: Any) -> None:
        """A write arrived at the location. One that becomes visible after the time the poll already found
        cannot change it (the values up to that time are the same), so only the others re-evaluate."""
        found = self.found
        if self.seen == len(self.loc.writes) - 1:
            if found is not None and write.visible > found[0]:
                self.seen += 1
                return
            if found is None and self.loc.writes[-1] is write:  # nothing satisfied it yet; maybe this write
                found = self.loc.satisfied_by_last(self.lo, self.hi, self.pred, self.first)
                if found is not False:
                    self.poke(found)
                    return
        self.poke()

    def poke(self, found: Any = False) -> None:
        """Re-evaluate (a write arrived); move the wake-up earlier when the poll is now satisfied sooner."""
        loc = self.loc
        if found is False:
            found = loc.satisfied_at(self.lo, self.hi, self.pred, self.first)
        self.found, self.seen = found, len(loc.writes)
        if found is None:
            return
        if self.wake is None or found[0] < self.wake - EPS:
            self.wake = found[0]
            self.token += 1
            sim = self.sim
            sim.events += 1
            timer = sim.env.timeout(max(0.0, found[0] - sim.env.now))
            timer.callbacks.append(lambda event, token=self.token: self.fire(token))

    def fire(self, token: int) -> None:
        """A timer went off: decide the poll if its finding still holds now, else wait for the next."""
        if token != self.token or self.decided.triggered:
            return
        loc = self.loc
        found = self.found if self.seen == len(loc.writes) else loc.satisfied_at(self.lo, self.hi, self.pred,
                                                                                   self.first)
        if found is not None and found[0] <= self.sim.env.now + EPS:
            loc.waiters.remove(self.written)
            self.decided.succeed(found)
        else:
            self.wake = None
            self.poke(found)


def _named(op: Any) -> str:
    """A bound op's label and where protocol code emitted it, for a refusal."""
    origin = getattr(op.op, "origin", None)
    return f"{op.label} ({origin})" if origin is not None else op.label


def _constant(expr: Any, op: Any) -> int:
    """A CAS's compare value (an expression of no symbol)."""
    if expr.free_vars():
        raise UnsupportedError(f"{_named(op)}: the simulator takes a CAS compare value that is a constant")
    return expr.evaluate({})


class Rank(OpVisitor):
    """The state and process of one rank (see the module docstring for the costs).

    The rank is the simulator's walk over the op set: one ``visit_<op>(thread, op)`` rule per operation
    class (an :class:`~collsim.ir.visit.OpVisitor`), called through a table indexed by the bound op's
    :class:`~collsim.sim.lower.SimKind`. A rule does its work at once and returns None, or returns a
    generator when it must first wait in simulated time (the walk runs it).

    ``sim`` is the :class:`~collsim.sim.simulation.Simulation` the rank belongs to.
    """

    consumer = "the simulator"

    def __init__(self, sim: Any, rank: int, items: list[Any]) -> None:
        self.sim = sim
        self.rank = rank
        self.items = items
        self.c = sim.costs.nvlink
        self.regs: dict[str, tuple[float, Any]] = {}
        self.reg_pending: dict[str, Any] = {}
        self.st_engine, self.ld_engine, self.hbm, self.local_ld = sim.rank_pipes(rank)
        #: location key -> the counter value this rank's threads last read there (NCCL keeps the peer's head
        #: in a register, connHeadCache in src/device/prims_ll.h): an "at least" poll that value satisfies
        #: needs no load, since counters only grow
        self._counters: dict[tuple, Any] = {}
        #: (register, byte) -> the counter word a load put there, for polls that wait for it (ir.expr.Loaded)
        self.loaded_words: dict[tuple[str, int], Any] = {}
        #: (register, byte) -> (location, transfer) of the counter atomic whose old value the register holds
        self.atomic_results: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.end = 0.0
        self.final: PathNode | None = None
        self._preplaced: list[float] | None = None
        self._pairs: dict[int, tuple[Any, Any]] = {}
        self._rates: dict[int, float] = {}
        self._polls: dict[int, tuple] = {}
        self._out: dict[int, tuple] = {}
        self.record = sim.record
        self.memory = sim.memory
        #: bytes the rank's CTAs keep outstanding: a transfer up to that size is not paced by their engine
        self.burst = sim.process_ctas * self.c.cta_bytes_in_flight
        #: element additions per µs of the rank's CTAs (FP32 lanes x clock)
        self.add_rate = sim.process_ctas * self.c.fp32_lanes_per_sm * self.c.sm_clock_ghz * 1e3
        #: kind -> this rank's rule for it (the visitor's dispatch, as a list for the hot path)
        self._rules: list[Any] = [None] * len(OP_TYPES)  # a Loop is a Block, walked by visit_loop
        for kind in SimKind:
            self._rules[kind] = getattr(self, method_name(OP_TYPES[kind]))

    # ------------------------------------------------------------------ helpers

    def _advance(self, th: Thread, end: float, kind: str, label: Any, what: str = "",
                 cause: Any = None, cause_at: float = 0.0) -> None:
        """Move ``th``'s clock to ``end``, recording a node from the end of the previous one (issue overheads
        not yet on a node are folded in)."""
        prev = th.node
        start = prev.end
        if end < th.t:
            end = th.t
        if end <= start + EPS and cause is None:
            return
        node = PathNode(self.rank, start, end, kind, label, prev, cause, cause_at, what)
        th.node = node
        th.t = end
        if self.record:
            self.sim.nodes.append(node)

    def _stream_register(self, th: Thread, name: str, label: Any) -> tuple[float, Any]:
        """Wait until the first elements of register ``name`` are there and return ``(when its last element
        is, what produced it)``: a consumer works through a register element by element as its producer
        fills it (a CTA's threads load, add and store their elements in one pass, as NCCL's reduceCopy
        does), so it may start on the first and cannot finish before the last."""
        found = self.regs.get(name)
        if found is None:
            return 0.0, None
        ready, producer, first = found
        if first > th.t + EPS:
            self._advance(th, first, "data", label, "waits for register " + name, producer, first)
        return ready, producer

    def _fence(self, th: Thread, label: Any, scope: Scope, kind: Any, what: str) -> None:
        c = self.c
        wait, by = th.acked, th.acked_by
        if th.loaded > wait:
            wait, by = th.loaded, th.loaded_by
        if wait > th.t + EPS:
            self._advance(th, wait, "sync", label, what + " (waits for acknowledgements)", by, wait)
        if scope is Scope.SYS:
            base = c.fence_sys_us
        elif scope is Scope.GPU:
            base = c.fence_gpu_us
        else:
            base = 0.0
        if kind is FenceKind.SC:
            base += c.fence_sc_extra_us
        self._advance(th, th.t + base, "sync", label, what)

    # ------------------------------------------------------------------ the process

    def process(self, start: float, launch_node: PathNode):
        """The SimPy process: run every item, then note when this rank finished."""
        th = Thread(start, launch_node)
        yield from self._walk(th, self.items)
        self.end = th.t
        self.final = th.node

    def _walk(self, th: Thread, items: list[Any]):
        """Run ``items`` on thread ``th``: one loop over an explicit stack of (items left, thread) frames
        rather than a generator per loop iteration, so resuming a rank after a wait does not pass through
        a chain of nested generators."""
        fine = self.sim.fine
        rules = self._rules
        frames: list[tuple[Any, Any]] = []  # (iterator, thread), or (None, (thread, lanes, label)) to join
        it = iter(items)
        while True:
            descended = False
            for op in it:
                if op.__class__ is Block:
                    frames.append((it, th))
                    frames.extend((yield from self.visit_loop(th, op)))
                    it, th = frames.pop()
                    descended = True
                    break
                if fine:
                    yield from self._settle(th, op)
                wait = rules[op.kind](th, op)
                if wait is not None:
                    yield from wait
            if descended:
                continue
            while frames:  # this list of items is done: join lanes that all finished, resume the parent
                it, th = frames.pop()
                if it is not None:
                    break
                self._join(*th)
            else:
                return

    # ------------------------------------------------------------------ the rules, one per operation class

    def visit_loop(self, th: Thread, block: Block):
        """A loop instance (a :class:`~collsim.sim.lower.Block`): the frames that run its iterations, as
        lanes forked from ``th`` (their first transfers issued together when they can be) or in order on
        ``th``. A generator: it catches up with the simulation clock before a batch."""
        iterations = block.iterations
        if not (block.lanes and iterations):
            return [(iter(iterations[k]), th) for k in range(len(iterations) - 1, -1, -1)]
        lanes = [th.fork() for _ in iterations]
        # A warp's memory instruction is one transaction per distinct address: the lane for the k-th peer
        # issues k transactions after the first.
        issue = self.c.peer_issue_us
        for k in range(1, len(lanes)):
            lanes[k].t += k * issue
        skip = 0
        sim = self.sim
        if not sim.fine and self._batchable(iterations, th.t):
            env = sim.env
            if th.t > env.now + EPS:
                sim.events += 1
                yield env.timeout(th.t - env.now)
            self._issue_batch(lanes, [iteration[0] for iteration in iterations])
            skip = 1
        frames: list[tuple[Any, Any]] = [(None, (th, lanes, block.label))]
        for k in range(len(lanes) - 1, -1, -1):
            frames.append((iter(iterations[k][skip:] if skip else iterations[k]), lanes[k]))
        return frames

    def visit_poll_until(self, th: Thread, op: Any):
        if op.pred.loaded:
            return self._poll_loaded(th, op)
        if op.swap is not None:
            return self._cas_loop(th, op)
        pred = op.pred
        if pred.__class__ is AtLeast and op.into is None:
            seen = self._counters.get(op.key)
            if seen is None:
                seen = self.memory.inits[op.key[0]]
            if isinstance(seen, int) and pred.holds(seen):  # the value in the register suffices: no load
                th.t += self.c.op_overhead_us
                return None
        plan = self._poll_plan(th, op)
        lo = op.ref[4]
        found = plan[0].satisfied_at(lo, lo + op.ref[5], op.pred, plan[2])
        # Decided when it already holds at the first sample, or by writes that are all visible now.
        if found is None or (found[0] > self.sim.env.now + EPS and found[0] > plan[2] + EPS):
            return self._poll_after_wait(th, op, plan, found)
        self._poll_done(th, op, self._completion(plan, found[0]), found, plan[1])
        return None

    def _cas_loop(self, th: Thread, op: Any):
        """A CAS loop: a release one first orders the thread's earlier writes (as a release store does); then
        it samples like a poll, one atomic at the owner per sample, until the word holds the compare value,
        and the sample that finds it writes ``swap`` there, at the owner, when it arrives."""
        if op.releasing:
            self._fence(th, op, op.scope, None, "release fence before the CAS")
        plan = self._poll_plan(th, op)
        lo = op.ref[4]
        found = plan[0].satisfied_at(lo, lo + op.ref[5], op.pred, plan[2])
        if found is None or (found[0] > self.sim.env.now + EPS and found[0] > plan[2] + EPS):
            found = yield from self._wait_poll(op, plan, found)
        done = self._completion(plan, found[0])
        self._poll_done(th, op, done, found, plan[1])
        first, period = plan[2], plan[3]
        seen = max(first, found[0] + period / 2)  # the successful sample reaches the word (see _completion)
        plan[0].add(Write(lo, lo + op.ref[5], seen, "set", op.swap, None))

    def _poll_loaded(self, th: Thread, op: Any):
        """A poll whose target is a loaded register word: the poll, waiting for what the register holds."""
        target = op.pred.value
        found = self.atomic_results.get((target.register, target.offset))
        if found is not None:
            yield from self._settled(found[1])
        wait = self.visit_poll_until(th, self._with_loaded_target(op))
        if wait is not None:
            yield from wait

    def _settled(self, tr: Any):
        """Wait until the clock reaches the moment ``tr``'s atomic landed: every atomic its owner performed
        before it is placed by then, so the old value it returned is known."""
        if tr.visible > self.sim.env.now + EPS:
            self.sim.events += 1
            yield self.sim.env.timeout(tr.visible - self.sim.env.now)

    def _register_word(self, register: str, offset: int) -> Any:
        """The counter value in a register word: what a counter atomic returned (once :meth:`_settled`) or
        what a load of a counter word found; None if the simulator knows none."""
        found = self.atomic_results.get((register, offset))
        if found is not None:
            return found[0].value_before(found[1])
        return self.loaded_words.get((register, offset))

    def _with_loaded_target(self, op: Any) -> Any:
        """A copy of poll ``op`` whose predicate waits for the value its register holds (the bound op may be
        shared by ranks, so it is not changed)."""
        def lookup(register: str, offset: int) -> Any:
            value = self._register_word(register, offset)
            if not isinstance(value, int):
                raise UnsupportedError(f"{_named(op)}: waits for register {register!r} byte {offset}, but the "
                                       f"simulator knows no counter value there (a counter atomic's result or "
                                       f"a loaded counter word)")
            return value
        resolved = copy.copy(op)
        resolved.pred = op.pred.resolved(lookup)
        return resolved

    def _poll_after_wait(self, th: Thread, op: Any, plan: tuple, found: Any):
        found = yield from self._wait_poll(op, plan, found)
        self._poll_done(th, op, self._completion(plan, found[0]), found, plan[1])

    # A store, load or atomic that moves data on links other ranks share while its thread is ahead of the
    # simulation clock first catches up (flags are too small to matter).

    def visit_store(self, th: Thread, op: Any):
        if not op.leader and op.ref[1] != self.rank and th.t > self.sim.env.now + EPS:
            return self._caught_up(th, op, self._store)
        self._store(th, op)
        return None

    def visit_load(self, th: Thread, op: Any):
        if not op.leader and op.ref[1] != self.rank and th.t > self.sim.env.now + EPS:
            return self._caught_up(th, op, self._load)
        self._load(th, op)
        return None

    def visit_atomic(self, th: Thread, op: Any):
        if not op.leader and op.ref[1] != self.rank and th.t > self.sim.env.now + EPS:
            return self._caught_up(th, op, self._atomic)
        self._atomic(th, op)
        return None

    def _caught_up(self, th: Thread, op: Any, issue: Any):
        """Catch up with ``th``'s clock before reserving shared links, then issue ``op``."""
        sim = self.sim
        sim.events += 1
        yield sim.env.timeout(th.t - sim.env.now)
        issue(th, op)

    def visit_fence(self, th: Thread, op: Any) -> None:
        self._fence(th, op, op.scope, op.sem, "fence")

    # Multimem ops (NVLink SHARP): what the switch does is collsim.sim.fabric's; their bulk transfers cross
    # the links every rank shares, so they catch up first too.

    def visit_multimem_load_reduce(self, th: Thread, op: Any):
        return self._through_switch(th, op, fabric.load_reduce)

    def visit_multimem_store(self, th: Thread, op: Any):
        return self._through_switch(th, op, fabric.multicast_store)

    def visit_multimem_red(self, th: Thread, op: Any):
        return self._through_switch(th, op, fabric.multicast_red)

    def _through_switch(self, th: Thread, op: Any, rule: Any):
        if not op.leader and th.t > self.sim.env.now + EPS:
            return self._caught_up(th, op, lambda th, op: rule(self, th, op))
        rule(self, th, op)
        return None

    # visit_reduce, visit_write_output, visit_sync_group and visit_kernel_boundary: below, with the local work.

    def visit_when(self, th: Thread, op: Any):
        """A branch on a register word: the old value a counter atomic returned (as the owner ordered the
        atomics: known once the clock reaches the moment this one landed) or a loaded counter word; the
        body's ops run, in order, only when the condition holds."""
        return self._branch(th, op)

    def _branch(self, th: Thread, op: Any):
        found = self.atomic_results.get((op.into, op.into_offset))
        if found is not None:
            yield from self._settled(found[1])
        value = self._register_word(op.into, op.into_offset)
        if not isinstance(value, int):
            raise UnsupportedError(f"{_named(op)}: branches on register {op.into!r} byte {op.into_offset}, but the "
                                   "simulator knows no counter value there (a counter atomic's result or a loaded "
                                   "counter word)")
        if not op.pred.holds(value):
            return
        rules = self._rules
        for inner in op.body:
            wait = rules[inner.kind](th, inner)
            if wait is not None:
                yield from wait

    def _join(self, th: Thread, lanes: list[Thread], label: str) -> None:
        slowest = lanes[0]
        for lane in lanes:
            th.absorb(lane)
            if lane.t > slowest.t:
                slowest = lane
        if slowest.node is not th.node:
            self._advance(th, slowest.t, "sync", f"{label} over {len(lanes)} lanes", "loop", slowest.node,
                          slowest.t)

    def _batchable(self, iterations: list[list[Any]], t: float) -> bool:
        """Whether every lane starts by moving data to or from another rank, ready to go now: the kernel
        interleaves those transfers (threads or warps per peer), so they are placed together."""
        if len(iterations) < 2:
            return False
        for iteration in iterations:
            first = iteration[0] if iteration else None
            if first is None or first.__class__ is Block or first.kind not in (STORE, LOAD, ATOMIC):
                return False
            if first.leader or first.releasing or first.acquiring or first.ref[1] == self.rank:
                return False
            src = first.src if first.kind == STORE else first.operand
            if isinstance(src, tuple) and src[0] == "reg":
                ready = self.regs.get(src[1])
                if ready is not None and ready[2] > t + EPS:
                    return False
            if first.kind == ATOMIC and first.into is not None:
                return False
        return True

    def _issue_batch(self, lanes: list[Thread], ops: list[Any]) -> None:
        """Issue each lane's first transfer together. The CTAs interleave them (threads or warps per peer),
        so the pipes carry them as ``k`` round-robin slices each (placed without events) and members of
        equal size complete together, when the last of them is through, as fine-grained interleaving
        would have them, instead of one queueing behind another."""
        overhead = self.c.op_overhead_us
        plans = []
        for lane, op in zip(lanes, ops):
            owner = op.ref[1]
            wire = op.ref[5] * op.line_bytes
            start = lane.t + overhead
            rate = cap = math.inf
            if op.kind == LOAD:
                route, back = self._pair(owner)
                pipes = (self.ld_engine,) + back.pipes
                start += route.latency + back.costs.remote_read_us
                rate = self._load_rate(owner)
            else:
                out = self._out.get(owner) or self._out_facts(owner)
                pipes = out[0]
                if op.kind == ATOMIC and isinstance(op.operand, tuple):
                    wire *= self._pair(owner)[0].costs.atomic_wire_factor
                    cap = min(self.sim.atomic_share(owner),
                              min(pipe.rate for pipe in pipes) / self.sim.atomic_fan_out(self.rank))
            plans.append((pipes, wire, start, rate, cap))
        # Equal pushes complete together anyway (below), so one slice each is enough for them. The members
        # share the CTAs' outstanding bytes.
        slices = max(1, min(BATCH_SLICES, BATCH_PLACEMENTS // len(plans))) if ops[0].kind == LOAD else 1
        burst = self.burst / len(plans) / slices
        finishes = [0.0] * len(plans)
        for _ in range(slices):
            for m, (pipes, wire, start, rate, cap) in enumerate(plans):
                finishes[m] = self._place_burst(pipes, wire / slices, start, burst, rate, cap)
        if ops[0].kind != LOAD:
            # Pushed at fine grain from one engine, members of equal size complete together, when the last
            # is through. (Pulls are paced by each owner's egress, which other readers share too, so they
            # keep the completion order their slices got.)
            last: dict[float, float] = {}
            for (_, wire, _, _, _), finish in zip(plans, finishes):
                last[wire] = max(last.get(wire, 0.0), finish)
            finishes = [last[wire] for _, wire, _, _, _ in plans]
        self._preplaced = finishes[::-1]
        try:
            for lane, op in zip(lanes, ops):
                if op.kind == STORE:
                    self._store(lane, op)
                elif op.kind == LOAD:
                    self._load(lane, op)
                else:
                    self._atomic(lane, op)
        finally:
            self._preplaced = None

    def _reserve(self, pipes: tuple, nbytes: float, start: float, sustained: float = math.inf,
                 cap: float = math.inf) -> float:
        """Place a transfer on its pipes (or take the finish of its batch member, placed already)."""
        if self._preplaced:
            return self._preplaced.pop()
        return self._place_burst(pipes, nbytes, start, self.burst, sustained, cap)

    @staticmethod
    def _place_burst(pipes: tuple, nbytes: float, start: float, burst: float, sustained: float = math.inf,
                     cap: float = math.inf) -> float:
        """Place a transfer whose first pipe is its issuing engine: the CTAs keep ``burst`` bytes outstanding,
        so that much leaves at the rate of the other pipes, and only the rest is paced by the engine (at most
        ``sustained``); ``cap`` limits both (Little's law: the engine's rate is the bytes in flight over the
        round trip, a token bucket of ``burst``). A capped transfer (a data atomic's share) runs at its cap
        as a whole: its burst is within the cap, not beside it."""
        if burst <= 0 or cap < math.inf:
            return place(pipes, nbytes, start, min(sustained, cap))
        head = nbytes if nbytes < burst else burst
        finish = place(pipes[1:], head, start, cap) if len(pipes) > 1 else start
        if nbytes > head:
            rest = place(pipes, nbytes - head, start, min(sustained, cap))
            finish = rest if rest > finish else finish
        return finish

    def _settle(self, th: Thread, op: Any):
        """Fine-grained mode: wait for piecewise transfers an op depends on to be fully issued."""
        waits = []
        if op.kind in (SYNC, FENCE, KERNEL_END) or op.releasing:
            waits.extend(th.pending)
            th.pending = []
        sources = op.srcs if op.kind == REDUCE else (op.src, op.operand)
        for src in sources:
            if isinstance(src, tuple) and src[0] == "reg":
                event = self.reg_pending.get(src[1])
                if event is not None:
                    waits.append(event)
        if waits:
            pending = [w for w in waits if not w.triggered]
            if pending:
                self.sim.events += 1
                yield self.sim.env.all_of(pending)
            for proc in waits:  # the pieces were issued by a lane that may have joined since: take its result
                tr = proc.value
                if tr is None:
                    continue
                if tr.what == "load":
                    if tr.visible > th.loaded:
                        th.loaded, th.loaded_by = tr.visible, tr
                    continue
                if tr.finish > th.issued:
                    th.issued, th.issued_by = tr.finish, tr
                if tr.ack > th.acked:
                    th.acked, th.acked_by = tr.ack, tr

    # ------------------------------------------------------------------ stores, atomics, loads

    def _store(self, th: Thread, op: Any) -> None:
        src = op.src
        not_before = 0.0
        if src is not None and src[0] == "reg":
            not_before, _ = self._stream_register(th, src[1], op)
        if op.releasing:
            self._fence(th, op, op.scope, None, "release fence before the store")
        payload = src is not None and src[0] != "fill"
        th.t += self.c.op_overhead_us
        how, value = stored(op)
        ref = op.ref
        lines = ref[5]
        land = None if how is None else (self.memory.location(op.key), ref[4], lines, how, value)
        read = lines * op.data_bytes if src is not None and src[0] == "input" else 0
        self._push(th, op, ref[1], lines * op.line_bytes, payload, "store", read, False, land, not_before)

    def _push(self, th: Thread, op: Any, owner: int, wire: float, payload: bool, what: str,
              read_bytes: float, atomic: bool, land: Any, not_before: float = 0.0) -> Transfer | None:
        """Issue ``wire`` bytes from this rank into ``owner``'s memory; once its times are known, ``land``
        (``(location, first line, lines, how, value)`` or None) records the write it makes. Its last byte
        leaves no earlier than ``not_before`` (when the register it streams from is complete).

        Returns the transfer, or None while a fine-grained transfer is still issuing its pieces.
        """
        sim = self.sim
        t = th.t
        node = th.node
        if node.end < t - EPS:
            node = self._issue_node(th, op, payload)
        unit = atomic and payload and not op.leader  # a data atomic: the owner's L2 performs every operation
        # A data atomic runs no faster than its share of the owner's L2 atomic unit, which every rank adding
        # into that memory shares (the share is fixed by the program, so no rank's order decides it).
        cap = self.sim.atomic_share(owner) if unit else math.inf
        if owner == self.rank:  # the CTAs' load/store units, then HBM
            finish = place((self.hbm, self.local_ld), wire + read_bytes, t, cap)
            if not_before > finish:
                finish = not_before
            tr = Transfer(self.rank, owner, wire, t, t, finish, finish, finish, node, payload, op, True, what)
            self._issued(th, tr, land)
            return tr
        out = self._out.get(owner)
        if out is None:
            out = self._out_facts(owner)
        # A leader's flag or counter is a few bytes: link arbitration interleaves packets, so it does not
        # queue behind bulk transfers and costs latency only.
        pipes = () if op.leader else out[0]
        if unit and pipes:
            # the rank's data atomics to its other owners run concurrently (a thread or warp per owner) and
            # share its engine and links fairly, each at most its owner's L2 share (placed one after another
            # at their caps, the last would get what the first left)
            fair = min(pipe.rate for pipe in pipes) / sim.atomic_fan_out(self.rank)
            if fair < cap:
                cap = fair
        delay = out[2] if atomic else out[1]
        back = out[3]
        if op.leader or out[4] <= 1:
            finish = self._reserve(pipes, wire, t, cap=cap) if pipes else t
            if not_before > finish:
                finish = not_before
            tr = Transfer(self.rank, owner, wire, t, t, finish, finish + delay, finish + delay + back, node,
                          payload, op, False, what)
            self._issued(th, tr, land)
            return tr
        tr = Transfer(self.rank, owner, wire, t, t, t, t, t, node, payload, op, False, what)

        def finished(finish: float) -> Transfer:
            tr.finish, tr.visible, tr.ack = finish, finish + delay, finish + delay + back
            self._issued(th, tr, land)
            return tr

        th.pending.append(sim.env.process(sim.issue_pieces(pipes, wire, t, out[4], finished, cap,
                                                           burst=self.burst)))
        return None

    def _out_facts(self, owner: int) -> tuple:
        """``(store-engine and link pipes, write delay, atomic delay, return latency, transfer pieces, route
        latency)`` of pushes to ``owner`` (cached per rank)."""
        route, back = self._pair(owner)
        c = route.costs
        facts = self._out[owner] = ((self.st_engine,) + route.pipes, route.latency + c.remote_write_us,
                                    route.latency + c.atomic_remote_us, back.latency, c.transfer_pieces,
                                    route.latency)
        return facts

    def _load_rate(self, owner: int) -> float:
        """Bytes per µs this rank's CTAs can pull from ``owner``: the loads they keep in flight over the round
        trip (Little's law)."""
        rate = self._rates.get(owner)
        if rate is None:
            route, back = self._pair(owner)
            rtt = route.latency + back.costs.remote_read_us + back.latency
            rate = self._rates[owner] = self.sim.process_ctas * back.costs.cta_bytes_in_flight / rtt
        return rate

    def _pair(self, owner: int) -> tuple[Any, Any]:
        """The routes to ``owner`` and back (cached per rank)."""
        pair = self._pairs.get(owner)
        if pair is None:
            pair = self._pairs[owner] = (self.sim.route(self.rank, owner), self.sim.route(owner, self.rank))
        return pair

    def _issue_node(self, th: Thread, op: Any, payload: bool) -> PathNode:
        """The node a transfer hangs from: the issuing thread's state at its clock now."""
        node = th.node
        if node.end < th.t - EPS:  # put the op's issue overhead on a node so the chain stays contiguous
            node = th.node = PathNode(self.rank, node.end, th.t, "data" if payload else "sync", op, node, None, 0.0,
                                  "issues")
            if self.record:
                self.sim.nodes.append(node)
        return node

    def _issued(self, th: Thread, tr: Transfer, land: tuple | None) -> None:
        if tr.finish > th.issued:
            th.issued, th.issued_by = tr.finish, tr
        if tr.ack > th.acked:
            th.acked, th.acked_by = tr.ack, tr
        if self.record:
            self.sim.transfers.append(tr)
        if land is not None:
            location, line, lines, how, value = land
            location.add(Write(line, line + lines, tr.visible, how, value, tr))

    def _atomic(self, th: Thread, op: Any) -> None:
        buf, owner, slot, region, line, lines = op.ref
        operand = op.operand
        data = isinstance(operand, tuple)
        not_before = 0.0
        if data and operand[0] == "reg":
            not_before, _ = self._stream_register(th, operand[1], op)
        if op.releasing:
            self._fence(th, op, op.scope, None, "release fence before the atomic")
        th.t += self.c.op_overhead_us
        wire = lines * op.line_bytes
        factor = self._pair(owner)[0].costs.atomic_wire_factor if data and owner != self.rank else 1.0
        # a line's count word (``flag``) is what its readers poll; the data words they do not
        value = op.flag if op.flag is not None and op.polls_flags else (DATA if data else operand)
        how = RMW_HOW.get(op.op.op, "set")
        if op.op.compare is not None:  # a CAS: it swaps in the operand only where the word held the compare value
            how, value = "cas", (_constant(op.op.compare, op), value)
        land = (self.memory.location(op.key), line, lines, how, value)
        tr = self._push(th, op, owner, wire * factor, data, "atomic", wire if owner == self.rank else 0.0, True,
                        land, not_before)
        if op.into is not None:
            if tr is None:
                raise NotImplementedError("atomics with a result are not split into pieces")
            self._advance(th, tr.ack, "sync", op, "atomic returns its old value", tr, tr.ack)
            self.regs[op.into] = (th.t, th.node, th.t)
            if not data:  # a counter's old value: a branch may test it (what it was once this write landed)
                self.atomic_results[(op.into, op.into_offset)] = (land[0], tr)

    def _load(self, th: Thread, op: Any) -> None:
        sim = self.sim
        buf, owner, slot, region, line, lines = op.ref
        wire = lines * op.line_bytes
        th.t += self.c.op_overhead_us
        t = th.t
        if not op.data_bytes:  # a counter word: remember what the load finds, a poll may wait for it
            location = self.memory.location(op.key)
            for j in range(lines):
                self.loaded_words[(op.into, op.into_offset + j * op.line_bytes)] = location.value_at(line + j, 1, t)
        node = self._issue_node(th, op, True)
        if owner == self.rank:
            finish = reserve((self.hbm, self.local_ld), wire, t)
            self._loaded(th, op, Transfer(self.rank, owner, wire, t, t, finish, finish, finish, node, True, op,
                                          True, "load"))
            return
        route, back = self._pair(owner)
        start = t + route.latency + back.costs.remote_read_us
        pipes = () if op.leader else (self.ld_engine,) + back.pipes
        pieces = 1 if op.leader or op.acquiring else back.costs.transfer_pieces
        if pieces <= 1:
            finish = self._reserve(pipes, wire, start, self._load_rate(owner)) if pipes else start
            ready = finish + back.latency
            self._loaded(th, op, Transfer(self.rank, owner, wire, t, start, finish, ready, ready, node, True, op,
                                          False, "load"))
            return
        tr = Transfer(self.rank, owner, wire, t, start, start, start, start, node, True, op, False, "load")

        def finished(finish: float) -> Transfer:
            tr.finish = finish
            tr.visible = tr.ack = finish + back.latency
            self._loaded(th, op, tr)
            return tr

        proc = sim.env.process(sim.issue_pieces(pipes, wire, start, pieces, finished,
                                                sustained=self._load_rate(owner), burst=self.burst))
        th.pending.append(proc)
        self.reg_pending[op.into] = proc

    def _loaded(self, th: Thread, op: Any, tr: Transfer) -> None:
        if self.record:
            self.sim.transfers.append(tr)
        if tr.visible > th.loaded:
            th.loaded, th.loaded_by = tr.visible, tr
        # the first bytes are back one return latency after they started to flow (a local load's at once)
        first = tr.start + (tr.visible - tr.finish)
        old = self.regs.get(op.into)
        if old is None:
            self.regs[op.into] = (tr.visible, tr, first)
        else:  # pieces of one register from several loads: an element needs every piece's first bytes
            self.regs[op.into] = (tr.visible, tr, max(first, old[2])) if tr.visible > old[0] else \
                (old[0], old[1], max(first, old[2]))
        if op.acquiring:
            self._advance(th, tr.visible + self.c.acquire_us, "sync", op, "acquire load", tr, tr.visible)

    # ------------------------------------------------------------------ polls

    def _poll_plan(self, th: Thread, op: Any) -> tuple:
        """``(location, first observation, period, return offset, read done, extra)`` of a poll starting now."""
        c = self.c
        owner = op.ref[1]
        t0 = th.t + c.op_overhead_us
        timing = self._polls.get(owner)
        if timing is None:
            timing = self._polls[owner] = self._poll_timing(owner)
        observe, period, back, rate = timing
        read_bytes = op.ref[5] * op.line_bytes if op.into is not None else 0
        if not read_bytes:
            read_done = t0
        elif owner == self.rank:  # the CTAs read the lines (at their wire layout) where they landed
            read_done = reserve((self.local_ld,), read_bytes, t0)
        else:
            read_done = t0 + period + read_bytes / rate
        extra = c.acquire_us if op.acquiring else 0.0
        if read_bytes and op.layout.lanes > 1:
            # A line written by several lanes (LL128's eight 16-byte stores) is checked by the lane that holds
            # the polled word; once it holds, the other lanes load their parts again (one more access).
            extra += c.remote_read_us if owner == self.rank else period
        return (self.memory.location(op.key), t0, t0 + observe, period, back, read_done, extra)

    def _poll_timing(self, owner: int) -> tuple[float, float, float, float]:
        """``(first observation after issue, sampling period, return latency, read rate)`` of polls on
        ``owner``'s memory: a local spin-loop iteration is one L2 access, which sees memory half way through
        it; a remote sample is a load's round trip, which sees it at the owner."""
        if owner == self.rank:
            period = self.c.poll_period_us
            return period / 2, period, period / 2, self.local_ld.rate
        route, back = self._pair(owner)
        observe = route.latency + back.costs.remote_read_us
        period = observe + back.latency
        return observe, period, period - observe, min([p.rate for p in back.pipes] + [self._load_rate(owner)])

    @staticmethod
    def _completion(plan: tuple, t_sat: float) -> float:
        """When a poll completes whose lines satisfy it from ``t_sat`` on: samples observe memory one period
        apart at a phase nothing in the program fixes, so a value that appears after the first observation
        is seen half a period later on average (GM section 2: detection delay = propagation + half the poll
        period); the sample's result comes back after the return latency, and the poll has read its lines."""
        _, _, first, period, back, read_done, extra = plan
        seen = t_sat + period / 2
        done = (seen if seen > first else first) + back
        return (done if done > read_done else read_done) + extra

    def _wait_poll(self, op: Any, plan: tuple, found: tuple | None):
        """Sleep until the writes that decide the poll are known: its location is re-evaluated on every new
        write, and the poll wakes when the satisfying time it found has passed without being revised.

        (A poll whose predicate already holds at its first sample does not come here: a later write that
        undid it before the sample would be a protocol overwriting a value not yet consumed.)"""
        loc = plan[0]
        lo = op.ref[4]
        watch = _PollWatch(self.sim, loc, lo, lo + op.ref[5], op.pred, plan[2], found)
        loc.waiters.append(watch.written)
        watch.poke(found)
        self.sim.events += 1
        found = yield watch.decided
        return found

    def _poll_done(self, th: Thread, op: Any, done: float, found: tuple, t0: float) -> None:
        t_sat, write = found
        if op.pred.__class__ is AtLeast:
            # The counter as the poll saw it: its value once the predicate held, which every rank's writes
            # visible by then decide (all issued before the simulation clock, whatever order ranks run in).
            value = self.memory.location(op.key).value_at(op.ref[4], op.ref[5], t_sat) \
                if t_sat <= self.sim.env.now + EPS else None
            self._counters[op.key] = value if isinstance(value, int) else op.pred.value
        th.t = t0  # the op's issue overhead, folded into the poll's node
        tr = write.transfer if write is not None else None
        if tr is not None and write.visible > t0:
            self._advance(th, done, "sync", op, "poll", tr, write.visible)
        else:
            self._advance(th, done, "sync", op, "poll")
        if op.into is not None:
            self.regs[op.into] = (th.t, th.node, th.t)

    # ------------------------------------------------------------------ local work and synchronization

    def visit_reduce(self, th: Thread, op: Any) -> None:
        """Read the input operands (HBM, through the CTAs' loads), add every operand element at the CTAs' add
        rate and write the output (HBM), whichever takes longest, working through register operands as
        they fill. The thread goes on once the first sums exist (its next op may stream from them); the
        reduce's end is outstanding work a group barrier, fence or kernel end waits for."""
        operands = 0
        in_bytes = 0
        last, producer = 0.0, None
        for src in op.srcs:
            if src[0] == "reg":
                ready, made_by = self._stream_register(th, src[1], op)
                if ready > last:
                    last, producer = ready, made_by
                operands += src[3]
            else:
                operands += 1
                if src[0] == "input":
                    in_bytes += op.nbytes
        t = th.t + self.c.op_overhead_us
        end = t + max(0, operands - 1) * op.nbytes / self.sim.elem_bytes / self.add_rate
        if in_bytes:
            end = max(end, reserve((self.hbm, self.local_ld), in_bytes, t))
        if op.offset is not None:
            end = max(end, reserve((self.hbm,), op.nbytes, t))
        node = self._side_work(th, op, t, end, last, producer, "reduce")
        self.regs[op.into] = (node.end, node, t)

    # -- host actions: before the launch, on the rank's stream or among the hosts ----------------------

    def visit_host_memset(self, th: Thread, op: Any) -> None:
        """A memset node on the rank's stream before the collective's kernel: its stores stream into the owner's
        HBM (the rank's HBM pipe, at its bandwidth), the range reads as the pattern from then on, and the
        kernel, stream-ordered after the memset, starts one ``stream_gap_us`` after it finished."""
        buf, owner, slot, region, line, lines = op.ref
        value = SENTINEL if op.src[1] == "sentinel" else 0
        nbytes = lines * op.line_bytes
        finish = place((self.hbm,), nbytes, th.t)
        tr = Transfer(self.rank, owner, nbytes, th.t, th.t, finish, finish, finish, th.node, False, op, True,
                      "memset")
        self._issued(th, tr, (self.memory.location(op.key), line, lines, "set", value))
        self._advance(th, finish, "launch", op, f"host memset of {nbytes} B on the stream")
        self._advance(th, th.t + self.c.stream_gap_us, "launch", op, "stream gap before the kernel")

    def visit_host_barrier(self, th: Thread, op: Any) -> None:
        """The hosts meet between launches: this rank waits for the last rank to get there (every rank runs the
        same host actions from its own start, so the last is the one that started last, ``start_skew_us``
        after the first), the rendezvous takes ``host_barrier_us``, and the kernel's launch, issued only after
        it, cannot be hidden behind the previous kernel: its host part (``launch_overhead_us``) and the
        kernel's start (``kernel_start_us``) follow."""
        c = self.c
        n = self.sim.size
        behind = c.start_skew_us * (1.0 - self.rank / (n - 1)) if n > 1 else 0.0
        if behind > EPS:
            self._advance(th, th.t + behind, "sync", op, "waits for the last rank's host")
        self._advance(th, th.t + c.host_barrier_us, "sync", op, "host barrier among the ranks")
        self._advance(th, th.t + c.launch_overhead_us + c.kernel_start_us, "launch", op,
                      "launch after the host barrier (not overlapped with the previous kernel)")

    def visit_bulk_load(self, th: Thread, op: Any):
        """A bulk async copy: the copy engine pulls the lines as the CTA's loads would (the same links and round
        trip; its bytes in flight stand in for the CTA's), and the CTA waits on its mbarrier (an acquire)."""
        return self.visit_load(th, op)

    def visit_proxy_fence(self, th: Thread, op: Any) -> None:
        """``fence.proxy.async`` orders proxies; no latency of it is published, so it costs its issue only."""
        th.t += self.c.op_overhead_us

    def visit_proxy_thread(self, th: Thread, op: Any) -> None:
        """The rank's host proxy thread starts its round now, on a CPU core of its own (collsim.sim.host)."""
        self.sim.events += 1
        self.sim.env.process(host.run_proxy(self, th.t, th.node, op.body))

    def visit_write_output(self, th: Thread, op: Any) -> None:
        """Copy a register (or the input) to the output through HBM, as the register fills; like a reduce, the
        thread goes on (a store of the same register streams alongside, as NCCL's one-pass copy-and-send)
        and the copy's end is outstanding work."""
        src = op.src
        last, producer = 0.0, None
        if src[0] == "reg":
            last, producer = self._stream_register(th, src[1], op)
        t = th.t + self.c.op_overhead_us
        end = reserve((self.hbm,), op.nbytes, t)
        if src[0] == "input":
            end = max(end, reserve((self.hbm, self.local_ld), op.nbytes, t))
        self._side_work(th, op, t, end, last, producer, "copies to output")

    def _side_work(self, th: Thread, op: Any, t: float, end: float, last: float, producer: Any,
                   what: str) -> PathNode:
        """Record local work of ``th`` from its clock to ``end`` (or to ``last``, when the register it works
        through fills later, then caused by the register's producer) without holding the thread, which goes
        on at ``t``; what waits for outstanding work (a group barrier, a fence, the kernel end) waits for it."""
        waited = last > end
        node = PathNode(self.rank, th.node.end, last if waited else end, "reduce", op, th.node,
                        producer if waited else None, last if waited else 0.0, what)
        if self.record:
            self.sim.nodes.append(node)
        th.t = t
        if node.end > th.loaded:
            th.loaded, th.loaded_by = node.end, node
        return node

    def visit_sync_group(self, th: Thread, op: Any) -> None:
        wait, by = th.issued, th.issued_by
        if th.loaded > wait:
            wait, by = th.loaded, th.loaded_by
        if wait > th.t + EPS:
            self._advance(th, wait, "sync", op, "waits for the group's issued work", by, wait)
        self._advance(th, th.t + self.c.sync_group_us, "sync", op, "syncs the thread group")

    def visit_kernel_boundary(self, th: Thread, op: Any) -> None:
        wait, by = th.acked, th.acked_by
        for t, b in ((th.loaded, th.loaded_by), (th.issued, th.issued_by)):
            if t > wait:
                wait, by = t, b
        if wait > th.t + EPS:
            self._advance(th, wait, "sync", op, "waits for outstanding work before the kernel ends", by, wait)
        self._advance(th, th.t + self.c.kernel_end_us, "launch", op, "kernel end")
