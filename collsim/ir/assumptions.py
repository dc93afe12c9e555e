"""Named hardware assumptions: properties a protocol needs beyond the PTX model.

The PTX ISA (§8.2.4) models a vector access as independent scalar element
accesses in unspecified order, so LL, LL128 and sentinel protocols are not
correct under the bare model. Each relies on the hardware delivering some
wider unit whole. A protocol must declare the assumptions it relies on; they
are never silent defaults. The verifier proves a protocol under its declared
assumptions and re-checks it without each one, reporting "depends on ...".

Each assumption is stated as an atomicity *granule*: aligned runs of
``granule_bytes`` bytes written by one store instruction (or, when
``across_lanes``, by the lanes of one line) are written and read as one
single-copy-atomic unit.
"""
from __future__ import annotations

from dataclasses import dataclass

from collsim.errors import ProtocolDefinitionError

__all__ = ["Assumption", "ASSUMPTIONS", "get_assumption"]


@dataclass(frozen=True)
class Assumption:
    name: str
    granule_bytes: int
    across_lanes: bool
    statement: str
    source: str


ASSUMPTIONS: dict[str, Assumption] = {
    a.name: a
    for a in (
        Assumption(
            "vector-8B-pairs-untorn",
            8,
            False,
            "each aligned 8-byte half of a vector store (e.g. 4-byte data + 4-byte flag) "
            "is written and read whole",
            "NCCL src/include/device.h comment on ncclLLFifoLine; maintainer statements "
            "in NVIDIA/nccl#281 and #824 (8-byte write atomicity)",
        ),
        Assumption(
            "store-16B-untorn",
            16,
            False,
            "an aligned 16-byte vector store arrives whole over NVLink, so seeing its last "
            "word means seeing all of it",
            "NCCL contrib/custom_algos/allreduce README (float4 stores as single 128-bit "
            "NVLink transactions); empirical, not a PTX guarantee",
        ),
        Assumption(
            "line-128B-ordered",
            128,
            True,
            "a warp's 128-byte line (8 lanes x 16 B) becomes visible whole and in order, "
            "so seeing its flag word means seeing its data",
            "NVIDIA/nccl#786 and #281 (sjeaugey): LL128 relies on 128-byte stores being "
            "seen in order; NCCL enables LL128 only on verified platforms",
        ),
    )
}


def get_assumption(name: str) -> Assumption:
    """Look up an assumption by name.

    >>> get_assumption("store-16B-untorn").granule_bytes
    16
    """
    try:
        return ASSUMPTIONS[name]
    except KeyError:
        raise ProtocolDefinitionError(
            f"unknown hardware assumption {name!r}", field="assumptions", choices=sorted(ASSUMPTIONS)
        ) from None
