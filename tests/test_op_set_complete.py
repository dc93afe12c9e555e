"""Every consumer of the IR has a rule for every operation, and loses the ability to be defined without one.

The consumers' walks are found, not listed: every module of collsim is
imported and every concrete subclass of :class:`collsim.ir.visit.OpVisitor`
defined in collsim is checked (the simulator's, the verifier's, the
emitter's, the IR's own tables). A few are named below so that losing one
(a consumer that stops walking through ``OpVisitor``) fails too.
"""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import collsim
from collsim.ir.ops import OP_TYPES
from collsim.ir.visit import OpVisitor, method_name, missing_rules

#: consumers that must walk the IR through OpVisitor: (module, class)
REQUIRED = (
    ("collsim.verify.lower", "_ElementLowering"),
    ("collsim.emit.cuda", "KernelGenerator"),
    ("collsim.emit.cuda", "_Description"),
    ("collsim.emit.plan", "_RegisterAccesses"),
    ("collsim.emit.ptxcheck", "_Demands"),
    ("collsim.ir.effects", "_EffectsOf"),
)


def _consumers() -> list[type]:
    for info in pkgutil.walk_packages(collsim.__path__, "collsim."):
        importlib.import_module(info.name)
    found, todo = [], list(OpVisitor.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("collsim.") and not missing_rules(cls):
            found.append(cls)
    return sorted(set(found), key=lambda c: (c.__module__, c.__qualname__))


CONSUMERS = _consumers()


def test_the_named_consumers_walk_through_the_visitor():
    names = {(c.__module__, c.__qualname__) for c in CONSUMERS}
    assert set(REQUIRED) <= names, sorted(set(REQUIRED) - names)


def _without(cls: type, name: str) -> type:
    """``cls`` defined again without its rule ``name`` (masked in a subclass when a base class defines it)."""
    namespace = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__", "_dispatch")}
    if name in namespace:
        del namespace[name]
        return type(cls.__name__, cls.__bases__, namespace)
    return type(cls.__name__, (cls,), {name: None})


@pytest.mark.parametrize("consumer", CONSUMERS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_a_consumer_without_any_one_rule_cannot_be_defined(consumer):
    assert missing_rules(consumer) == []
    namespace = {k: v for k, v in vars(consumer).items() if k not in ("__dict__", "__weakref__", "_dispatch")}
    type(consumer.__name__, consumer.__bases__, namespace)  # defined again as it is: fine
    for op_type in OP_TYPES:
        with pytest.raises(TypeError, match=rf"has no rule for {op_type.__name__}\b.*{method_name(op_type)}"):
            _without(consumer, method_name(op_type))
