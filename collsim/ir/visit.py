"""One walk over the op set per consumer, checked complete when the consumer is defined.

Every consumer of the IR (the simulator's lowering and its rank process,
the verifier's lowering, the emitter's CUDA printer and its PTX check)
walks operations through one subclass of :class:`OpVisitor`. The base
class names the method each operation class needs (``visit_<op>``, the
class name in snake case, e.g. ``visit_poll_until``) and refuses to
define a concrete subclass that lacks one, so adding an operation to
:data:`collsim.ir.ops.OP_TYPES` breaks every consumer that has no rule
for it at import, not at the first protocol that uses it.

>>> from collsim.ir.ops import OP_TYPES, SyncGroup
>>> method_name(SyncGroup)
'visit_sync_group'
>>> class Incomplete(OpVisitor):
...     def visit_store(self, op):
...         return "store"
Traceback (most recent call last):
...
TypeError: Incomplete has no rule for Load, PollUntil, Fence, Atomic, Reduce, WriteOutput, SyncGroup, KernelBoundary, Loop, MultimemLoadReduce, MultimemStore, MultimemRed, HostMemset, HostBarrier, ProxyThread, BulkLoad, ProxyFence, When: a consumer of the IR needs a visit_<op> method for every class of collsim.ir.ops.OP_TYPES (missing: visit_load, visit_poll_until, visit_fence, visit_atomic, visit_reduce, visit_write_output, visit_sync_group, visit_kernel_boundary, visit_loop, visit_multimem_load_reduce, visit_multimem_store, visit_multimem_red, visit_host_memset, visit_host_barrier, visit_proxy_thread, visit_bulk_load, visit_proxy_fence, visit_when)
>>> class Counting(OpVisitor, abstract=True):  # a partial base for consumers that share rules
...     def visit_sync_group(self, op):
...         return 1
>>> Counting().visit(SyncGroup())
1
"""
from __future__ import annotations

import re
from typing import Any, ClassVar

from collsim.errors import UnsupportedError
from collsim.ir.ops import OP_TYPES, Op

__all__ = ["OpVisitor", "method_name", "missing_rules"]


def method_name(op_type: type) -> str:
    """The visitor method that handles ``op_type``: ``visit_`` and its class name in snake case."""
    return "visit_" + re.sub(r"(?<!^)(?=[A-Z])", "_", op_type.__name__).lower()


def missing_rules(cls: type) -> list[type]:
    """The operation classes of :data:`~collsim.ir.ops.OP_TYPES` that ``cls`` has no method for."""
    return [t for t in OP_TYPES if not callable(getattr(cls, method_name(t), None))]


class OpVisitor:
    """Base of a consumer's walk over operations: one ``visit_<op>`` method per operation class.

    Parameters
    ----------
    abstract : bool, class keyword
        ``class Base(OpVisitor, abstract=True)`` declares a partial visitor (shared rules for
        several consumers); only concrete subclasses are checked complete.

    Notes
    -----
    :meth:`visit` dispatches on the exact class of the operation through a table built once per
    visitor class, so a hot loop pays one dictionary look-up per operation. An operation class
    defined outside :data:`~collsim.ir.ops.OP_TYPES` (in a protocol file, say) is refused with an
    :class:`~collsim.errors.UnsupportedError` naming the consumer.
    """

    #: what the consumer is, for error messages ("the simulator", "the CUDA emitter", ...)
    consumer: ClassVar[str] = ""
    _dispatch: ClassVar[dict[type, Any]] = {}

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = missing_rules(cls)
        if missing and not abstract:
            raise TypeError(
                f"{cls.__qualname__} has no rule for {', '.join(t.__name__ for t in missing)}: a consumer of "
                f"the IR needs a visit_<op> method for every class of collsim.ir.ops.OP_TYPES "
                f"(missing: {', '.join(method_name(t) for t in missing)})")
        cls._dispatch = {t: getattr(cls, method_name(t)) for t in OP_TYPES if t not in missing}

    def visit(self, op: Op, *args: Any, **kwargs: Any) -> Any:
        """Apply this consumer's rule for ``op``'s class to ``op`` (extra arguments are passed on)."""
        try:
            rule = self._dispatch[type(op)]
        except KeyError:
            who = self.consumer or type(self).__qualname__
            raise UnsupportedError(
                f"{who} has no rule for operation {type(op).__name__} (label {getattr(op, 'label', '?')!r}): "
                f"operations are the classes of collsim.ir.ops.OP_TYPES") from None
        return rule(self, op, *args, **kwargs)
