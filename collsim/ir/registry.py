"""Finding protocols: by name among the shipped ones and the mutants, or by file path.

>>> sorted(list_protocols())[:6]
['atomic-counter', 'barrier', 'll', 'll128', 'll128-atomic', 'll128-atomic-nvls']
>>> load_protocol("ll").algorithms
('one-shot', 'two-shot', 'ring')
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from collsim.errors import InputError, ProtocolDefinitionError
from collsim.ir.origin import traceback_location
from collsim.ir.protocol import Protocol

__all__ = ["list_protocols", "list_mutants", "load_protocol", "protocol_class", "load_protocol_file",
           "USER_PROTOCOL_MODULE"]

#: The prefix of the module a protocol file is loaded as (:func:`load_protocol_file`).
USER_PROTOCOL_MODULE = "collsim_user_protocol_"


def _protocol_classes(module) -> list[type[Protocol]]:
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Protocol)
        and obj.__module__ == module.__name__
        and "name" in vars(obj)
    ]


@lru_cache(maxsize=None)
def _catalogue(package: str) -> dict[str, type[Protocol]]:
    pkg = importlib.import_module(package)
    found: dict[str, type[Protocol]] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for cls in _protocol_classes(module):
            if cls.name in found:
                raise ProtocolDefinitionError(
                    f"two protocols are named {cls.name!r}: {found[cls.name].__module__} and {cls.__module__}"
                )
            found[cls.name] = cls
    return found


def list_protocols() -> list[str]:
    """Names of the shipped protocols."""
    return sorted(_catalogue("protocols"))


def list_mutants() -> list[str]:
    """Names of the deliberately broken variants in ``protocols.mutants``."""
    return sorted(_catalogue("protocols.mutants"))


def protocol_class(name: str) -> type[Protocol]:
    shipped, mutants = _catalogue("protocols"), _catalogue("protocols.mutants")
    if name in shipped:
        return shipped[name]
    if name in mutants:
        return mutants[name]
    if name.startswith("mutant-"):  # the mutants are the choices a mistyped mutant name needs
        raise InputError(f"unknown mutant {name!r}", field="protocol", choices=sorted(mutants))
    raise InputError(f"unknown protocol {name!r}", field="protocol", choices=sorted(shipped))


def load_protocol(name_or_path: str, **params: Any) -> Protocol:
    """A protocol instance by name (shipped or mutant) or from a ``.py`` file; ``params`` override its defaults."""
    if name_or_path.endswith(".py") or "/" in name_or_path:
        return load_protocol_file(name_or_path, **params)
    return protocol_class(name_or_path)(**params)


def load_protocol_file(path: str, **params: Any) -> Protocol:
    """Load the single protocol a Python file defines.

    Errors name the file and line (syntax errors, exceptions while loading,
    no or several protocols).
    """
    file = Path(path)
    if not file.is_file():
        raise InputError(f"no such protocol file", file=str(path))
    # named after the file's path, the same in every process, so Protocol.key is too
    module_name = f"{USER_PROTOCOL_MODULE}{hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:16]}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise ProtocolDefinitionError(f"syntax error: {err.msg}", file=str(path), line=err.lineno) from None
    except Exception as err:  # report where in the user's file it failed
        line = _line_in(err, file)
        raise ProtocolDefinitionError(f"{type(err).__name__}: {err}", file=str(path), line=line) from None
    classes = _protocol_classes(module)
    if len(classes) != 1:
        names = [c.__name__ for c in classes]
        raise ProtocolDefinitionError(
            f"a protocol file defines exactly one Protocol subclass with a `name`; found {len(classes)} {names}",
            file=str(path),
        )
    try:
        return classes[0](**params)
    except InputError:
        raise
    except Exception as err:
        raise ProtocolDefinitionError(f"{type(err).__name__}: {err}", file=str(path), line=_line_in(err, file)) from None


def _line_in(err: BaseException, file: Path) -> int | None:
    origin = traceback_location(err.__traceback__)
    return origin.line_in(file) if origin is not None else None
