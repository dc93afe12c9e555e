"""Named hardware assumptions: properties a protocol needs beyond the PTX model.

The PTX ISA (§8.2.4) models a vector access as independent scalar element
accesses in unspecified order, so LL, LL128 and sentinel protocols are not
correct under the bare model. Each relies on the hardware delivering some
wider unit whole. A protocol must declare the assumptions it relies on; they
are never silent defaults. The verifier proves a protocol under its declared
assumptions and re-checks it without each one, reporting "depends on ...".

Each assumption is stated as an atomicity *granule*: aligned runs of
``granule_bytes`` bytes written by one write instruction of the kinds in
``writes`` (or, when ``across_lanes``, by the lanes of one line) are written
and read as one single-copy-atomic unit. The kinds are ``store`` (``st``),
``red`` (``red``/``atom`` on data), ``multimem.st`` and ``multimem.red``
(each copy's part of one multicast write: the copies themselves are never
joined, PTX says nothing of their order).

One assumption is of another kind, an *ordering* of the host CPU:
``host-tso`` (:data:`HOST_TSO`) states that a host proxy thread's own loads
and stores to pinned, device-mapped memory are ordered as x86-TSO orders
them (or stronger). It joins no writes; the verifier's lowering reads it
(:attr:`Assumption.kind` ``"host-ordering"``): with it, every load of a
proxy body is an acquire and every store a release at ``sys`` scope;
without it, they are relaxed at ``sys`` scope and only the fences the body
states order them (an Arm host, such as Grace, needs those barriers).
"""
from __future__ import annotations

from dataclasses import dataclass

from collsim.errors import ProtocolDefinitionError

__all__ = ["Assumption", "ASSUMPTIONS", "WRITE_KINDS", "KINDS", "HOST_TSO", "get_assumption",
           "store_is_one_access"]

#: The write instructions an assumption can join: unicast stores and data reductions, and the per-copy
#: writes of multimem stores and reductions.
WRITE_KINDS = ("store", "red", "multimem.st", "multimem.red")
#: What an assumption states: the atomicity of a write granule, or the order of the host CPU's own accesses.
KINDS = ("atomicity", "host-ordering")
#: The name of the host-ordering assumption (x86-TSO or stronger for the proxy thread's accesses).
HOST_TSO = "host-tso"


@dataclass(frozen=True)
class Assumption:
    """One named hardware assumption: which writes it makes atomic (see the module docstring)."""

    name: str
    granule_bytes: int
    across_lanes: bool
    statement: str
    source: str
    writes: tuple[str, ...] = ("store",)
    kind: str = "atomicity"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"assumption {self.name}: unknown kind {self.kind!r} (valid: {', '.join(KINDS)})")
        if self.kind != "atomicity" and (self.writes or self.granule_bytes):
            raise ValueError(f"assumption {self.name}: a {self.kind} assumption joins no writes into granules")
        unknown = set(self.writes) - set(WRITE_KINDS)
        if unknown:
            raise ValueError(f"assumption {self.name}: unknown write kind {sorted(unknown)[0]!r} "
                             f"(valid: {', '.join(WRITE_KINDS)})")

    def joins(self, write_kind: str) -> bool:
        """Whether this assumption joins the elements of a write instruction of ``write_kind``."""
        return write_kind in self.writes

    @property
    def is_granule(self) -> bool:
        """Whether this assumption joins elements into atomic granules (rather than ordering host accesses)."""
        return self.kind == "atomicity"


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
        Assumption(
            "multicast-store-16B-untorn",
            16,
            False,
            "an aligned 16-byte multimem.st lands whole in every rank's copy, so a 16-byte load of one "
            "copy that sees its last word sees all of it (the copies themselves still land in any order)",
            "NCCL contrib/custom_algos/allreduce twoshot_mc_poison (polls the .w word of float4 multicast "
            "stores); NVIDIA/nccl#1641 asks whether multimem.st.v4 is 16-byte atomic, with no answer; "
            "PTX ISA section 8.2.4 models a vector access as separate elements",
            writes=("multimem.st",),
        ),
        Assumption(
            "line-128B-reductions-ordered",
            128,
            True,
            "a warp's vector reductions into one 128-byte line (its data words and its count word, "
            "8 lanes x 16 B) become visible at the destination together or in address order, so a reader "
            "that sees a contributor's count increment sees that contributor's data",
            "inferred for the LL128-atomic AllReduce of arXiv 2607.16100 (abstract only): the LL128 "
            "line assumption (NVIDIA/nccl#786, #281) carried over to red.global.add; PTX ISA guarantees "
            "atomicity per scalar element of a vector red only",
            writes=("red",),
        ),
        Assumption(
            "multicast-line-128B-reductions-ordered",
            128,
            True,
            "a warp's multimem.red into one 128-byte line lands in every rank's copy with the line's "
            "data and count reductions visible together or in address order (per copy; copies in any order)",
            "inferred: the line-128B-reductions-ordered assumption for reductions the NVSwitch fans out; "
            "no public statement of multimem.red ordering exists (PTX ISA section 8.2.4)",
            writes=("multimem.red",),
        ),
        Assumption(
            HOST_TSO,
            0,
            False,
            "the host CPU orders a proxy thread's own loads and stores to pinned, device-mapped host memory as "
            "x86-TSO or stronger: in PTX-model terms every host load is an acquire and every host store a "
            "release at sys scope (a store may still pass a later load to another address); without it a host "
            "access is relaxed at sys scope and only the proxy body's fences order it, as on an Arm host",
            "Intel SDM vol. 3A section 8.2.2 (memory ordering in P6 and more recent processor families: loads "
            "are not reordered with other loads, stores not with older loads or stores); AMD APM vol. 2 "
            "section 7.2 (memory access ordering); Owens, Sarkar and Sewell, x86-TSO, TPHOLs 2009. Arm hosts "
            "(NVIDIA Grace, Neoverse V2) are weakly ordered (Arm ARM section B2.3): they need explicit "
            "barriers (dmb) or load-acquire/store-release instructions",
            writes=(),
            kind="host-ordering",
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


def store_is_one_access(store_bytes: int, assumptions: tuple[str, ...]) -> bool:
    """Whether one of ``assumptions`` makes a store instruction of ``store_bytes`` bytes a single-copy-atomic
    unit (a store granule at least that wide), so the instruction's element width does not matter to which
    values a reader of the whole instruction sees.

    >>> store_is_one_access(16, ("store-16B-untorn",)), store_is_one_access(16, ("vector-8B-pairs-untorn",))
    (True, False)
    """
    return any(get_assumption(name).joins("store") and get_assumption(name).granule_bytes >= store_bytes
               for name in assumptions)
