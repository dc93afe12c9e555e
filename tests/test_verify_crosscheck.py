"""The one PTX model, encoded two ways, against each other and against brute force, on protocol programs.

* Under ``sc``, the set of values consumers can read equals the set found by
  brute force over every interleaving of the element events (elements of one
  instruction in any order, atomic groups as one step, polls only where
  their exit read satisfies the predicate).
* Under ``ptx`` and ``sc``, the vector-clock encoding of causality (the
  verifier's default) allows exactly the consumer values the relational
  encoding (reachability over the synchronisation edges, the direct
  transcription of the ISA) allows, on the same lowered programs.
"""
from __future__ import annotations

from functools import lru_cache

import pytest
import z3

from collsim.ir.registry import load_protocol
from collsim.verify.instance import Bounds, VerifyInstance
from collsim.verify.lower import lower_instance
from collsim.verify.models import encode

TINY = Bounds(ranks=2, iterations=1)


def _consumers(low: VerifyInstance):
    return [e for e in low.events if e.consumer]


def consumer_values(low: VerifyInstance, model: str, causality: str = "vector-clock", prune: bool = True,
                    liveness: bool = False) -> set[tuple[int, ...]]:
    ex = encode(low, model, causality=causality, ctx=z3.Context(), prune=prune, liveness=liveness)
    s = ex.solver(300)
    terms = [ex.rval(e) for e in _consumers(low)]
    found: set[tuple[int, ...]] = set()
    while True:
        status = s.check()
        assert status != z3.unknown, s.reason_unknown()
        if status == z3.unsat:
            return found
        m = s.model()
        vals = tuple(m.eval(t, model_completion=True).as_long() for t in terms)
        found.add(vals)
        s.add(z3.Or([t != v for t, v in zip(terms, vals)]))


def brute_force_sc(low: VerifyInstance) -> set[tuple[int, ...]]:
    """Every SC interleaving of the element events, filtered by the rules of the event interface.

    Each element is its own step (a vector's elements in any order). An
    execution counts when every poll's exit reads satisfy its predicate,
    every read group sees each write group all or not at all, and two write
    groups are ordered the same way at every location they share.
    Memoised on (progress, memory, coherence history, reads so far).
    """
    inputs = low.input_env()
    threads = low.threads
    consumers = [e.id for e in _consumers(low)]
    members: dict = {}
    for t, th in enumerate(threads):
        for i in th:
            if i.kind == "bar":
                members.setdefault(i.events[0].bar, set()).add(t)
    memo: dict = {}

    def groups_ok(instr, read):
        src = dict(read)
        rgs: dict = {}
        for e in instr.events:
            if e.is_read and e.rgroup is not None:
                rgs.setdefault(e.rgroup, []).append(e)
        for reads in rgs.values():
            by_loc = {r.loc: r for r in reads}
            for wg in low.wgroups.values():
                covered = [(by_loc[w.loc], w) for w in wg if w.loc in by_loc]
                if len(covered) > 1 and len({src[r.id][0] == w.id for r, w in covered}) > 1:
                    return False
        return True

    def co_consistent(history):
        order = {loc: {w: n for n, w in enumerate(ws)} for loc, ws in history}
        for g in low.wgroups.values():
            for h in low.wgroups.values():
                if g is h:
                    continue
                theirs = {w.loc: w for w in h}
                shared = [(w, theirs[w.loc]) for w in g if w.loc in theirs]
                if len({order[a.loc][a.id] < order[b.loc][b.id] for a, b in shared}) > 1:
                    return False
        return True

    def explore(progress, memory, history, read):
        key = (progress, memory, history, read)
        if key in memo:
            return memo[key]
        result: set = set()
        if all(pc >= len(threads[t]) for t, (pc, _) in enumerate(progress)):
            if co_consistent(history):
                values = dict(read)
                result.add(tuple(values[c][1] for c in consumers))
            memo[key] = result
            return result
        mem = dict(memory)
        for t, (pc, done) in enumerate(progress):
            if pc >= len(threads[t]):
                continue
            instr = threads[t][pc]
            if instr.kind == "fence" or not instr.events:
                result |= explore(_advance(progress, t, pc + 1), memory, history, read)
                continue
            if instr.kind == "bar":
                bar = instr.events[0].bar
                waiting = [u for u in members[bar] if progress[u][0] < len(threads[u])
                           and threads[u][progress[u][0]].kind == "bar"
                           and threads[u][progress[u][0]].events[0].bar == bar]
                if len(waiting) == len(members[bar]) and t == min(waiting):
                    nxt = progress
                    for u in waiting:
                        nxt = _advance(nxt, u, nxt[u][0] + 1)
                    result |= explore(nxt, memory, history, read)
                continue
            for n, e in enumerate(instr.events):
                if n in done:
                    continue
                new_mem, new_read, new_hist = dict(mem), dict(read), dict(history)
                if e.is_read:
                    new_read[e.id] = new_mem[e.loc]
                if e.is_write:
                    env = {**inputs, **{("rd", k): v[1] for k, v in new_read.items()}}
                    new_mem[e.loc] = (e.id, e.value.evaluate(env))
                    new_hist[e.loc] = new_hist.get(e.loc, ()) + (e.id,)
                now_done = done | {n}
                if len(now_done) == len(instr.events):
                    if instr.kind == "poll":
                        vals = [new_read[x.id][1] for x in instr.events if x.polled]
                        ok = all(instr.predicate.holds(v) for v in vals)
                        if not ok:
                            continue
                    if not groups_ok(instr, new_read):
                        continue
                    nxt = _advance(progress, t, pc + 1)
                else:
                    nxt = progress[:t] + ((pc, now_done),) + progress[t + 1:]
                result |= explore(nxt, tuple(sorted(new_mem.items())), tuple(sorted(new_hist.items())),
                                  tuple(sorted(new_read.items())))
        memo[key] = result
        return result

    start = tuple((0, frozenset()) for _ in threads)
    memory = tuple(sorted((loc, (None, v)) for loc, v in low.init.items()))
    return explore(start, memory, (), ())


def _advance(progress, t, pc):
    return progress[:t] + ((pc, frozenset()),) + progress[t + 1:]


@lru_cache(maxsize=None)
def _low(name: str, assumptions: tuple[str, ...] | None, algorithm: str = "one-shot"):
    proto = load_protocol(name)
    return lower_instance(proto, algorithm, TINY, assumptions)


SC_CASES = [("ll", None), ("ll", ()), ("sentinel", None), ("sentinel", ()), ("simple", None),
            ("ll128", ()), ("mutant-ll-split-flag", None), ("mutant-simple-no-fence", None)]


@pytest.mark.parametrize("name,assumptions", SC_CASES)
def test_sc_encoding_agrees_with_brute_force(name, assumptions):
    low = _low(name, assumptions)
    expected = brute_force_sc(low)
    assert expected, "brute force found no finishing execution"
    assert consumer_values(low, "sc") == expected


MODEL_CASES = [("ll", None), ("ll", ()), ("ll128", None), ("ll128", ()), ("sentinel", None), ("sentinel", ()),
               ("simple", None), ("barrier", None), ("atomic-counter", None), ("mutant-simple-no-fence", None),
               ("mutant-barrier-relaxed-arrive", None), ("mutant-ll-split-flag", None)]


@pytest.mark.parametrize("model", ["ptx", "sc"])
@pytest.mark.parametrize("name,assumptions", MODEL_CASES)
def test_vector_clocks_agree_with_the_relational_encoding(name, assumptions, model):
    low = _low(name, assumptions)
    assert consumer_values(low, model, "vector-clock") == consumer_values(low, model, "relational")


@pytest.mark.parametrize("model", ["ptx", "sc"])
@pytest.mark.parametrize("name,assumptions", MODEL_CASES)
def test_static_pruning_removes_no_execution(name, assumptions, model):
    """The reads-from candidates the static analysis drops are ones no execution uses (also when polls may hang)."""
    low = _low(name, assumptions)
    for liveness in (False, True):
        assert (consumer_values(low, model, prune=True, liveness=liveness)
                == consumer_values(low, model, prune=False, liveness=liveness)), liveness


def test_static_pruning_drops_candidates():
    low = _low("barrier", None)
    assert encode(low, "ptx", ctx=z3.Context()).pruned > 0


def test_weak_behaviour_is_visible_only_under_ptx():
    low = _low("mutant-simple-no-fence", None)
    assert consumer_values(low, "sc") < consumer_values(low, "ptx")


def stuck_reads(low: VerifyInstance, prune: bool) -> set[tuple[int, tuple[int, ...]]]:
    """Every (poll, values its read events see) with which the poll can be stuck, no thread required to finish."""
    ex = encode(low, "ptx", ctx=z3.Context(), prune=prune, liveness=True)
    s = ex.solver(300)
    found: set[tuple[int, tuple[int, ...]]] = set()
    for instr in low.instrs:
        if instr.id not in ex.stuck:
            continue
        terms = [ex.rval(e) for e in instr.events if e.is_read]
        s.push()
        s.add(ex.stuck[instr.id])
        while s.check() == z3.sat:
            m = s.model()
            vals = tuple(m.eval(t, model_completion=True).as_long() for t in terms)
            found.add((instr.id, vals))
            s.add(z3.Or([t != v for t, v in zip(terms, vals)]))
        s.pop()
    return found


@pytest.mark.parametrize("name,ranks,iterations,hangs", [("mutant-toggle-flag", 3, 2, True), ("ll", 2, 2, False),
                                                         ("atomic-counter", 2, 2, False),
                                                         ("mutant-atomic-counter-no-reset", 2, 2, False)])
def test_static_pruning_keeps_what_a_stuck_poll_reads(name, ranks, iterations, hangs):
    """A poll that may be stuck reads any candidate: its exit's forced synchronisation does not prune its own
    read (the lost toggle of mutant-toggle-flag is a hang only if rank 0's stuck poll may read the flag a peer
    already flipped back)."""
    low = lower_instance(load_protocol(name), "one-shot", Bounds(ranks=ranks, iterations=iterations))
    pruned = stuck_reads(low, prune=True)
    assert pruned == stuck_reads(low, prune=False)
    assert bool(pruned) == hangs


# -- guarded programs: a branch on a returned value, a cas that may not write ------------------------------------
_EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[1] / "examples" / "protocols"
#: 2 threads per rank: the block barriers are what the analysis still orders (with one thread it finds nothing)
_GUARDED = [("last_arriver_barrier.py", 2, 2, 2), ("last_arriver_barrier_late_reset.py", 2, 2, 2),
            ("signal_pad_cas.py", 2, 1, 1)]


def _guarded_low(file: str, ranks: int, iterations: int, threads: int) -> VerifyInstance:
    from collsim.ir.registry import load_protocol_file

    return lower_instance(load_protocol_file(str(_EXAMPLES / file)), "one-shot",
                          Bounds(ranks=ranks, iterations=iterations, threads=threads, lines=1))


@pytest.mark.parametrize("file,ranks,iterations,threads", _GUARDED)
def test_static_pruning_of_guarded_programs_removes_no_execution(file, ranks, iterations, threads):
    """Guarded events are maybe absent: what the analysis still drops no execution uses, finishing or stuck."""
    low = _guarded_low(file, ranks, iterations, threads)
    from collsim.verify.models.static import maybe_absent

    plain = encode(low, "ptx", ctx=z3.Context(), prune=False)
    assert any(maybe_absent(plain, e) for e in low.events)
    for liveness in (False, True):
        assert (consumer_values(low, "ptx", prune=True, liveness=liveness)
                == consumer_values(low, "ptx", prune=False, liveness=liveness)), liveness
    assert stuck_reads(low, prune=True) == stuck_reads(low, prune=False)


def test_static_pruning_drops_candidates_of_a_guarded_program_and_the_late_reset_is_still_caught():
    from collsim.verify.verifier import verify

    low = _guarded_low("last_arriver_barrier.py", 2, 2, 2)
    assert encode(low, "ptx", ctx=z3.Context(), liveness=True).pruned > 0
    r = verify(str(_EXAMPLES / "last_arriver_barrier_late_reset.py"), ranks=2, iterations=2, threads=1, lines=1,
               properties=["hang"], dependencies=False, use_cache=False)
    assert r.caught and r.properties["hang"].status == "violated"
