"""What the report says of each protocol in the results: its scratch space and what it relies on.

Read off each protocol's IR: the symmetric buffers its program declares
(:class:`~collsim.ir.buffers.Buffer`, sized by ``NRANKS`` and ``MSG``), its
declared hardware assumptions and data domain, and what it needs of the
switches (:attr:`~collsim.ir.program.Program.fabric_needs`). A protocol the
registry does not know (a user file by path) is listed without them.

>>> import pandas as pd
>>> frame = pd.DataFrame({"protocol": ["ll128-atomic"], "algorithm": ["one-shot"], "ranks": [8],
...                       "size_bytes": [65536]})
>>> row = protocol_rows(frame)[0]
>>> row["scratch"], row["assumptions"]
('136.8 KiB', ['line-128B-reductions-ordered'])
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from collsim.algorithms import generate
from collsim.errors import CollsimError
from collsim.ir.registry import load_protocol
from collsim.units import format_size

__all__ = ["protocol_rows", "scratch_bytes"]


def scratch_bytes(program: Any, nranks: int, size_bytes: int) -> int:
    """Bytes of symmetric memory one rank allocates for ``program`` at ``nranks`` ranks and ``size_bytes`` per rank."""
    env = {"NRANKS": nranks, "MSG": size_bytes}
    return sum(buf.total_bytes(env) for buf in program.buffers)


def _bytes_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def protocol_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per (protocol, algorithm) of ``frame``: scratch per rank at its largest rank count and size,
    the buffers bound to multicast objects, assumptions, data domain and switch needs."""
    rows = []
    pairs = frame.groupby(["protocol", "algorithm"], sort=True)
    for (name, algorithm), group in pairs:
        ranks, size = int(group["ranks"].max()), int(group["size_bytes"].max())
        row: dict[str, Any] = {"protocol": name, "algorithm": algorithm, "ranks": ranks,
                               "size": format_size(size), "scratch": "—", "multicast": [], "assumptions": [],
                               "domain": "", "needs": []}
        try:
            protocol = load_protocol(str(name))
            program = generate(protocol, str(algorithm))
        except CollsimError:
            rows.append(row)
            continue
        row["scratch"] = _bytes_text(scratch_bytes(program, ranks, size))
        row["multicast"] = [buf.name for buf in program.buffers if buf.multicast]
        row["assumptions"] = list(protocol.assumptions)
        row["domain"] = protocol.data_domain.statement if protocol.data_domain is not None else ""
        row["needs"] = sorted(program.fabric_needs)
        rows.append(row)
    return rows
