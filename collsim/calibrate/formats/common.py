"""Facts about nccl-tests shared by the text and JSON readers."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePath

from collsim.calibrate.measurements import DTYPE_SIZES, canonical_collective

__all__ = [
    "REDUCTION_OPS",
    "DATA_UNITS",
    "program_mentions",
    "collective_from_filename",
    "decode_nccl_version_code",
    "tolerance",
    "collective_candidates",
    "implied_time_unit",
]

#: Reduction operators nccl-tests and NCCL 1.x print.
REDUCTION_OPS = frozenset({"sum", "prod", "max", "min", "avg", "premulsum", "mulsum"})

#: Properties of each collective as nccl-tests prints it:
#: (reduces, rooted, size = count*typesize*nranks, busbw/algbw factor(n)).
_SHAPES: dict[str, tuple[bool, bool, bool, object]] = {
    "allreduce": (True, False, False, lambda n: 2 * (n - 1) / n),
    "reducescatter": (True, False, True, lambda n: (n - 1) / n),
    "reduce": (True, True, False, lambda n: 1.0),
    "broadcast": (False, True, False, lambda n: 1.0),
    "allgather": (False, False, True, lambda n: (n - 1) / n),
    "alltoall": (False, False, True, lambda n: (n - 1) / n),
    "sendrecv": (False, False, False, lambda n: 1.0),
    "gather": (False, True, True, lambda n: (n - 1) / n),
    "scatter": (False, True, True, lambda n: (n - 1) / n),
    "hypercube": (False, False, True, lambda n: (n - 1) / n),
}

_PROGRAM_PATTERNS = (
    re.compile(r"Collective test (?:starting|concluded):\s*(\S+)"),
    re.compile(r"\b([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b"),
    re.compile(r"\b([a-z][a-z0-9_]*?)_test\b"),
    re.compile(r"Test failure ([a-z_]+)\.cu:\d+"),
    re.compile(r"(?:^|\s)(?:-t|--test|--collective)[ =]([a-z_]+)\b"),
)


def program_mentions(text: str) -> list[str]:
    """Canonical collective names a line mentions (program names, ``-t NAME``)."""
    found: list[str] = []
    for pattern in _PROGRAM_PATTERNS:
        for match in pattern.finditer(text):
            name = canonical_collective(match.group(1))
            if name:
                found.append(name)
    return found


def collective_from_filename(path: str) -> str:
    """The collective a file name names (``…_all_gather_…`` -> ``allgather``), or ``""``."""
    stem = PurePath(path).name.lower()
    squashed = re.sub(r"[^a-z0-9]+", "_", stem)
    words = [w for w in squashed.split("_") if w]
    joined = "".join(words)
    # longest names first so reduce_scatter is not read as reduce
    for name in ("reducescatter", "alltoallv", "alltoall", "allreduce", "allgather", "broadcast",
                 "sendrecv", "hypercube"):
        if name in joined:
            return name
    for word in words:
        if word in ("reduce", "gather", "scatter", "bcast"):
            return canonical_collective(word)
    return ""


def decode_nccl_version_code(code: int) -> str:
    """``22907`` -> ``"2.29.7"``; ``2408`` -> ``"2.4.8"`` (NCCL_VERSION_CODE before 2.9)."""
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    if code >= 1000:
        return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"
    return str(code)


def tolerance(dtype: str, ranks: int | None, *, reduction: bool, nccl1: bool) -> float:
    """The max error nccl-tests (or NCCL 1.x tests) still accepts for one row."""
    if nccl1:
        if not reduction:
            return 0.0
        return {"float16": 5e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0.0)
    base = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0.0)
    scale = ranks - 1 if ranks and ranks > 1 else 1
    return base * scale


def _median(values: Sequence[float]) -> float | None:
    vals = sorted(v for v in values if v is not None and not math.isnan(v))
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def collective_candidates(rows: Iterable[dict], ranks: int | None, *, has_redop: bool,
                          has_root: bool, empty_redop: bool = False) -> set[str] | None:
    """Collectives consistent with a table's shape, or ``None`` when it tells nothing.

    Uses what nccl-tests prints: a reduction operator (``redop``), a root,
    whether ``size = count × typesize × nranks``, and ``busbw/algbw``.
    ``empty_redop``: the table has a redop column whose cells are blank
    (nccl-tests < 2.13 alltoall), as opposed to ``none``.
    """
    rows = list(rows)
    if not rows:
        return None
    reduces: bool | None = None
    if has_redop:
        ops = {r.get("redop") or "" for r in rows}
        reduces = any(op in REDUCTION_OPS for op in ops)
    elif has_root or rows:
        # old formats print redop only for reducing collectives
        reduces = False
    rooted = False
    if has_root:
        rooted = any((r.get("root") is not None and r.get("root") >= 0) for r in rows)
    gatherlike: bool | None = None
    factor: float | None = None
    if ranks and ranks > 1:
        ratios = []
        for r in rows:
            size, count, ts = r.get("size_bytes"), r.get("count"), DTYPE_SIZES.get(r.get("dtype") or "")
            if size and count and ts:
                ratios.append(size / (count * ts))
        if ratios:
            k = _median(ratios)
            if k is not None and abs(k - ranks) < 0.01 * ranks:
                gatherlike = True
            elif k is not None and abs(k - 1) < 0.01:
                gatherlike = False
        fs = []
        for r in rows:
            alg, bus = r.get("algbw_gbps"), r.get("busbw_gbps")
            if alg is None or bus is None or math.isnan(alg) or math.isnan(bus):
                alg, bus = r.get("algbw_gbps_inplace"), r.get("busbw_gbps_inplace")
            if alg is not None and bus is not None and not math.isnan(alg) and not math.isnan(bus) and alg >= 1.0:
                fs.append(bus / alg)
        factor = _median(fs)
    out = set()
    for name, (red, root, glike, fac) in _SHAPES.items():
        # nccl-tests < 2.13 print a redop column only for reductions and
        # alltoall, whose redop is printed empty
        if name == "alltoall" and not has_redop:
            continue
        if empty_redop and name != "alltoall":
            continue
        if reduces is not None and red != reduces:
            continue
        if root != rooted:
            continue
        if gatherlike is not None and glike != gatherlike:
            continue
        if factor is not None and ranks:
            expected = fac(ranks)  # type: ignore[operator]
            if abs(factor - expected) > 0.03 * max(expected, 0.1) + 0.01:
                continue
        out.add(name)
    if len(out) > 1:
        out.discard("hypercube")  # rare; never the only reason a table is ambiguous
    return out


#: (unit, factor): algbw / (size / time_us) for times printed in that unit.
DATA_UNITS: tuple[tuple[str, float], ...] = (("us", 1.0), ("ms", 1e-3), ("s", 1e-6), ("ns", 1e3))


def implied_time_unit(points: Iterable[tuple[float, float, float]]) -> tuple[str | None, float | None]:
    """Which time unit makes ``algbw = size / time`` hold for (size_bytes, time, algbw_gbps) points.

    Returns ``(unit, median ratio)``; ``unit`` is ``None`` when no unit fits
    (within a factor 1.6) or no point is usable (algbw below 0.1 GB/s is too
    coarsely printed to tell).
    """
    ratios = []
    for size, time, alg in points:
        if None in (size, time, alg):
            continue
        if any(isinstance(v, float) and math.isnan(v) for v in (size, time, alg)):
            continue
        if time <= 0 or size <= 0 or alg < 0.1:
            continue
        ratios.append(alg / (size / (time * 1e3)))
    med = _median(ratios)
    if med is None or med <= 0:
        return None, None
    for unit, ratio in DATA_UNITS:
        if abs(math.log(med / ratio)) < math.log(1.6):
            return unit, med
    return None, med
