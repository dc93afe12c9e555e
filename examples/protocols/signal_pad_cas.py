"""signal-pad-cas: the barrier PyTorch SymmetricMemory's kernels run, with its CAS signalling as written.

``sync_remote_blocks`` has thread ``t`` signal peer ``t`` and then wait for peer ``t``'s signal, on
32-bit signal-pad slots that toggle between 0 and 1: ``put_signal`` spins on ``CAS(slot, 0, 1)`` in the
peer's pad (release, for the acq_rel pattern) until the slot is empty, so a signal the peer has not
consumed yet is never overwritten, and ``wait_signal`` spins on ``CAS(slot, 1, 0)`` in the own pad
(acquire), consuming the signal and emptying the slot for the next one. Each loop is a
:class:`~collsim.ir.ops.PollUntil` with ``swap``: only the successful CAS writes; every failed one is a
read (pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.h: put_signal,
wait_signal, sync_remote_blocks). The leader handles the peers one after another (the IR's peer loop)
where PyTorch gives each peer a thread; the data path is the signal-pad protocol's (stage, barrier, pull,
barrier).

Parameters: ``put_expects`` / ``wait_expects`` are the compare values of the two loops (PyTorch: 0 and
1) and ``put_is_cas`` False makes the put a plain release store of 1 (a put that does not wait for the
slot to be empty); the mutants next to this file change them.
"""
from __future__ import annotations

from collsim.ir import (MSG, NRANKS, PEER, PEER_INDEX, RANK, Buffer, Equals, Issuer, PollUntil, Ref, Scope, Sem,
                        Store, SyncGroup, ceil_div, counter_layout)
from protocols.barrier import LAYOUT
from protocols.signal_pad import SignalPad

#: PyTorch's signal pads are arrays of uint32
PAD = counter_layout(4)


class SignalPadCas(SignalPad):
    """signal-pad, each signal a CAS loop on a 0/1 slot as PyTorch SymmetricMemory writes it."""

    name = "signal-pad-cas"
    citation = ("pytorch/pytorch torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemory-inl.h (put_signal, "
                "wait_signal, sync_remote_blocks)")
    default_params = {**SignalPad.default_params, "put_expects": 0, "wait_expects": 1, "put_is_cas": True}

    def buffers(self, transfer_bytes):
        return (Buffer("staging", LAYOUT, depth=1, regions=1, lines=ceil_div(MSG, LAYOUT.data_bytes)),
                Buffer("pad", PAD, depth=1, regions=NRANKS, lines=1, role="flags"))

    def _barrier(self, b, number, label):
        p = self.params
        b.emit(SyncGroup(label=f"{label}.sync_before"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            slot = Ref("pad", PEER, region=RANK)
            if p["put_is_cas"]:
                b.emit(PollUntil(slot, Equals(p["put_expects"]), p["arrive_sem"], Scope.SYS, swap=1,
                                 issuer=Issuer.LEADER, label=f"{label}.put_signal"))
            else:
                b.emit(Store(slot, None, p["arrive_sem"], Scope.SYS, flag=1, issuer=Issuer.LEADER,
                             label=f"{label}.put_signal"))
        with b.loop(PEER_INDEX.name, NRANKS - 1):
            b.emit(PollUntil(Ref("pad", RANK, region=PEER), Equals(p["wait_expects"]), p["wait_sem"], Scope.SYS,
                             swap=0, issuer=Issuer.LEADER, label=f"{label}.wait_signal"))
        b.emit(SyncGroup(label=f"{label}.sync_after"))
