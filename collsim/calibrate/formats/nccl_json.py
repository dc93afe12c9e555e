"""nccl-tests JSON output (``-J``/``--output_file``, nccl-tests ≥ 2.17.3).

Layout, as nccl-tests' ``src/util.cu`` writes it (one line, no pretty print):
``version``, ``start_time``, ``args`` (argv), ``env`` (``KEY=value`` list),
``nccl_version`` (``NCCL_VERSION_CODE``), ``config`` {``nthreads``, ``ngpus``,
``minimum_bytes``, ``maximum_bytes``, ``step_factor`` | ``step_bytes``,
``warmup_iters``, ``iterations``, ``aggregated_iterations``, ``validation``,
``graph``, ``blocking_collectives``, ``parallel_init``, …, ``devices`` [one per
*process*: ``rank``, ``group``, ``pid``, ``hostname``, ``device``,
``device_hex``, ``device_info``]} (``devices`` is also accepted at the top
level), ``results`` [{``size``, ``count``, ``type``, ``redop``, ``root``
(a string, ``"    -1"``), ``out_of_place`` and ``in_place`` {``time`` |
``cpu_time``, ``alg_bw``, ``bus_bw``, ``nwrong`` (``null`` when not
checked)}, ``actual_iterations``, ``experiment_name``}], ``out_of_bounds``
{``count``, ``okay``}, ``average_bus_bandwidth`` {``bandwidth``, ``okay``}
(early versions spell it ``average_bus_bandwidith``/``bandwidith``),
``errors`` [str], ``end_time``. Doubles that are NaN are written ``"nan"``;
booleans as the strings ``"true"``/``"false"``.

A run that crashes leaves the file unterminated: the results written so far
are recovered and marked ``truncated``.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import PurePath
from typing import Any

from collsim.calibrate.formats.common import (
    collective_candidates,
    collective_from_filename,
    decode_nccl_version_code,
    program_mentions,
)
from collsim.calibrate.measurements import canonical_algorithm, canonical_dtype, canonical_protocol
from collsim.errors import InputError

__all__ = ["parse_json"]


_RESULTS_KEY = re.compile(r'"results"\s*:\s*\[')


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _salvage(text: str, path: str) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]], bool]:
    """Parse a possibly unterminated document: (top-level object, [(line, result)], complete)."""
    decoder = json.JSONDecoder()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    found = _RESULTS_KEY.search(text)
    key = found.start() if found else -1
    results: list[tuple[int, dict[str, Any]]] = []
    if doc is not None:
        if not isinstance(doc, dict):
            raise InputError("JSON is not nccl-tests output (top level is not an object)", file=path, line=1)
        # line numbers of each result object
        if key >= 0 and isinstance(doc.get("results"), list):
            pos = text.find("[", key) + 1
            for item in doc["results"]:
                while pos < len(text) and text[pos] in " \t\r\n,":
                    pos += 1
                try:
                    _, end = decoder.raw_decode(text, pos)
                except json.JSONDecodeError:
                    end = pos
                results.append((_line_of(text, pos), item))
                pos = end
        return doc, results, True
    # unterminated: the head up to "results", then result objects one by one
    if key < 0:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg})", file=path, line=exc.lineno) from None
    head_text = text[:key].rstrip().rstrip(",") + "}"
    try:
        head = json.loads(head_text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", file=path, line=exc.lineno) from None
    if not isinstance(head, dict):
        raise InputError("JSON is not nccl-tests output (top level is not an object)", file=path, line=1)
    pos = text.find("[", key)
    if pos < 0:
        return head, results, False
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            item, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        if isinstance(item, dict):
            results.append((_line_of(text, pos), item))
        pos = end
    return head, results, False


def parse_json(text: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    """Parse nccl-tests JSON output; see the module docstring."""
    warnings: list[str] = []

    def warn(line: int | None, message: str) -> None:
        warnings.append(f"{path}:{line}: {message}" if line else f"{path}: {message}")

    doc, results, complete = _salvage(text, path)
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    if not config and "results" not in doc and not results:
        raise InputError("JSON is not nccl-tests output: no 'config' or 'results'", file=path, line=1)
    devices = doc.get("devices")
    if not isinstance(devices, list):
        devices = config.get("devices") if isinstance(config.get("devices"), list) else []
    args = [str(a) for a in doc.get("args", []) if isinstance(a, (str, int, float))]
    env = [str(e) for e in doc.get("env", []) if isinstance(e, str)]
    nthreads = int(_num(config.get("nthreads")) or 1)
    ngpus = int(_num(config.get("ngpus")) or 1)
    # devices holds one entry per process (its first rank line)
    ranks = len(devices) * nthreads * ngpus if devices else None
    hosts: list[str] = []
    gpus: list[str] = []
    for d in devices:
        if not isinstance(d, dict):
            continue
        h, g = str(d.get("hostname", "")).strip(), str(d.get("device_info", "")).strip()
        if h and h not in hosts:
            hosts.append(h)
        if g and g not in gpus:
            gpus.append(g)
    nv = doc.get("nccl_version")
    nccl_version = ""
    if isinstance(nv, (int, float)) and not isinstance(nv, bool):
        nccl_version = decode_nccl_version_code(int(nv))
    elif isinstance(nv, str):
        nccl_version = nv
    proto = algo = ""
    for e in env:
        k, _, v = e.partition("=")
        if k == "NCCL_PROTO":
            proto = canonical_protocol(v)
        elif k == "NCCL_ALGO":
            algo = canonical_algorithm(v)
    # collective: argv[0], -t, then the file name
    collective, how = "", ""
    if args:
        names = program_mentions(PurePath(args[0]).name) or program_mentions(" ".join(args))
        if names:
            collective, how = names[0], "args"
    if not collective:
        collective = collective_from_filename(path)
        how = "file name" if collective else ""
    graph = _num(config.get("graph"))
    validation = _num(config.get("validation"))
    oob = doc.get("out_of_bounds") if isinstance(doc.get("out_of_bounds"), dict) else {}
    avg_obj = doc.get("average_bus_bandwidth") or doc.get("average_bus_bandwidith") or {}
    avg = _num(avg_obj.get("bandwidth", avg_obj.get("bandwidith"))) if isinstance(avg_obj, dict) else None
    errors = [str(e) for e in doc.get("errors", []) if e]
    rows: list[dict[str, Any]] = []
    for line, res in results:
        if not isinstance(res, dict):
            continue
        try:
            size = int(_num(res.get("size")))  # type: ignore[arg-type]
            count = _num(res.get("count"))
        except (TypeError, ValueError):
            warn(line, "result without a numeric 'size': skipped")
            continue
        root_v = _num(res.get("root"))
        redop = str(res.get("redop", "") or "").strip().lower()
        dtype = canonical_dtype(str(res.get("type", "") or ""))
        row: dict[str, Any] = {
            "source": path,
            "source_line": line,
            "source_format": "nccl-tests-json",
            "section": 0,
            "gpu": ", ".join(gpus),
            "ranks": ranks,
            "nodes": len(hosts) if hosts else None,
            "collective": collective,
            "algorithm": algo,
            "protocol": proto,
            "library": "NCCL",
            "library_version": nccl_version,
            "dtype": dtype,
            "redop": "" if redop in ("none", "") else redop,
            "root": None if root_v is None else int(root_v),
            "size_bytes": size,
            "count": None if count is None else int(count),
            "launch": "" if graph is None else ("graph" if graph > 0 else "eager"),
            "graph_launches": None if graph is None else int(graph),
            "validation": None if validation is None else validation > 0,
            "truncated": not complete,
            "notes": "",
        }
        bad = []
        for key, suffix, label in (("out_of_place", "", "out-of-place"), ("in_place", "_inplace", "in-place")):
            part = res.get(key)
            if not isinstance(part, dict):
                continue
            t = part.get("time", part.get("cpu_time"))
            if "cpu_time" in part and "time" not in part:
                row["notes"] = "cputime"
            tv = _num(t)
            row[f"time_us{suffix}"] = tv  # a NaN time stays NaN (not absent): ingest leaves such rows out
            row[f"algbw_gbps{suffix}"] = _num(part.get("alg_bw"))
            row[f"busbw_gbps{suffix}"] = _num(part.get("bus_bw"))
            nw = _num(part.get("nwrong"))
            row[f"nwrong{suffix}"] = None if nw is None or math.isnan(nw) else int(round(nw))
            if row[f"nwrong{suffix}"]:
                bad.append(f"#wrong={row[f'nwrong{suffix}']} ({label})")
        row["wrong"] = bool(bad)
        if bad:
            row["notes"] = "; ".join(x for x in (row["notes"], *bad) if x)
        if bad:
            warn(line, f"size {size}: {', '.join(bad)}: row flagged wrong (excluded by default)")
        rows.append(row)
    if not collective and rows:
        cands = collective_candidates(rows, ranks, has_redop=True, has_root=True)
        if cands and len(cands) == 1:
            collective, how = next(iter(cands)), "table shape"
            for r in rows:
                r["collective"] = collective
        else:
            warn(None, "cannot tell which collective the results measure; collective left empty "
                       "(name it with --collective)")
    if not complete:
        last = results[-1][0] if results else _line_of(text, len(text))
        warn(last, f"the JSON output ends early (run truncated or crashed) after {len(rows)} result(s); "
                   "rows kept and marked truncated")
    for e in errors:
        warn(None, f"nccl-tests reports an error: {e}")
    oob_count = _num(oob.get("count"))
    if oob_count:
        warn(None, f"nccl-tests reports {int(oob_count)} out-of-bounds (wrong) result(s)")
    meta = {
        "format": "nccl-tests-json",
        "era": "json",
        "json_version": doc.get("version"),
        "program": PurePath(args[0]).name if args else "",
        "args": args,
        "collective": collective,
        "collective_from": how,
        "gpus": gpus,
        "gpu": ", ".join(gpus),
        "ranks": ranks,
        "nodes": len(hosts) if hosts else None,
        "hostnames": hosts,
        "library": "NCCL",
        "nccl_version": nccl_version,
        "nccl_tests_version": "",
        "protocol": proto,
        "algorithm": algo,
        "graph": None if graph is None else int(graph),
        "launch": "" if graph is None else ("graph" if graph > 0 else "eager"),
        "validation": None if validation is None else validation > 0,
        "nthreads": nthreads,
        "ngpus": ngpus,
        "min_bytes": config.get("minimum_bytes"),
        "max_bytes": config.get("maximum_bytes"),
        "warmup_iters": config.get("warmup_iters"),
        "iters": config.get("iterations"),
        "agg_iters": config.get("aggregated_iterations"),
        "avg_busbw": avg,
        "out_of_bounds": None if oob_count is None else int(oob_count),
        "truncated": not complete,
        "failure": errors[0] if errors else None,
        "rows": len(rows),
        "wrong_rows": sum(1 for r in rows if r["wrong"]),
        "time_unit": "us",
        "start_time": doc.get("start_time"),
        "end_time": doc.get("end_time"),
    }
    return rows, meta, warnings
