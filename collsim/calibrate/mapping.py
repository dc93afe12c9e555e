"""Map measured rows to the configurations collsim models, or say why not.

A measured row becomes a *modelled configuration* (topology preset, ranks,
algorithm, collsim protocol, launch mode, size) when collsim has a program
that does what the measured code did; otherwise it is *unmapped* and carries
the reason. Rows are grouped into *families*: one source (a published source
id such as ``S22``, or one input file and table), one implementation, one
GPU count and timing method.

The rules, in the order they are applied (:func:`map_row`):

1. Rows flagged ``wrong``, rows the source itself calls an outlier, or says
   not to use, and AllReduce-less collectives are unmapped.
2. Timing: host wall-clock timings (Python/launch overhead included) and
   back-to-back CUDA-graph replays (pipelined throughput, not latency) are
   unmapped. Device time with launches hidden behind a GPU sleep (the kraken
   harness) is costed as ``graph`` (no launch overhead); every other eager
   measurement as ``eager``; rows without a launch mode as ``eager``.
3. Hardware: the GPU names a topology preset (A100 → ``dgx-a100``, H100 →
   ``hgx-h100``, H200 → ``hgx-h200``, B200 → ``hgx-b200``, GB200 →
   ``gb200-nvl72``, V100 → ``dgx1-v100``); H20 is costed on ``hgx-h100``
   (same 18 × NVLink4 NVSwitch fabric; its SM count and HBM bandwidth are
   not modelled; flagged as a substitution). Multi-node runs, GPU counts the
   preset lacks or that are unknown, PCIe GPUs and GPUs without a preset are
   unmapped.
4. Implementation: tree algorithms, MSCCL++ kernels and NCCL's symmetric
   kernels are not modelled. PyTorch SymmetricMemory ``one_shot_all_reduce`` /
   ``two_shot_all_reduce_`` and the Triton/Helion one-shot kernels built on the
   same signal-pad barrier are ``barrier`` one-shot / two-shot. NVLink SHARP
   (multimem) rows are ``nvls``: NCCL's ``NCCL_ALGO=NVLS`` and ``NVLSTree`` (one
   node: a reduce-scatter by ``multimem.ld_reduce`` and an all-gather by
   ``multimem.st``) and PyTorch's ``multimem_all_reduce_`` are nvls two-shot,
   the multimem one-shot kernels nvls one-shot, on a topology whose switches
   multicast and reduce. NCCL rows with ``NCCL_ALGO``/``NCCL_PROTO``
   known use them; a ring whose protocol is not stated, and an "NCCL default"
   row, take what NCCL's tuner would pick (:func:`nccl_default_choice`).

The NCCL tuner rule
-------------------
NCCL picks, per collective call, the (algorithm, protocol) with the least
modelled time ``lat + bytes / (1000 × bw)`` (``ncclTopoGetAlgoTime``, NCCL
2.30.7 ``src/graph/tuning.cc``). :func:`nccl_default_choice` evaluates that
formula for Ring × {LL, LL128, Simple}, Tree × {LL, LL128, Simple} (single
node) and NVLS × Simple (Hopper or newer on an NVSwitch fabric), with NCCL's
latency and bandwidth tables. Ring bus bandwidth (channels × per-channel
bandwidth) is the analytic model's approximation of NCCL's graph search, the
tree reuses it, and NVLS uses one channel per GPU at the fastest speed of the
architecture's search array that fits the GPU's NVLink bandwidth (NCCL
``src/graph/search.cc``). When Ring wins, the row maps to ring with that
protocol; when NVLS wins, to nvls two-shot; when Tree wins it is unmapped.
On 8 × H100 this gives Ring/LL up to about 1 MiB and NVLS above, the switch
point S02 reports for 8 × H200.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from collsim.analytic.constants import base_constants
from collsim.analytic.model import plan
from collsim.ir.registry import load_protocol
from collsim.models import SimRequest

__all__ = [
    "GPU_PRESETS",
    "SUBSTITUTIONS",
    "MAPPED_COLUMNS",
    "RowMapping",
    "gpu_model",
    "map_row",
    "map_measurements",
    "nccl_default_choice",
    "family_of",
    "measured_time_us",
    "launch_of",
    "known_algorithm",
    "known_protocol",
]

#: GPU model (topology catalog name) -> topology preset of its usual system.
GPU_PRESETS: dict[str, str] = {
    "V100": "dgx1-v100",
    "A100": "dgx-a100",
    "H100": "hgx-h100",
    "H200": "hgx-h200",
    "B200": "hgx-b200",
    "GB200": "gb200-nvl72",
}

#: GPUs without a preset costed on another one, with the reason (shown on every such family).
SUBSTITUTIONS: dict[str, tuple[str, str]] = {
    "H20": ("hgx-h100", "H20 costed as H100: same 18 x NVLink4 links to NVSwitch; its 78 SMs and "
                        "4.0 TB/s HBM are not modelled"),
}

#: Columns :func:`map_measurements` adds to a measurement table.
MAPPED_COLUMNS: tuple[str, ...] = (
    "family", "family_label", "mapped", "reason", "rule", "substitution",
    "m_topology", "m_ranks", "m_algorithm", "m_protocol", "m_launch", "measured_us",
)

# NCCL 2.30.7 src/graph/tuning.cc tables not in the analytic model's constants
# (reference notes, section 4.2 / 4.3). Protocol order LL, LL128, Simple.
_TREE_BASE_LAT = {"ll": 6.8, "ll128": 14.0, "simple": 8.4}
_TREE_HW_LAT = {"nvlink": {"ll": 0.6, "ll128": 1.25, "simple": 4.0},
                "pci": {"ll": 1.0, "ll128": 1.9, "simple": 4.0}}
_NVLS_HW_LAT_SIMPLE = 25.0  # NVLink row, NVLS column, Simple; baseLat 0
_PER_CH_MAX_TREE_BW = {"volta": 26.5, "ampere": 24.0, "hopper": 38.7, "blackwell": 70.0}
_PER_CH_MAX_TREE_LL128_BW = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 55.6}
_NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
# src/graph/search.cc intra-node speed arrays (GB/s per channel)
_SPEEDS = {
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
# treeCorrectionFactor[protocol][log2(bytes/64)], 64 B .. 256 MiB (24 entries)
_TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}


@dataclass(frozen=True)
class RowMapping:
    """What one measured row maps to (a modelled configuration and the rule that chose it), or why it does not."""

    family: str
    label: str
    mapped: bool
    reason: str = ""  # why unmapped
    rule: str = ""  # how mapped (protocol/algorithm/launch rule)
    substitution: str = ""
    topology: str = ""
    ranks: int = 0
    algorithm: str = ""
    protocol: str = ""
    launch: str = ""


# ---------------------------------------------------------------------------
# small text helpers


def _text(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _int(value: Any) -> int | None:
    try:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return None
        return int(value)
    except (TypeError, ValueError):
        return None


def gpu_model(text: str) -> tuple[str, bool]:
    """The topology catalog's GPU model named by ``text`` and whether it was presumed.

    >>> gpu_model("NVIDIA H100 80GB HBM3"), gpu_model("GB200 (B200-class)")[0], gpu_model("H20")[0]
    (('H100', False), 'GB200', 'H20')
    """
    t = _text(text).lower()
    presumed = "presum" in t or "inferred" in t
    pcie = "pcie" in t
    for pattern, name in (
        (r"gb200", "GB200"), (r"(?<![a-z0-9])b200", "B200"), (r"h200", "H200"),
        (r"h100", "H100"), (r"h800", "H800"), (r"(?<![a-z0-9])h20(?![0-9])", "H20"),
        (r"a100", "A100"), (r"a800", "A800"), (r"v100", "V100"),
    ):
        if re.search(pattern, t):
            if pcie and name in ("H100", "A100"):
                return name + "-PCIe", presumed
            return name, presumed
    return "", presumed


def _source_id(row: Any) -> str:
    origin = _text(row.get("origin"))
    m = re.match(r"\s*(S\d+)\b", origin)
    if m:
        return m.group(1)
    source = Path(_text(row.get("source"))).name or "?"
    section = _int(row.get("section"))
    return f"{source}#{section}" if section else source


def _short(text: str, limit: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _algorithm_text(row: Any) -> str:
    """The algorithm as the input states it: the column, else an ``algorithm: …`` remark in the notes."""
    algorithm = _text(row.get("algorithm"))
    if algorithm:
        return algorithm
    m = re.search(r"(?:^|;\s*)algorithm:\s*([^;]+)", _text(row.get("notes")))
    return m.group(1).strip() if m else ""


def measured_time_us(row: Any) -> float | None:
    """The out-of-place time, else the in-place one (nccl-tests prints both; some sources only one)."""
    for key in ("time_us", "time_us_inplace"):
        value = row.get(key)
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v) and v > 0:
            return v
    return None


def family_of(row: Any) -> tuple[str, str]:
    """``(key, label)`` of the family a measured row belongs to."""
    sid = _source_id(row)
    library = _text(row.get("library"))
    algorithm = _algorithm_text(row)
    protocol = _text(row.get("protocol"))
    gpu = gpu_model(_text(row.get("gpu")))[0] or _text(row.get("gpu")) or _text(row.get("topology")) or "?"
    ranks = _int(row.get("ranks"))
    launch = _text(row.get("launch"))
    what = " ".join(p for p in (library, f"[{algorithm}]" if algorithm else "", f"proto {protocol}" if protocol else "") if p)
    key = " | ".join([sid, what, gpu, str(ranks), launch])
    label = f"{sid} {_short(what or 'unnamed', 60)}, {ranks if ranks else '?'}x{gpu}" + (f", {launch}" if launch else "")
    return key, label


# ---------------------------------------------------------------------------
# the NCCL tuner rule


@lru_cache(maxsize=64)
def _topology(name: str) -> Any:
    from collsim.topology import load_topology  # lazy: start-up (networkx; `collsim compare` needs no topology)

    return load_topology(name)


@lru_cache(maxsize=8)
def _protocol(name: str) -> Any:
    return load_protocol(name)


@lru_cache(maxsize=4096)
def nccl_default_choice(topology: str, ranks: int, size_bytes: int, algorithms: tuple[str, ...] = ("ring", "tree", "nvls")) -> tuple[str, str, dict[str, float]]:
    """What NCCL's tuner would run for an AllReduce: ``(algorithm, protocol, times)``.

    ``times`` maps ``"algorithm/protocol"`` to NCCL's modelled time (µs) of
    every candidate; the choice is the smallest. ``algorithms`` restricts the
    candidates (``("ring",)`` for ``NCCL_ALGO=Ring``). See the module docstring.
    """
    topo = _topology(topology)
    consts = base_constants()
    n = int(ranks)
    size = float(size_bytes)
    times: dict[str, float] = {}
    gen = str(topo.generation(0)).lower()
    plans = {}
    for proto in ("ll", "ll128", "simple"):
        req = SimRequest(topology=topo, ranks=n, algorithm="ring", protocol=_protocol(proto), size_bytes=max(1, int(size)))
        plans[proto] = plan(req, consts, [])
    hw = plans["ll"].hw
    nsteps = 2 * (n - 1)
    if "ring" in algorithms:
        for proto, p in plans.items():
            lat = consts["base_latency_us"][proto] + nsteps * consts["hw_latency_us"][hw][proto]
            bw = p.proto_bw_gbps * n / nsteps
            times[f"ring/{proto}"] = lat + size / (1000.0 * bw)
    if "tree" in algorithms and n > 2:
        p = plans["simple"]
        nch = p.channels
        bus = min(p.bus_bw_gbps * 0.92, nch * _PER_CH_MAX_TREE_BW.get(gen, 24.0))
        ll_max = consts["ll_max_bw_gbps"].get(gen, consts["ll_max_bw_gbps"]["ampere"])
        log_size = int(math.log2(size / 64)) if size >= 64 else 0
        for proto in ("ll", "ll128", "simple"):
            b = bus
            if proto == "ll":
                b = min(b / 3.8, ll_max)
            elif proto == "ll128":
                b = min(b * 7.0 / 9.0, nch * _PER_CH_MAX_TREE_LL128_BW.get(gen, 20.0))
            b *= 0.5
            if 0 <= log_size < len(_TREE_CORRECTION[proto]):
                b *= _TREE_CORRECTION[proto][log_size]
            lat = _TREE_BASE_LAT[proto] + 2 * (n - 1) * _TREE_HW_LAT[hw][proto]
            times[f"tree/{proto}"] = lat + size / (1000.0 * b)
    if "nvls" in algorithms and gen in _NVLS_EFFICIENCY and hw == "nvlink" and n >= 2:
        switches = (topo.summary(routes=False).get("switches") or {})
        if switches.get("nvswitch"):
            egress = float(topo.gpu_egress_gbps(0, family="nvlink", effective=True))
            nch = min(32, n)
            total = egress * n / (n - 1)
            speed = next((s for s in _SPEEDS[gen] if s <= egress and s * nch <= total), _SPEEDS[gen][-1])
            intra = speed * _NVLS_EFFICIENCY[gen] * (nch - 1) / nch * 2.0
            bw = nch * intra * n / nsteps
            times["nvls/simple"] = _NVLS_HW_LAT_SIMPLE + size / (1000.0 * bw)
    best = min(times, key=times.__getitem__)
    algo, proto = best.split("/")
    return algo, proto, times


# ---------------------------------------------------------------------------
# the per-row rules

_HOST_TIMING = ("host wall clock", "host-side timing", "host-timed", "host timing")
_HIDDEN_LAUNCH = ("launch overhead hidden", "gpu sleep", "launches hidden")
_NVLS_WORDS = ("nvls", "multimem", "nvlink sharp")
_UNMODELLED = (
    (("tree",), "tree algorithms are not modelled"),
    (("mscclpp", "mscclpp-test", "msccl++"), "MSCCL++ kernels: their algorithm and protocol are not modelled"),
    (("symmetric-memory kernels", "symmetric kernels"), "NCCL symmetric kernels: the kernel that ran is not stated"),
)


def launch_of(row: Any) -> tuple[str, str]:
    """``(launch, rule)`` collsim costs a measured row with, or ``("", reason)`` when its timing cannot be modelled."""
    notes = _text(row.get("notes")).lower()
    launch_col = _text(row.get("launch"))
    if any(k in notes for k in _HOST_TIMING):
        return "", "host wall-clock timing (includes Python/launch overhead), not device latency"
    if ("back-to-back" in notes and launch_col == "graph") or "pipelined throughput" in notes:
        return "", "back-to-back CUDA-graph replay measures pipelined throughput, not latency"
    if any(k in notes for k in _HIDDEN_LAUNCH) or ("kraken" in notes and "benchmark_with_event" in notes):
        return "graph", "device time with launches hidden: costed as graph launch"
    if launch_col in ("eager", "graph"):
        return launch_col, f"{launch_col} launch"
    return "eager", "launch mode not stated: eager assumed"


def known_algorithm(row: Any) -> str:
    """The algorithm a measured row states, as collsim or NCCL names it (``""`` if not stated).

    ``ring``, ``one-shot``, ``two-shot`` can join simulated rows (NVLS rows name the nvls protocol's
    one-shot or two-shot, see :func:`known_protocol`); ``tree``, ``collnet``, ``pat`` name algorithms
    collsim does not model.
    """
    alg = _algorithm_text(row).lower()
    if not alg or (alg.startswith("nccl default") and "harness" not in alg):
        return ""
    if any(k in alg for k in _NVLS_WORDS):  # NVLS runs collsim's nvls protocol; one-shot or two-shot
        return "one-shot" if re.search(r"one[_ -]?shot", alg) else "two-shot"
    for name in ("tree", "collnet", "pat"):
        if name in alg:
            return name
    if re.search(r"one[_ -]?shot", alg) and not re.search(r"two[_ -]?shot", alg):
        return "one-shot"
    if re.search(r"two[_ -]?shot", alg) and not re.search(r"one[_ -]?shot", alg):
        return "two-shot"
    if "ring" in alg:
        return "ring"
    return ""


def known_protocol(row: Any) -> str:
    """``nvls`` for an NVLink SHARP row (NCCL_ALGO=NVLS/NVLSTree, multimem kernels), else ``ll``, ``ll128``
    or ``simple`` when the row states NCCL_PROTO, else ``""``."""
    alg = _algorithm_text(row).lower()
    if known_algorithm(row) and any(k in alg for k in _NVLS_WORDS):
        return "nvls"
    proto = _text(row.get("protocol")).lower()
    return proto if proto in ("ll", "ll128", "simple") else ""


def _unmapped(fam: tuple[str, str], reason: str, **kw: Any) -> RowMapping:
    return RowMapping(fam[0], fam[1], False, reason=reason, **kw)


def _implementation(library: str, algorithm: str) -> tuple[str, str] | str:
    """``("nccl", algo_text)``, ``("barrier" | "nvls", "one-shot"|"two-shot")`` or an unmapped reason."""
    lib, alg = library.lower(), algorithm.lower()
    both = f"{lib} {alg}"
    default = alg.startswith("nccl default") or alg in ("", "not stated")
    if "nccl" in lib and not any(k in lib for k in ("mscclpp", "msccl++", "symmetric")) and default:
        if "symmetric" in alg:
            return "NCCL symmetric kernels: the kernel that ran is not stated"
        if "tuner plugin" in alg:
            return "algorithm chosen by an external tuner plugin, not NCCL's tuner"
        return ("nccl", alg)
    if any(k in both for k in _NVLS_WORDS):
        if "not reported" in alg or "actually ran" in alg:
            return "the algorithm NCCL actually ran is not reported"
        if re.search(r"one[_ -]?shot", alg):
            return ("nvls", "one-shot")
        return ("nvls", "two-shot")
    for keys, why in _UNMODELLED:
        if any(k in both for k in keys):
            if "not reported" in alg or "actually ran" in alg:
                return "the algorithm NCCL actually ran is not reported"
            return why
    if "nccl" in lib and ("ring" in alg or re.search(r"nccl_algo\s*=\s*ring", alg)):
        return ("nccl", alg)
    if re.search(r"one[_ -]?shot", alg) and ("symmetric" in lib or "triton" in lib or "helion" in lib):
        return ("barrier", "one-shot")
    if re.search(r"two[_ -]?shot", alg) and ("symmetric" in lib or "triton" in lib or "helion" in lib):
        return ("barrier", "two-shot")
    if "custom allreduce" in lib or "custom_all_reduce" in lib:
        return "custom all-reduce chooses one-/two-shot by size internally; the variant per row is not stated"
    if not lib and not alg:
        return ("nccl", "")  # a bare nccl-tests log: NCCL, algorithm not stated
    if "nccl" in lib:
        return f"NCCL algorithm {algorithm!r} is not modelled"
    return f"implementation {library or '?'} {algorithm} is not modelled"


def _topology_for(row: Any, ranks: int | None, topology: str | None) -> tuple[str, str, str] | str:
    """``(preset, substitution note, gpu)`` or an unmapped reason."""
    explicit = _text(row.get("topology"))
    nodes = _int(row.get("nodes"))
    notes = _text(row.get("notes")).lower()
    if (nodes is not None and nodes > 1) or "multi-node" in notes or "mnnvl" in notes:
        return "multi-node run: collsim models one NVLink domain per node"
    gpu, _ = gpu_model(_text(row.get("gpu")))
    if explicit:
        preset, note = explicit, ""
    elif gpu in GPU_PRESETS:
        preset, note = GPU_PRESETS[gpu], ""
    elif gpu in SUBSTITUTIONS:
        preset, note = SUBSTITUTIONS[gpu]
    elif gpu.endswith("-PCIe"):
        return f"{gpu}: PCIe system, host topology unknown"
    elif gpu:
        return f"no topology preset for {gpu}"
    elif topology:
        preset, note = topology, ""
    else:
        return "GPU not stated (pass --topology)"
    if ranks is None:
        return "GPU count not stated"
    try:
        topo = _topology(preset)
    except Exception as err:  # noqa: BLE001 - reported as the reason
        return f"topology {preset!r} does not load: {getattr(err, 'message', err)}"
    if ranks > topo.num_gpus:
        return f"{ranks} ranks exceed {preset}'s {topo.num_gpus} GPUs"
    if ranks < 2:
        return "fewer than 2 ranks"
    return preset, note, gpu


def _nvls_mapping(fam: tuple[str, str], preset: str, substitution: str, ranks: int, algorithm: str, launch: str,
                  rule: str) -> RowMapping:
    """An NVLink SHARP row as nvls/``algorithm``, or unmapped when the preset's switches cannot run it."""
    fabric = _topology(preset).fabric
    if not (fabric.multicast and fabric.reduction):
        return _unmapped(fam, f"NVLS on {preset}, whose switches do not multicast and reduce")
    return RowMapping(fam[0], fam[1], True, rule=rule, substitution=substitution, topology=preset, ranks=ranks,
                      algorithm=algorithm, protocol="nvls", launch=launch)


def map_row(row: Any, *, topology: str | None = None) -> RowMapping:
    """Map one measurement row (a mapping or Series with the measurement columns)."""
    fam = family_of(row)
    notes = _text(row.get("notes")).lower()
    collective = _text(row.get("collective")) or "allreduce"
    if collective != "allreduce":
        return _unmapped(fam, f"collective {collective}: collsim models AllReduce")
    if bool(row.get("wrong")) and row.get("wrong") is not pd.NA:
        return _unmapped(fam, "the run's data check failed (#wrong > 0)")
    if "outlier" in notes and "as published" in notes:
        return _unmapped(fam, "the source marks this value as an outlier")
    if "do not use" in notes:
        return _unmapped(fam, "the source says not to use these numbers")
    if measured_time_us(row) is None:
        return _unmapped(fam, "no time")
    size = _int(row.get("size_bytes"))
    if not size or size <= 0:
        return _unmapped(fam, "no message size")
    timing = launch_of(row)
    if timing[0] == "":
        return _unmapped(fam, timing[1])
    launch, launch_rule = timing
    # implementation
    library = _text(row.get("library"))
    if "not confirmed" in library.lower() or "backend uncertain" in notes:
        return _unmapped(fam, "the library that ran is not confirmed")
    impl = _implementation(library, _algorithm_text(row))
    if isinstance(impl, str):
        return _unmapped(fam, impl)
    # hardware
    ranks = _int(row.get("ranks"))
    where = _topology_for(row, ranks, topology)
    if isinstance(where, str):
        return _unmapped(fam, where)
    preset, substitution, _gpu = where
    kind, what = impl
    if kind == "barrier":
        return RowMapping(fam[0], fam[1], True, rule=f"{what} with a signal-pad barrier = barrier/{what}; {launch_rule}",
                       substitution=substitution, topology=preset, ranks=ranks, algorithm=what,
                       protocol="barrier", launch=launch)
    if kind == "nvls":
        return _nvls_mapping(fam, preset, substitution, ranks, what, launch,
                             f"NVLink SHARP {what} = nvls/{what}; {launch_rule}")
    # NCCL
    algo_col = _algorithm_text(row).lower()
    # "Ring (NCCL_ALGO=Ring)", "ring (label 'nccl_ring')", "NCCL default (ring per harness naming)" name a ring;
    # "NCCL default (text: RING/LL up to 1MiB, NVLS/SIMPLE from 2MiB)" does not force one.
    forced_ring = "ring" in algo_col and (not algo_col.startswith("nccl default") or "harness" in algo_col)
    known_proto = known_protocol(row)
    if forced_ring and known_proto:
        return RowMapping(fam[0], fam[1], True, rule=f"NCCL ring/{known_proto} as stated; {launch_rule}",
                       substitution=substitution, topology=preset, ranks=ranks, algorithm="ring",
                       protocol=known_proto, launch=launch)
    candidates = ("ring",) if forced_ring else ("ring", "tree", "nvls")
    try:
        algo, proto, times = nccl_default_choice(preset, ranks, size, candidates)
    except Exception as err:  # noqa: BLE001 - an unmodellable system
        return _unmapped(fam, f"NCCL tuner rule not applicable: {getattr(err, 'message', err)}")
    if known_proto:  # NCCL_PROTO known, algorithm left to the tuner
        allowed = {k: v for k, v in times.items() if k.endswith("/" + known_proto)}
        algo, proto = min(allowed, key=allowed.__getitem__).split("/")
        if algo != "ring":
            return _unmapped(fam, f"NCCL's tuner would pick {algo.upper()}/{proto} at this size (not modelled)")
        return RowMapping(fam[0], fam[1], True, rule=f"NCCL_PROTO={known_proto}, tuner picks ring; {launch_rule}",
                       substitution=substitution, topology=preset, ranks=ranks, algorithm="ring",
                       protocol=known_proto, launch=launch)
    if algo == "nvls":
        return _nvls_mapping(fam, preset, substitution, ranks, "two-shot", launch,
                             f"NCCL default: the tuner picks NVLS, a multimem reduce-scatter and all-gather = "
                             f"nvls/two-shot; {launch_rule}")
    if algo != "ring":
        return _unmapped(fam, f"NCCL's tuner would pick {algo.upper()}/{proto} at this size (not modelled)")
    why = "ring as the source states" if forced_ring else "NCCL default"
    return RowMapping(fam[0], fam[1], True, rule=f"{why}: tuner's protocol for ring is {proto}; {launch_rule}",
                   substitution=substitution, topology=preset, ranks=ranks, algorithm="ring",
                   protocol=proto, launch=launch)


def map_measurements(table: pd.DataFrame, *, topology: str | None = None) -> pd.DataFrame:
    """``table`` with the columns :data:`MAPPED_COLUMNS` added (one :class:`RowMapping` per row).

    ``topology`` names the preset of rows that carry neither a topology nor
    a GPU name (``collsim calibrate --topology``).
    """
    out = table.copy().reset_index(drop=True)
    maps = [map_row(r, topology=topology) for r in out.to_dict("records")]
    out["family"] = [m.family for m in maps]
    out["family_label"] = [m.label for m in maps]
    out["mapped"] = [m.mapped for m in maps]
    out["reason"] = [m.reason for m in maps]
    out["rule"] = [m.rule for m in maps]
    out["substitution"] = [m.substitution for m in maps]
    out["m_topology"] = [m.topology for m in maps]
    out["m_ranks"] = [m.ranks for m in maps]
    out["m_algorithm"] = [m.algorithm for m in maps]
    out["m_protocol"] = [m.protocol for m in maps]
    out["m_launch"] = [m.launch for m in maps]
    out["measured_us"] = [measured_time_us(r) for r in out.to_dict("records")]
    return out
