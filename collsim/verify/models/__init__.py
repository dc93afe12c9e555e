"""Memory models: ``sc`` (sequential consistency) and ``ptx`` (PTX ISA, generic proxy).

A model has a ``name`` and ``encode(program, solver) -> Encoding``; see
:mod:`collsim.verify.models.base` for the encoding API.
"""
from __future__ import annotations

from collsim.errors import InputError
from collsim.verify.models.base import Encoding, Witness
from collsim.verify.models.ptx import PTXEncoding, PTXModel
from collsim.verify.models.sc import SCEncoding, SCModel

__all__ = ["MODELS", "get_model", "Encoding", "Witness", "PTXModel", "SCModel",
           "PTXEncoding", "SCEncoding"]

MODELS = {"ptx": PTXModel, "sc": SCModel}


def get_model(name: str):
    """The model called ``name`` (``ptx`` or ``sc``)."""
    try:
        return MODELS[name]()
    except KeyError:
        raise InputError(f"unknown memory model '{name}'", field="model", choices=sorted(MODELS)) from None
