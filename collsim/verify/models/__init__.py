"""Memory models: ``sc`` (sequential consistency) and ``ptx`` (PTX ISA, generic proxy).

A :class:`MemoryModel` has a ``name`` and ``encode(program, solver) ->
Encoding``; see :mod:`collsim.verify.models.base` for the encoding API.
(Performance models, which cost a configuration, are :mod:`collsim.models`.)

Examples
--------
>>> memory_model("ptx").name, sorted(MEMORY_MODELS)
('ptx', ['ptx', 'sc'])
"""
from __future__ import annotations

from collsim.errors import InputError
from collsim.verify.models.base import Encoding, MemoryModel, Witness
from collsim.verify.models.ptx import PTXEncoding, PTXModel
from collsim.verify.models.sc import SCEncoding, SCModel

__all__ = ["MEMORY_MODELS", "memory_model", "MemoryModel", "Encoding", "Witness", "PTXModel", "SCModel",
           "PTXEncoding", "SCEncoding"]

#: name -> memory model class
MEMORY_MODELS: dict[str, type[MemoryModel]] = {"ptx": PTXModel, "sc": SCModel}


def memory_model(name: str) -> MemoryModel:
    """The memory model called ``name`` (``ptx`` or ``sc``).

    Raises
    ------
    InputError
        For any other name, listing the valid ones.
    """
    try:
        return MEMORY_MODELS[name]()
    except KeyError:
        raise InputError(f"unknown memory model '{name}'", field="model", choices=sorted(MEMORY_MODELS)) from None
