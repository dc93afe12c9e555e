"""What the PTX ISA allows a ``multimem`` instruction to be: semantics, reduction operators, types, vectors.

NVLink SHARP (NVLS) reaches every GPU's copy of a buffer bound to a
multicast object through one *multimem* address; three instructions use it
(PTX ISA 8.1, sm_90 and newer; "Data Movement and Conversion Instructions:
multimem.ld_reduce, multimem.st, multimem.red")::

    multimem.ld_reduce{.ldsem}{.scope}.global.op{.acc_prec}{.vec}.type  d, [a]
    multimem.st{.stsem}{.scope}.global{.vec}.type                       [a], b
    multimem.red{.redsem}{.scope}.global.op{.vec}.type                  [a], b

* ``.ldsem`` is ``.relaxed`` or ``.acquire``, ``.stsem`` and ``.redsem``
  ``.relaxed`` or ``.release``; without one, ``ld_reduce`` and ``st`` are
  weak and ``red`` is relaxed at ``.sys`` scope.
* Integer types ``.b32 .b64 .u32 .u64 .s32 .s64`` take no vector qualifier;
  ``.add`` works on ``.u32 .s32 .u64``, ``.min``/``.max`` on the unsigned
  and signed types, ``.and .or .xor`` on the bit types.
* Floating-point types (``.f16 .f16x2 .bf16 .bf16x2 .f32 .f64``, and the fp8
  types on sm_100a) take ``.v2 .v4 .v8`` when the vector is 32, 64 or 128
  bits in total; ``.f64`` takes none. ``ld_reduce`` reduces floats with
  ``.add .min .max``, ``red`` only with ``.add``. ``.acc::f32`` widens the
  accumulation of f16/bf16 loads (``.acc::f16`` that of fp8).

These rules are checked where an operation is built
(:mod:`collsim.ir.ops`) and where it is printed (:mod:`collsim.emit`), from
this one table.

>>> data_type("bfloat16"), vector_qualifier("bf16x2", 16), vector_qualifier("u32", 4)
('bf16x2', '.v4', '')
>>> qualifiers("ld_reduce", "add", "bf16x2", 16)
'.add.acc::f32.v4.bf16x2'
>>> qualifiers("red", "add", "f32", 16), qualifiers("st", None, "u64", 8)
('.add.v4.f32', '.u64')
>>> qualifiers("red", "min", "f32", 4)
Traceback (most recent call last):
...
ValueError: multimem.red reduces f32 with add only, not min
"""
from __future__ import annotations

from collsim.ir.types import Sem

__all__ = [
    "INSTRUCTIONS",
    "SEMANTICS",
    "FLOAT_BITS",
    "INTEGER_TYPES",
    "INTEGER_OPS",
    "RED_FLOAT_TYPES",
    "MIN_SM",
    "data_type",
    "counter_type",
    "vector_qualifier",
    "elements_per_instruction",
    "qualifiers",
    "check_semantics",
    "check_operator",
]

#: The three instructions, as collsim names them (the part after ``multimem.``).
INSTRUCTIONS = ("ld_reduce", "st", "red")
#: The semantics each instruction may carry (weak = no qualifier).
SEMANTICS: dict[str, tuple[Sem, ...]] = {
    "ld_reduce": (Sem.WEAK, Sem.RELAXED, Sem.ACQUIRE),
    "st": (Sem.WEAK, Sem.RELAXED, Sem.RELEASE),
    "red": (Sem.RELAXED, Sem.RELEASE),
}
#: Bits of each floating-point type (fp8 types need sm_100a and are not emitted by collsim).
FLOAT_BITS: dict[str, int] = {"f16": 16, "f16x2": 32, "bf16": 16, "bf16x2": 32, "f32": 32, "f64": 64,
                              "e5m2": 8, "e5m2x2": 16, "e5m2x4": 32, "e4m3": 8, "e4m3x2": 16, "e4m3x4": 32}
#: Floating-point types ``multimem.red`` accepts.
RED_FLOAT_TYPES = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64")
#: Integer types (no vector forms).
INTEGER_TYPES = ("b32", "b64", "u32", "u64", "s32", "s64")
#: The integer types each operator takes.
INTEGER_OPS: dict[str, tuple[str, ...]] = {
    "add": ("u32", "s32", "u64"),
    "min": ("u32", "s32", "u64", "s64"),
    "max": ("u32", "s32", "u64", "s64"),
    "and": ("b32", "b64"),
    "or": ("b32", "b64"),
    "xor": ("b32", "b64"),
}
#: The first architecture with multimem instructions and multicast objects.
MIN_SM = 90

#: collsim dtype (nccl-tests' names) -> the PTX type one 32-bit word of data is reduced as.
_DATA_TYPES = {"float32": "f32", "bfloat16": "bf16x2", "float16": "f16x2", "int32": "u32", "uint32": "u32"}
#: The widened accumulation ``ld_reduce`` uses for a type (f16/bf16 sum in fp32, as NCCL and PyTorch do).
_ACCUMULATION = {"bf16x2": ".acc::f32", "f16x2": ".acc::f32", "bf16": ".acc::f32", "f16": ".acc::f32"}


def data_type(dtype: str) -> str:
    """The PTX type a 32-bit word of ``dtype`` data is reduced as (``bfloat16`` words are ``bf16x2`` pairs)."""
    try:
        return _DATA_TYPES[dtype]
    except KeyError:
        raise ValueError(f"multimem data of dtype {dtype!r} is not emitted (valid: {', '.join(_DATA_TYPES)})") from None


def counter_type(word_bytes: int) -> str:
    """The PTX type of a counter or flag word: ``u32`` or ``u64``."""
    if word_bytes not in (4, 8):
        raise ValueError(f"a counter word is 4 or 8 bytes, not {word_bytes}")
    return f"u{8 * word_bytes}"


def vector_qualifier(ptx_type: str, vector_bytes: int) -> str:
    """The ``.vN`` qualifier of one instruction moving ``vector_bytes`` of ``ptx_type`` ("" for one element).

    Integer types have no vector form: an integer lane is one instruction per element (see
    :func:`elements_per_instruction`).
    """
    if ptx_type in INTEGER_TYPES:
        return ""
    bits = FLOAT_BITS.get(ptx_type)
    if bits is None:
        raise ValueError(f"unknown multimem type {ptx_type!r}")
    total = 8 * vector_bytes
    if total == bits:
        return ""
    if ptx_type == "f64":
        raise ValueError("multimem f64 takes no vector qualifier")
    if total not in (32, 64, 128) or total % bits or total // bits not in (2, 4, 8):
        raise ValueError(f"a multimem vector of {ptx_type} is 32, 64 or 128 bits in total, not {total}")
    return f".v{total // bits}"


def elements_per_instruction(ptx_type: str, vector_bytes: int) -> int:
    """How many instructions of ``ptx_type`` cover ``vector_bytes``: 1 for floats, one per element for integers."""
    if ptx_type in INTEGER_TYPES:
        return max(1, vector_bytes // (int(ptx_type[1:]) // 8))
    return 1


def check_operator(instruction: str, op: str, ptx_type: str | None = None) -> None:
    """Raise ``ValueError`` unless ``instruction`` reduces ``ptx_type`` (any type when None) with ``op``."""
    if instruction == "st":
        if op is not None:
            raise ValueError("multimem.st takes no reduction operator")
        return
    if ptx_type is None:
        if op not in INTEGER_OPS:
            raise ValueError(f"multimem.{instruction} has no operator {op!r} (valid: {', '.join(INTEGER_OPS)})")
        return
    if ptx_type in INTEGER_TYPES:
        if ptx_type not in INTEGER_OPS.get(op, ()):
            valid = [name for name, types in INTEGER_OPS.items() if ptx_type in types]
            raise ValueError(f"multimem.{instruction} reduces {ptx_type} with {', '.join(valid)}, not {op}")
        return
    if instruction == "red":
        if ptx_type not in RED_FLOAT_TYPES:
            raise ValueError(f"multimem.red does not take {ptx_type} (valid: {', '.join(RED_FLOAT_TYPES)})")
        if op != "add":
            raise ValueError(f"multimem.red reduces {ptx_type} with add only, not {op}")
        return
    if op not in ("add", "min", "max"):
        raise ValueError(f"multimem.ld_reduce reduces {ptx_type} with add, min or max, not {op}")


def qualifiers(instruction: str, op: str | None, ptx_type: str, vector_bytes: int) -> str:
    """The qualifiers after ``.global`` of one instruction: operator, accumulation, vector, type."""
    if instruction not in INSTRUCTIONS:
        raise ValueError(f"unknown multimem instruction {instruction!r} (valid: {', '.join(INSTRUCTIONS)})")
    check_operator(instruction, op, ptx_type)
    per = vector_bytes // elements_per_instruction(ptx_type, vector_bytes)
    vec = vector_qualifier(ptx_type, per)
    acc = _ACCUMULATION.get(ptx_type, "") if instruction == "ld_reduce" and op == "add" else ""
    return f"{'.' + op if op else ''}{acc}{vec}.{ptx_type}"


def check_semantics(instruction: str, sem: Sem) -> None:
    """Raise ``ValueError`` unless ``instruction`` may carry ``sem``."""
    allowed = SEMANTICS[instruction]
    if sem not in allowed:
        raise ValueError(f"multimem.{instruction} cannot be {sem.value} (PTX allows "
                         f"{', '.join(s.value for s in allowed)})")

