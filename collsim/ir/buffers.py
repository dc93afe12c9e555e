"""Buffers a protocol declares: symmetric memory every rank allocates alike.

A buffer is ``depth`` slots (single, double or triple buffering) of
``regions`` regions (usually one per sending rank) of ``lines`` lines in a
:class:`~collsim.ir.layout.LineLayout`. Rotation through the slots is not a
buffer property but the ``slot`` expression in each access (``ITER % depth``),
so the verifier's few iterations exercise exactly the rotation a long run
does.
"""
from __future__ import annotations

from dataclasses import dataclass

from collsim.ir.expr import Expr, as_expr
from collsim.ir.layout import LineLayout
from collsim.ir.types import FillPattern

__all__ = ["Buffer", "LOCATIONS"]

#: Where a buffer lives: ``device`` (the rank's GPU memory) or ``host`` (pinned host memory of the rank's
#: host process, mapped into the GPU's address space: ``cudaHostAlloc`` with ``cudaHostAllocMapped``).
LOCATIONS = ("device", "host")


@dataclass(frozen=True)
class Buffer:
    """A symmetric buffer.

    Parameters
    ----------
    name : str
    layout : LineLayout
    depth : int
        Buffering depth: how many slots rotate.
    regions : Expr
        Regions per slot (e.g. ``NRANKS``: one per sender).
    lines : Expr
        Lines per region (may depend on ``MSG`` and ``NRANKS``).
    init : FillPattern
        Initial contents: ``FillPattern.ZERO`` (cleared at setup, as collective libraries clear their
        buffers before the first launch), ``FillPattern.SENTINEL``, or ``FillPattern.ARBITRARY``
        (allocation reuse: nobody cleared it, every word holds some bit pattern), or their names.
    role : str
        What it is for, for humans: ``"data"``, ``"flags"``, ``"credits"``...
    multicast : bool
        Bound to a multicast object: besides its unicast address in each rank, one multimem address
        reaches every rank's copy at once (:class:`~collsim.ir.ops.MulticastRef`; NVLink SHARP,
        sm_90 on an NVSwitch that multicasts). The buffer's size is then rounded up to the multicast
        granularity by whoever allocates it.
    location : str
        ``"device"`` (default) or ``"host"``: pinned host memory mapped into the device (see
        :data:`LOCATIONS`). The kernel reaches a host buffer over the host link (PCIe or C2C), the rank's
        :class:`~collsim.ir.ops.ProxyThread` reaches only host buffers.
    per_cta : bool
        In a program of several CTAs per rank: every CTA has its own copy (an access by CTA ``c``
        reaches copy ``c`` in whichever rank's memory it names), instead of one copy shared by the
        rank's CTAs. A flag between CTAs of one GPU lives in a shared buffer (and needs gpu scope).

    Examples
    --------
    >>> from collsim.ir.layout import counter_layout
    >>> from collsim.ir.expr import NRANKS
    >>> inbox = Buffer("inbox", counter_layout(), depth=1, regions=NRANKS, lines=1)
    >>> inbox.total_lines({"NRANKS": 8, "MSG": 64})
    8
    """

    name: str
    layout: LineLayout
    depth: int
    regions: Expr
    lines: Expr
    init: FillPattern = FillPattern.ZERO
    role: str = "data"
    multicast: bool = False
    location: str = "device"
    per_cta: bool = False

    def __repr__(self) -> str:
        # a device buffer shared by the rank's CTAs prints as it did before these fields existed (cache keys,
        # reports)
        extra = "" if self.location == "device" else f", location={self.location!r}"
        extra += ", per_cta=True" if self.per_cta else ""
        return (f"Buffer(name={self.name!r}, layout={self.layout!r}, depth={self.depth!r}, regions={self.regions!r}, "
                f"lines={self.lines!r}, init={self.init!r}, role={self.role!r}, multicast={self.multicast!r}{extra})")

    @property
    def on_host(self) -> bool:
        """Whether the buffer is in host memory (``location="host"``)."""
        return self.location == "host"

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", as_expr(self.regions))
        object.__setattr__(self, "lines", as_expr(self.lines))
        if self.depth < 1:
            raise ValueError(f"buffer {self.name}: depth must be at least 1")
        if self.location not in LOCATIONS:
            raise ValueError(f"buffer {self.name}: location is {' or '.join(map(repr, LOCATIONS))}, not "
                             f"{self.location!r}")
        if self.multicast and self.on_host:
            raise ValueError(f"buffer {self.name}: host memory cannot be bound to a multicast object")
        try:
            object.__setattr__(self, "init", FillPattern(self.init))
        except ValueError:
            raise ValueError(f"buffer {self.name}: init is 'zero', 'sentinel' or 'arbitrary', not "
                             f"{self.init!r}") from None

    def total_lines(self, env) -> int:
        return self.depth * self.regions.evaluate(env) * self.lines.evaluate(env)

    def total_bytes(self, env) -> int:
        return self.total_lines(env) * self.layout.line_bytes

    def line_index(self, slot: int, region: int, line: int, env) -> int:
        """Flat line index of ``[slot][region][line]``; raises IndexError when out of range."""
        regions, lines = self.regions.evaluate(env), self.lines.evaluate(env)
        if not (0 <= slot < self.depth and 0 <= region < regions and 0 <= line < lines):
            raise IndexError(
                f"buffer {self.name}: [slot {slot}][region {region}][line {line}] is outside "
                f"[{self.depth}][{regions}][{lines}]"
            )
        return (slot * regions + region) * lines + line


