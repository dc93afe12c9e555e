"""The op set is closed: every operation class is listed, and a visitor missing a rule cannot be defined."""
from __future__ import annotations

import inspect

import pytest

from collsim.errors import UnsupportedError
from collsim.ir import ops
from collsim.ir.ops import OP_TYPES, Op, SyncGroup
from collsim.ir.visit import OpVisitor, method_name, missing_rules


def test_every_operation_class_is_in_the_op_set():
    defined = {obj for _, obj in inspect.getmembers(ops, inspect.isclass)
               if issubclass(obj, Op) and obj is not Op and obj.__module__ == ops.__name__}
    assert defined == set(OP_TYPES)


def _complete_namespace() -> dict:
    return {method_name(t): (lambda self, op, _t=t: _t.__name__) for t in OP_TYPES}


def test_a_complete_visitor_dispatches_on_the_operation_class():
    Visitor = type("Visitor", (OpVisitor,), _complete_namespace())
    assert Visitor().visit(SyncGroup()) == "SyncGroup"


@pytest.mark.parametrize("op_type", OP_TYPES, ids=lambda t: t.__name__)
def test_a_visitor_without_one_rule_fails_when_defined(op_type):
    namespace = _complete_namespace()
    del namespace[method_name(op_type)]
    with pytest.raises(TypeError, match=op_type.__name__):
        type("Forgetful", (OpVisitor,), namespace)
    assert missing_rules(type("Partial", (OpVisitor,), namespace, abstract=True)) == [op_type]


def test_an_operation_outside_the_op_set_is_refused_with_the_consumer_named():
    class Stray(Op):
        label = "stray"

    Visitor = type("Visitor", (OpVisitor,), {**_complete_namespace(), "consumer": "the test consumer"})
    with pytest.raises(UnsupportedError, match="the test consumer has no rule for operation Stray"):
        Visitor().visit(Stray())
