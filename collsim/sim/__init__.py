"""The discrete-event simulator (``--model des``, the default model).

It runs every rank's program (the protocol IR lowered by an algorithm) as a
SimPy process on the topology and charges each operation for its mechanism:
bytes on the wire from the buffer layouts, remote versus local from each
reference's owner rank, polls woken by the writes that satisfy them, fences
waiting for acknowledgements, atomics, local reductions at HBM speed, and
kernel launch. Nothing is special-cased by protocol name.

Modules, one concept each:

* :mod:`~collsim.sim.costs` - the cost parameters (``collsim/data/costs/<generation>.yaml``) and overrides
* :mod:`~collsim.sim.lower` - lowering a program for the simulator and binding it to each rank's ops
  (:class:`~collsim.sim.lower.SimOp`), loops as lanes or sequences
* :mod:`~collsim.sim.links` - pipes (links, engines, HBM) and the whole-range transfer rule
* :mod:`~collsim.sim.memory` - writes, polled words and when a poll is satisfied
* :mod:`~collsim.sim.rank` - what each operation costs and waits for (one rule per operation class)
* :mod:`~collsim.sim.simulation` - one launch: environment, shared state, scale rule
* :mod:`~collsim.sim.symmetry` - when every rank does what rank 0 does (the analysis)
* :mod:`~collsim.sim.folded` - rank 0 simulated for all ranks (the process that uses the analysis)
* :mod:`~collsim.sim.trace` - path nodes, the critical path and the breakdown attribution rule
* :mod:`~collsim.sim.channels` - the default channel count
* :mod:`~collsim.sim.memo` - the bounded caches: facts per topology, programs, cost sets, kernels
* :mod:`~collsim.sim.model` - the model function

>>> from collsim.models import simulate
>>> r = simulate("hgx-h100", ranks=8, algorithm="one-shot", protocol="ll", size_bytes=1024, model="des")
>>> r.model, abs(sum(r.breakdown.values()) - r.latency_us) < 1e-9
('des', True)
"""
from __future__ import annotations

from collsim.models import register_model
from collsim.sim.costs import load_costs, parameter_names, validate_costs
from collsim.sim.model import DesRun, des_model, run_des

__all__ = ["des_model", "run_des", "DesRun", "load_costs", "parameter_names"]

register_model(
    "des",
    des_model,
    default=True,
    description="discrete-event simulation of every rank's protocol program on the topology (SimPy)",
    validate_costs=validate_costs,
)
