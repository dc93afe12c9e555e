"""A plain interleaving enumerator: the reference semantics of sequential consistency.

Programs are lists of threads in the litmus operation format (straight-line
code only): ``ld``, ``st``, ``rmw`` (add, sub, exch, cas), ``red``, ``fence``
and ``mov``. Every interleaving of the threads is run on one memory; the
result is the set of final states, each a sorted tuple of
``(name, value)`` with names ``"P0:r1"`` for registers and ``"x"`` for memory.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

State = tuple[tuple[str, int], ...]


def _value(v: Any, regs: dict[str, int]) -> int:
    if isinstance(v, int):
        return v
    return regs.get(v, 0)


def _step(op: dict[str, Any], regs: dict[str, int], mem: dict[str, int]) -> None:
    kind = op["op"]
    if kind == "ld":
        regs[op["reg"]] = mem.get(op["loc"], 0)
    elif kind == "st":
        mem[op["loc"]] = _value(op["val"], regs)
    elif kind in ("rmw", "red"):
        old = mem.get(op["loc"], 0)
        operand = _value(op["val"], regs)
        k = op["kind"]
        if k == "add":
            new = old + operand
        elif k == "sub":
            new = old - operand
        elif k == "exch":
            new = operand
        elif k == "cas":
            new = operand if old == _value(op["cmp"], regs) else old
        else:
            raise ValueError(f"unsupported rmw kind {k}")
        mem[op["loc"]] = new
        if kind == "rmw":
            regs[op["reg"]] = old
    elif kind == "mov":
        regs[op["reg"]] = _value(op["val"], regs)
    elif kind == "fence":
        pass
    else:
        raise ValueError(f"unsupported op {kind}")


def final_states(threads: list[list[dict[str, Any]]], init: dict[str, int],
                 names: list[str] | None = None) -> set[State]:
    """All final states of all interleavings.

    ``names`` are the thread names (default ``P0, P1, ...``). Registers that
    no operation writes are left out; every location in ``init`` or used by an
    operation is reported.
    """
    names = names or [f"P{i}" for i in range(len(threads))]
    locs = sorted(set(init) | {op["loc"] for t in threads for op in t if "loc" in op})
    n = len(threads)

    @lru_cache(maxsize=None)
    def explore(pcs: tuple[int, ...], regs_t: tuple[tuple[tuple[str, int], ...], ...],
                mem_t: tuple[tuple[str, int], ...]) -> frozenset[State]:
        out: set[State] = set()
        progressed = False
        for t in range(n):
            if pcs[t] >= len(threads[t]):
                continue
            progressed = True
            regs = [dict(r) for r in regs_t]
            mem = dict(mem_t)
            _step(threads[t][pcs[t]], regs[t], mem)
            new_pcs = pcs[:t] + (pcs[t] + 1,) + pcs[t + 1:]
            out |= explore(new_pcs, tuple(tuple(sorted(r.items())) for r in regs),
                           tuple(sorted(mem.items())))
        if not progressed:
            items = [(f"{names[t]}:{k}", v) for t in range(n) for k, v in regs_t[t]]
            items += list(mem_t)
            out.add(tuple(sorted(items)))
        return frozenset(out)

    start_mem = tuple(sorted((loc, init.get(loc, 0)) for loc in locs))
    return set(explore(tuple(0 for _ in threads), tuple(() for _ in threads), start_mem))


def written_registers(threads: Iterable[list[dict[str, Any]]], names: list[str] | None = None) -> list[str]:
    """``"P0:r1"`` names of the registers some operation writes."""
    threads = list(threads)
    names = names or [f"P{i}" for i in range(len(threads))]
    out = []
    for t, ops in enumerate(threads):
        for op in ops:
            if op["op"] in ("ld", "rmw", "mov") and f"{names[t]}:{op['reg']}" not in out:
                out.append(f"{names[t]}:{op['reg']}")
    return out
