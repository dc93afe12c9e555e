"""Every collsim module says what it exports: ``__all__`` written out as a list of names, each public, each there."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import types
from pathlib import Path

import pytest

import collsim

MODULES = sorted(info.name for info in pkgutil.walk_packages(collsim.__path__, "collsim."))

#: Modules whose ``__all__`` is not written out yet (each is to leave this list when it is).
NOT_YET: frozenset[str] = frozenset()


def _written_all(name: str) -> list[str] | None:
    module = importlib.import_module(name)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            assert isinstance(value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts), (
                f"{name}: __all__ is computed; write the names out")
            return [e.value for e in value.elts]
    return None


@pytest.mark.parametrize("name", [m for m in MODULES if m not in NOT_YET])
def test_all_is_written_out_and_public(name):
    names = _written_all(name)
    assert names is not None, f"{name} has no __all__"
    module = importlib.import_module(name)
    assert len(names) == len(set(names)), f"{name}: __all__ names something twice"
    for export in names:
        dunder = export.startswith("__") and export.endswith("__")  # __version__ is public by convention
        assert dunder or not export.startswith("_"), f"{name}: __all__ exports the private name {export}"
        assert hasattr(module, export), f"{name}: __all__ names {export}, which it does not define"
        assert not isinstance(getattr(module, export), types.ModuleType), f"{name}: __all__ exports module {export}"


def test_the_list_of_modules_not_yet_written_out_is_current():
    assert NOT_YET <= set(MODULES)
    stale = []
    for name in sorted(NOT_YET):
        try:
            names = _written_all(name)
        except AssertionError:
            continue
        if names is not None and not any(n.startswith("_") for n in names):
            stale.append(name)
    assert not stale, f"now written out, remove from NOT_YET: {stale}"
