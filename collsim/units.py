"""Sizes, size ranges and rank ranges as people write them.

Byte sizes accept an optional unit. IEC units (``KiB``, ``MiB``, ``GiB``,
``TiB``) and the one-letter forms ``K``, ``M``, ``G``, ``T`` (as nccl-tests'
``-b``/``-e`` flags read them) are powers of 1024; SI units (``KB``, ``MB``,
``GB``, ``TB``) are powers of 1000. Units are case-insensitive. A size must
come to a positive whole number of bytes.

Ranges are written ``START..END`` with an optional step: ``xF`` multiplies by
``F`` (geometric), ``+S`` adds ``S`` (arithmetic). ``END`` is included only when
the progression reaches it exactly: ``2..72 x2`` stops at 64, so write
``["2..72 x2", 72]`` to add 72. Size ranges without a step double
(``x2``); integer ranges without a step count up by one.

Every function raises :class:`collsim.errors.InputError` with a one-line
message on bad input; callers attach the file, line and field.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from collsim.errors import InputError

__all__ = [
    "UNITS",
    "parse_size",
    "parse_sizes",
    "parse_size_range",
    "parse_ranks",
    "parse_int_range",
    "format_size",
]

#: Multiplier of every accepted unit, keyed by its lower-case spelling.
UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tib": 1024**4,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}

_UNIT_NAMES = "B, KiB, MiB, GiB, TiB (1024-based), KB, MB, GB, TB (1000-based)"
_SIZE_RE = re.compile(r"^\s*([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)(?:e([+-]?\d+))?\s*([a-zA-Z]*)\s*$")
_RANGE_RE = re.compile(r"^\s*(?P<start>[^\s.][^\s]*?)\s*\.\.\s*(?P<end>[^\sx*+]+?)\s*(?:(?P<kind>[x*+])\s*(?P<step>\S+))?\s*$")

#: Largest-first units :func:`format_size` chooses from.
_IEC = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))
_SI = (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("KB", 1000))


def parse_size(value: int | str) -> int:
    """Return the number of bytes ``value`` stands for.

    Parameters
    ----------
    value : int or str
        A positive integer, or a number with an optional unit such as
        ``"8"``, ``"8B"``, ``"4KiB"``, ``"4KB"``, ``"1.5MiB"``.

    Returns
    -------
    int
        A positive whole number of bytes.

    Raises
    ------
    InputError
        For zero, negative or fractional byte counts and unknown units.

    Examples
    --------
    >>> parse_size("8"), parse_size("8B"), parse_size("4KiB"), parse_size("4KB")
    (8, 8, 4096, 4000)
    >>> parse_size("1.5MiB")
    1572864
    >>> parse_size("64M")
    67108864
    >>> parse_size("0")
    Traceback (most recent call last):
    ...
    collsim.errors.InputError: size must be a positive number of bytes, got '0'
    """
    if isinstance(value, bool):
        raise InputError(f"expected a size in bytes, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise InputError(f"size must be a positive number of bytes, got {value}")
        return value
    if isinstance(value, float):
        if not value.is_integer() or value <= 0:
            raise InputError(f"size must be a positive whole number of bytes, got {value!r}")
        return int(value)
    if not isinstance(value, str):
        raise InputError(f"expected a size such as 8, 8B, 4KiB or 1MB, got {value!r}")
    match = _SIZE_RE.match(value)
    if not match:
        raise InputError(f"cannot read size {value!r}; write a number with an optional unit, e.g. 8B, 4KiB, 1MB")
    number, exponent, unit = match.groups()
    mult = UNITS.get(unit.lower())
    if mult is None:
        raise InputError(f"unknown size unit {unit!r} in {value!r} (valid: {_UNIT_NAMES})")
    try:
        amount = Decimal(number) * (Decimal(10) ** int(exponent or 0)) * mult
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise InputError(f"cannot read size {value!r}") from None
    if amount <= 0:
        raise InputError(f"size must be a positive number of bytes, got {value!r}")
    if amount != amount.to_integral_value():
        raise InputError(f"size must be a whole number of bytes, got {value!r} = {amount.normalize()} bytes")
    return int(amount)


def _parse_step(kind: str, step: str, text: str, *, sizes: bool) -> tuple[str, int | float]:
    if kind in ("x", "*"):
        try:
            factor = float(step)
        except ValueError:
            raise InputError(f"cannot read factor {step!r} in range {text!r}") from None
        if not factor > 1:
            raise InputError(f"range factor must be greater than 1, got {step!r} in {text!r}")
        return "x", factor
    inc = parse_size(step) if sizes else _parse_int(step, text)
    if inc <= 0:
        raise InputError(f"range step must be positive, got {step!r} in {text!r}")
    return "+", inc


def _expand(start: int, end: int, kind: str, step: int | float, text: str) -> list[int]:
    if end < start:
        raise InputError(f"range {text!r} ends before it starts")
    out: list[int] = []
    value: float = start
    while value <= end:
        out.append(int(value))
        if len(out) > 100_000:
            raise InputError(f"range {text!r} has more than 100000 values")
        value = value * step if kind == "x" else value + step
        if kind == "x" and int(value) == out[-1]:
            value = out[-1] + 1  # factors close to 1 on small numbers
    return out


def parse_size_range(text: str) -> list[int]:
    """Expand ``START..END xF`` or ``START..END +STEP`` into byte sizes.

    Without a step the range doubles (``x2``), as nccl-tests' ``-f 2`` does.

    Examples
    --------
    >>> parse_size_range("8B..64B x2")
    [8, 16, 32, 64]
    >>> parse_size_range("1KiB..4KiB +1KiB")
    [1024, 2048, 3072, 4096]
    >>> parse_size_range("8..64")
    [8, 16, 32, 64]
    >>> len(parse_size_range("8B..64MiB x2"))
    24
    """
    match = _RANGE_RE.match(text)
    if not match:
        raise InputError(f"cannot read range {text!r}; write e.g. '8B..64MiB x2' or '8B..1KiB +8B'")
    start = parse_size(match["start"])
    end = parse_size(match["end"])
    kind, step = ("x", 2) if match["kind"] is None else _parse_step(match["kind"], match["step"], text, sizes=True)
    return _expand(start, end, kind, step, text)


def parse_sizes(value: int | str | Iterable[int | str]) -> list[int]:
    """Return the sizes a scenario's ``sizes:`` field lists, in order, without repeats.

    ``value`` is one size, one range, or a list mixing both.

    Examples
    --------
    >>> parse_sizes("8B..32B")
    [8, 16, 32]
    >>> parse_sizes([8, "1KiB", "16..32", 8])
    [8, 1024, 16, 32]
    """
    items = [value] if isinstance(value, (str, int, float)) else list(value)
    if not items:
        raise InputError("no sizes given")
    out: list[int] = []
    for item in items:
        if isinstance(item, str) and ".." in item:
            out.extend(parse_size_range(item))
        else:
            out.append(parse_size(item))
    return list(dict.fromkeys(out))


def _parse_int(text: str, whole: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise InputError(f"expected a whole number, got {text.strip()!r} in {whole!r}") from None


def parse_int_range(text: str) -> list[int]:
    """Expand an integer range ``A..B`` (every integer), ``A..B xF`` or ``A..B +S``.

    Examples
    --------
    >>> parse_int_range("2..8")
    [2, 3, 4, 5, 6, 7, 8]
    >>> parse_int_range("2..72 x2")
    [2, 4, 8, 16, 32, 64]
    >>> parse_int_range("8..32 +8")
    [8, 16, 24, 32]
    """
    match = _RANGE_RE.match(text)
    if not match:
        raise InputError(f"cannot read range {text!r}; write e.g. '2..8', '2..72 x2' or '8..64 +8'")
    start = _parse_int(match["start"], text)
    end = _parse_int(match["end"], text)
    kind, step = ("+", 1) if match["kind"] is None else _parse_step(match["kind"], match["step"], text, sizes=False)
    return _expand(start, end, kind, step, text)


def parse_ranks(value: int | str | Iterable[int | str]) -> list[int]:
    """Return the rank counts a ``ranks:`` field lists, in order, without repeats.

    ``value`` is a count, a range string, a comma-separated string or a list
    mixing counts and ranges. Every count must be a positive integer.

    Examples
    --------
    >>> parse_ranks(8)
    [8]
    >>> parse_ranks("2..4")
    [2, 3, 4]
    >>> parse_ranks(["2..72 x2", 72])
    [2, 4, 8, 16, 32, 64, 72]
    >>> parse_ranks("2,4,8")
    [2, 4, 8]
    """
    if isinstance(value, str) and ".." not in value and "," in value:
        value = [part for part in value.split(",") if part.strip()]
    items = [value] if isinstance(value, (str, int, float)) else list(value)
    if not items:
        raise InputError("no rank counts given")
    out: list[int] = []
    for item in items:
        if isinstance(item, bool):
            raise InputError(f"expected a rank count, got {item!r}")
        if isinstance(item, str) and ".." in item:
            out.extend(parse_int_range(item))
        elif isinstance(item, int):
            out.append(item)
        elif isinstance(item, float) and item.is_integer():
            out.append(int(item))
        elif isinstance(item, str):
            out.append(_parse_int(item, item))
        else:
            raise InputError(f"expected a whole number of ranks, got {item!r}")
    for n in out:
        if n <= 0:
            raise InputError(f"rank count must be positive, got {n}")
    return list(dict.fromkeys(out))


def format_size(nbytes: int) -> str:
    """Write a byte count the short way, exactly (``parse_size`` reads it back).

    The largest 1024-based unit that divides the count is used; a count that
    only a 1000-based unit divides uses that unit; anything else stays in bytes.

    Examples
    --------
    >>> format_size(8), format_size(4096), format_size(64 * 1024**2)
    ('8B', '4KiB', '64MiB')
    >>> format_size(1536), format_size(3000), format_size(1000001)
    ('1536B', '3KB', '1000001B')
    >>> parse_size(format_size(123456789)) == 123456789
    True
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise InputError(f"expected a non-negative whole number of bytes, got {nbytes!r}")
    best = f"{nbytes}B"
    for table in (_IEC, _SI):
        for unit, mult in table:
            if nbytes >= mult and nbytes % mult == 0:
                text = f"{nbytes // mult}{unit}"
                if len(text) < len(best):
                    best = text
                break
    return best
