"""Launcher prefixes in front of a line of nccl-tests output, and the output stream they name.

mpirun ``--tag-output`` (``[1,0]<stdout>:``), srun ``--label`` (``0:``),
``rank N:`` and PyTorch's ``[rank0]:``/``[default0]:``, pdsh (``host:``),
``kubectl logs --prefix`` (``[pod/NAME]``), docker compose (``service |``),
timestamps (ISO 8601, bracketed, or a bare time of day), Markdown quotes
(``>``), the indentation of a pasted block (before or after any of these)
and ANSI colour codes come off; what is left is the line nccl-tests printed.

Examples
--------
>>> split_prefixes("[1,3]<stdout>:#  size  count")
('#  size  count', 'rank3')
>>> split_prefixes("2024-05-01T10:00:00Z 0: 1024 256 float sum")
('1024 256 float sum', 'task0')
>>> split_prefixes("    [1,0]<stdout>:        1024   256  float")
('1024   256  float', 'rank0')
>>> split_prefixes("[2024-05-01 10:00:03] rank 2: # nThread 1")
('# nThread 1', 'rank2')
>>> split_prefixes("[rank1]:#       size")
('#       size', 'rank1')
"""
from __future__ import annotations

import re

__all__ = ["split_prefixes"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TAG_RE = re.compile(r"^\[(\d+),(\d+)\]<(?:stdout|stderr|stddiag)>:")
_TIMESTAMP_RE = re.compile(
    r"^(?:\[\s*)?(?:\d{4}[-/]\d{2}[-/]\d{2}[T ])?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"(?:\s*\])?(?:\s+|\s*[:|]\s*)")
# ``rank 3:``, ``rank3>``, and torchrun's ``[rank3]:`` / ``[default3]:`` (``--tee``, ``--log-dir``)
_RANK_RE = re.compile(r"^\[?(?:rank|default)\s*(\d+)\]?\s*[:>]\s?", re.IGNORECASE)
_POD_RE = re.compile(r"^\[pod/([^\]]*)\]\s?")
_COMPOSE_RE = re.compile(r"^([\w.-]+)\s+\|\s?")
_SRUN_RE = re.compile(r"^\s*(\d+):\s")
_PDSH_RE = re.compile(r"^([A-Za-z][\w.-]*):\s+(?=#|\d)")
_QUOTE_RE = re.compile(r"^>\s?")


def split_prefixes(raw: str) -> tuple[str, str]:
    """Remove launcher prefixes; return (text, stream key)."""
    text = _ANSI_RE.sub("", raw).replace("\r", "")
    stream = ""
    for _ in range(6):
        text = text.lstrip()  # the indentation of a pasted block, before or after a prefix
        m = _TIMESTAMP_RE.match(text)
        if m:
            text = text[m.end():]
            continue
        m = _TAG_RE.match(text)
        if m:
            stream = f"rank{m.group(2)}"
            text = text[m.end():]
            continue
        m = _RANK_RE.match(text)
        if m:
            stream = stream or f"rank{m.group(1)}"
            text = text[m.end():]
            continue
        m = _POD_RE.match(text)
        if m:
            stream = f"pod:{m.group(1)}"
            text = text[m.end():]
            continue
        m = _COMPOSE_RE.match(text)
        if m:
            stream = f"service:{m.group(1)}"
            text = text[m.end():]
            continue
        m = _QUOTE_RE.match(text)
        if m:
            text = text[m.end():]
            continue
        break
    m = _SRUN_RE.match(text)
    if m:
        stream = stream or f"task{m.group(1)}"
        text = text[m.end():]
    else:
        m = _PDSH_RE.match(text)
        if m and not text.lstrip().startswith("#"):
            stream = stream or f"host:{m.group(1)}"
            text = text[m.end():]
    return text.strip(), stream
