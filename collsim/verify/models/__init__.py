"""The memory models, ``ptx`` (PTX ISA, generic proxy) and ``sc``, over the one event form.

One model, several encodings chosen by option (as Dat3M selects encodings):
:func:`encode` builds the :class:`Encoding` of a
:class:`~collsim.verify.events.Program` under a model with a causality
strategy (:data:`CAUSALITY`: ``vector-clock`` by default, ``relational`` the
direct transcription). The protocol verifier and the litmus runner both call
it. (Performance models, which cost a configuration, are :mod:`collsim.models`.)

Examples
--------
>>> sorted(MEMORY_MODELS), sorted(CAUSALITY)
(['ptx', 'sc'], ['relational', 'vector-clock'])
"""
from __future__ import annotations

from typing import Any

import z3

from collsim.errors import InputError
from collsim.verify.events import Program
from collsim.verify.models.causality import CAUSALITY, Relational, VectorClocks
from collsim.verify.models.encoding import Encoding
from collsim.verify.models.ptx import PTXEncoding
from collsim.verify.models.sc import SCEncoding
from collsim.verify.models.witness import Witness

__all__ = ["MEMORY_MODELS", "CAUSALITY", "DEFAULT_CAUSALITY", "encode", "check_model", "Encoding", "PTXEncoding",
           "SCEncoding", "VectorClocks", "Relational", "Witness"]

#: name -> encoding class of the model
MEMORY_MODELS: dict[str, type[Encoding]] = {"ptx": PTXEncoding, "sc": SCEncoding}
DEFAULT_CAUSALITY = VectorClocks.name


def check_model(name: str, field: str = "model") -> str:
    """``name`` if it names a memory model, else an :class:`InputError` listing the valid ones."""
    if name not in MEMORY_MODELS:
        raise InputError(f"unknown memory model '{name}'", field=field, choices=sorted(MEMORY_MODELS))
    return name


def encode(program: Program, model: str = "ptx", *, causality: str = DEFAULT_CAUSALITY, liveness: bool = False,
           symbolic_inputs: bool = False, ctx: z3.Context | None = None, group_literals: bool = False,
           input_literal: bool = False, prune: bool = True, witnesses_only: bool = False) -> Encoding:
    """The executions of ``program`` under ``model`` (``ptx`` or ``sc``), encoded with ``causality``.

    See :class:`~collsim.verify.models.encoding.Encoding` for the options.
    """
    cls: Any = MEMORY_MODELS[check_model(model)]
    return cls(program, causality=causality, liveness=liveness, symbolic_inputs=symbolic_inputs, ctx=ctx,
               group_literals=group_literals, input_literal=input_literal, prune=prune,
               witnesses_only=witnesses_only)
