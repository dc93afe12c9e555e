"""Every example in collsim's docstrings runs and prints what it shows."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import collsim

MODULES = sorted(info.name for info in pkgutil.walk_packages(collsim.__path__, "collsim."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
