"""One execution decoded from a z3 model, for printing and inspection."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Witness", "linearise"]


@dataclass
class Witness:
    """One execution, decoded from a z3 model.

    Attributes
    ----------
    executed : list of str
        Names of the events that ran.
    rf : dict read name -> write name
        Which write each executed read read from (``init:<loc>`` for the initial value).
    values : dict name -> int
        Value returned by each executed read.
    written : dict name -> int
        Value written by each executed write (RMWs that wrote).
    co : dict loc -> list of (name, name)
        Coherence-order pairs.
    co_order : dict loc -> list of str
        A linearisation of coherence order (init first).
    final : dict loc -> int
        Final value of each location.
    extra : dict name -> int
        Values of the caller's terms (registers, conditions), if asked.
    """

    executed: list[str]
    rf: dict[str, str]
    values: dict[str, int]
    written: dict[str, int]
    co: dict[str, list[tuple[str, str]]]
    co_order: dict[str, list[str]]
    final: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[str]] = field(default_factory=dict)

    def format(self) -> str:
        """Readable multi-line description of the execution."""
        lines = []
        for thread, names in self.threads.items():
            lines.append(f"thread {thread}:")
            for name in names:
                if name not in self.executed:
                    continue
                text = self.labels.get(name, name)
                parts = []
                if name in self.values:
                    parts.append(f"reads {self.values[name]} from {self.rf.get(name, '?')}")
                if name in self.written:
                    parts.append(f"writes {self.written[name]}")
                tail = ("  -> " + "; ".join(parts)) if parts else ""
                lines.append(f"  {name}: {text}{tail}")
        for loc, order in self.co_order.items():
            lines.append(f"co {loc}: " + " < ".join(order))
        if self.final:
            lines.append("final: " + ", ".join(f"{k}={v}" for k, v in self.final.items()))
        if self.extra:
            lines.append("values: " + ", ".join(f"{k}={v}" for k, v in self.extra.items()))
        return "\n".join(lines)


def linearise(nodes: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    """A topological order of ``nodes`` under ``pairs`` (stable, first node first)."""
    succ: dict[str, set[str]] = {n: set() for n in nodes}
    indeg = {n: 0 for n in nodes}
    for a, b in pairs:
        if a in succ and b in indeg and b not in succ[a]:
            succ[a].add(b)
            indeg[b] += 1
    order = []
    ready = [n for n in nodes if indeg[n] == 0]
    while ready:
        n = ready.pop(0)
        order.append(n)
        for s in sorted(succ[n], key=nodes.index):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    order += [n for n in nodes if n not in order]
    return order
