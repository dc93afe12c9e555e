"""Synchronization routines built from ordinary IR operations.

A barrier is flag stores to peers plus polls, nothing more: keeping it in
these terms lets the verifier see inside it, so a broken barrier is a mutant
like any other, and lets the simulator cost its parts.
"""
from __future__ import annotations

from collsim.ir.buffers import Buffer
from collsim.ir.expr import NCTAS, NRANKS, RANK, Expr
from collsim.ir.layout import counter_layout
from collsim.ir.ops import AtLeast, Atomic, MulticastRef, MultimemRed, PollUntil, Ref, Store, SyncGroup
from collsim.ir.program import ProgramBuilder
from collsim.ir.protocol import PEER, PEER_INDEX
from collsim.ir.types import Issuer, RmwOp, Scope, Sem

__all__ = ["inbox_buffer", "barrier", "credit_buffer", "wait_credit", "return_credit", "multicast_counter_buffer",
           "multicast_barrier", "grid_counter_buffer", "grid_barrier"]


def inbox_buffer(name: str = "inbox") -> Buffer:
    """One 8-byte flag per (receiver, sender) pair: ``inbox[region=sender]`` in the receiver's memory."""
    return Buffer(name, counter_layout(8), depth=1, regions=NRANKS, lines=1, role="flags")


def barrier(
    b: ProgramBuilder,
    epoch: Expr,
    *,
    inbox: str = "inbox",
    arrive_sem: Sem = Sem.RELEASE,
    wait_sem: Sem = Sem.ACQUIRE,
    label: str = "barrier",
) -> None:
    """All-to-all barrier: store ``epoch`` into every peer's inbox, then poll every own inbox until it reaches it.

    Epochs only grow, and the wait is "at least", not "equal": a peer that
    passed this barrier may already have arrived at the next one and
    overwritten its flag with a larger epoch before this rank looked
    (NCCL's LSA barrier compares the same way, wrap-safe). The group syncs first, so every thread's earlier writes precede the
    leader's release, and again after, so no thread runs ahead of the
    leader's acquire (PyTorch symmetric memory's "pattern 1").
    """
    b.emit(SyncGroup(label=f"{label}.sync_before"))
    with b.loop(PEER_INDEX.name, NRANKS - 1):
        b.emit(
            Store(Ref(inbox, PEER, region=RANK), None, arrive_sem, Scope.SYS, flag=epoch,
                  issuer=Issuer.LEADER, label=f"{label}.arrive")
        )
    with b.loop(PEER_INDEX.name, NRANKS - 1):
        b.emit(
            PollUntil(Ref(inbox, RANK, region=PEER), AtLeast(epoch), wait_sem, Scope.SYS,
                      issuer=Issuer.LEADER, label=f"{label}.wait")
        )
    b.emit(SyncGroup(label=f"{label}.sync_after"))


def credit_buffer(name: str = "credits") -> Buffer:
    """Consumption counters: ``credits[region=receiver]`` in the sender's memory holds the receiver's last consumed ``seq + 1``."""
    return Buffer(name, counter_layout(8), depth=1, regions=NRANKS, lines=1, role="credits")


def wait_credit(
    b: ProgramBuilder, to: Expr, seq: Expr, depth: int, *, slack: int = 0, credits: str = "credits",
    sem: Sem = Sem.ACQUIRE,
) -> None:
    """Before writing slot ``seq % depth`` of ``to``, wait until ``to`` consumed ``seq - depth``.

    ``slack`` > 0 lets the sender run that many sequence numbers further
    ahead (a deliberate off-by-one for mutants).
    """
    b.emit(
        PollUntil(Ref(credits, RANK, region=to), AtLeast(seq + 1 - depth - slack), sem, Scope.SYS,
                  issuer=Issuer.LEADER, label="credit.wait")
    )
    b.emit(SyncGroup(label="credit.sync"))


def return_credit(b: ProgramBuilder, frm: Expr, seq: Expr, *, credits: str = "credits",
                  sem: Sem = Sem.RELEASE) -> None:
    """Tell ``frm`` that ``seq`` is consumed, after every thread finished reading it."""
    b.emit(SyncGroup(label="credit.sync_consumed"))
    b.emit(Store(Ref(credits, frm, region=RANK), None, sem, Scope.SYS, flag=seq + 1,
                 issuer=Issuer.LEADER, label="credit.return"))


def multicast_counter_buffer(name: str = "mc_arrivals", counters: Expr | int = 1) -> Buffer:
    """``counters`` 32-bit arrival counters per rank (one per barrier of a launch), bound to a multicast object
    (``multimem.red`` reaches every copy)."""
    return Buffer(name, counter_layout(4), depth=1, regions=counters, lines=1, role="flags", multicast=True)


def multicast_barrier(
    b: ProgramBuilder,
    use: Expr,
    *,
    counter: str = "mc_arrivals",
    which: Expr | int = 0,
    arrive_sem: Sem = Sem.RELEASE,
    wait_sem: Sem = Sem.ACQUIRE,
    arrivals: Expr = NRANKS,
    label: str = "mc_barrier",
) -> None:
    """All-to-all barrier through the switch: one ``multimem.red.add 1`` reaches every rank's copy of counter
    ``which``, then each rank waits until its own copy reaches ``arrivals × use``.

    ``use`` counts the barriers on that counter from 1; the counter only grows (``arrivals`` per
    barrier: every rank's arrival, its own included, lands in every copy). This is NCCL's LSA multimem
    barrier (``multimem.red.release.sys.add.u32``, then a spin on the local inbox until it reaches
    epoch + nRanks) and PyTorch symmetric memory's multimem barrier. The group syncs first, so the
    leader's release covers every thread's earlier accesses, and again after its acquire.
    """
    b.emit(SyncGroup(label=f"{label}.sync_before"))
    b.emit(MultimemRed(RmwOp.ADD, MulticastRef(counter, region=which), 1, arrive_sem, Scope.SYS,
                       issuer=Issuer.LEADER, label=f"{label}.arrive"))
    b.emit(PollUntil(Ref(counter, RANK, region=which), AtLeast(arrivals * use), wait_sem, Scope.SYS,
                     issuer=Issuer.LEADER, label=f"{label}.wait"))
    b.emit(SyncGroup(label=f"{label}.sync_after"))


def grid_counter_buffer(name: str = "grid_arrivals", counters: Expr | int = 1) -> Buffer:
    """``counters`` 32-bit arrival counters in each rank's memory, shared by the rank's CTAs (one per grid
    barrier of a launch)."""
    return Buffer(name, counter_layout(4), depth=1, regions=counters, lines=1, role="flags")


def grid_barrier(
    b: ProgramBuilder,
    use: Expr,
    *,
    counter: str = "grid_arrivals",
    which: Expr | int = 0,
    arrive_sem: Sem = Sem.RELEASE,
    wait_sem: Sem = Sem.ACQUIRE,
    scope: Scope = Scope.GPU,
    sync_after: bool = True,
    label: str = "grid_barrier",
) -> None:
    """Barrier among the CTAs of this rank's grid, as ``cooperative_groups::this_grid().sync()`` does it: every
    CTA syncs its threads, its thread 0 adds 1 to counter ``which`` in the rank's own memory (``red.release.gpu``)
    and polls it (``ld.acquire.gpu``) until all ``NCTAS`` CTAs arrived for the ``use``-th time (``use`` counts the
    barriers on that counter from 1, so the counter only grows: ``NCTAS * use``), then every CTA syncs again.

    The release makes the CTA's earlier writes (ordered before its thread 0 by the first sync) visible to every
    CTA whose thread 0 acquires the count; the second sync holds the CTA's other threads until its thread 0 has
    acquired. ``gpu`` scope is what the counter needs: ``cta`` scope covers the issuing CTA alone, so a CTA's
    release would not synchronize with another CTA's acquire. The CTAs must all be resident at once (a CTA
    spinning on the counter holds its SM): the emitter checks ``NCTAS`` against the GPU's SMs instead of
    using a cooperative launch. ``arrive_sem``, ``wait_sem``, ``scope`` and ``sync_after`` exist for mutants.
    """
    b.emit(SyncGroup(label=f"{label}.sync_before"))
    b.emit(Atomic(RmwOp.ADD, Ref(counter, RANK, region=which), 1, arrive_sem, scope, issuer=Issuer.LEADER,
                  label=f"{label}.cta_arrive"))  # a CTA's arrival, not a rank's (sync_rounds counts those)
    b.emit(PollUntil(Ref(counter, RANK, region=which), AtLeast(NCTAS * use), wait_sem, scope, issuer=Issuer.LEADER,
                     label=f"{label}.wait"))
    if sync_after:
        b.emit(SyncGroup(label=f"{label}.sync_after"))
