"""What a scanned file says about each run: ranks, GPUs, hosts, library versions, the collective, launch
mode, time unit and whether it was cut off, put on every measurement row with the data-check verdicts."""
from __future__ import annotations

import math
from typing import Any

from collsim.calibrate.formats.common import (
    REDUCTION_OPS,
    collective_candidates,
    collective_from_filename,
    implied_time_unit,
    program_mentions,
    tolerance,
)
from collsim.calibrate.formats.nccl_text.recognise import UNIT_TO_US
from collsim.calibrate.formats.nccl_text.scanner import StreamScanner
from collsim.calibrate.formats.nccl_text.section import Section
from collsim.calibrate.measurements import (
    canonical_algorithm,
    canonical_dtype,
    canonical_protocol,
)
from collsim.errors import InputError

__all__ = ["Inference"]


class Inference:
    """Turns a scanned file's sections into measurement rows and file metadata (see :meth:`finish`).

    Warnings go to the scanner's list, after the ones scanning made.
    """

    def __init__(self, scan: StreamScanner) -> None:
        self.path = scan.path
        self.lines = scan.lines
        self.sections = scan.sections
        self.info = scan.info
        self.first_text_line = scan.first_text_line
        self.warn = scan.warn
        self.protocol = ""
        self.algorithm = ""

    def finish(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Every section's rows (with the run's facts on each) and the file's metadata."""
        # rank lines printed by other processes (old nccl-tests printed them from
        # every rank; with --tag-output they land on other streams) join the
        # first table that follows them
        tables = [s for s in self.sections if s.has_table]
        for orphan in [s for s in self.sections if s.ranks and not s.has_table and not s.banner
                       and not s.tests_version and tables]:
            host = next((t for t in tables if t.stream != orphan.stream and t.columns and t.columns.line > orphan.start),
                        None)
            if host is None:
                continue
            have = {r["rank"] for r in host.ranks}
            host.ranks.extend(r for r in orphan.ranks if r["rank"] not in have)
            host.ranks.sort(key=lambda r: r["rank"])
            orphan.ranks = []
        sections = [s for s in self.sections if s.has_table or s.banner or s.ranks or s.tests_version]
        if not sections:
            raise InputError(
                "not nccl-tests output: no result table header (# size count type … time algbw busbw) "
                "and no nccl-tests banner (# nThread …) found",
                file=self.path, line=self.first_text_line)
        out_rows: list[dict[str, Any]] = []
        sec_metas: list[dict[str, Any]] = []
        single = len([s for s in sections if s.has_table]) <= 1
        self.protocol = self._pick(self.info["protocol"], "protocol")
        self.algorithm = self._pick(self.info["algorithm"], "algorithm")
        for index, sec in enumerate(sections):
            meta = self._section_meta(sec, index, single)
            rows = self._section_rows(sec, meta, index)
            meta["rows"] = len(rows)
            out_rows.extend(rows)
            sec_metas.append(meta)
        # file-level meta: the first section with rows, else the first
        main = next((m for m in sec_metas if m["rows"]), sec_metas[0])
        meta = dict(main)
        meta["sections"] = sec_metas
        meta["rows"] = len(out_rows)
        meta["truncated"] = any(m["truncated"] for m in sec_metas)
        meta["wrong_rows"] = sum(1 for r in out_rows if r["wrong"])
        failures = [m["failure"] for m in sec_metas if m.get("failure")]
        meta["failure"] = failures[0] if failures else None
        return out_rows, meta

    def _pick(self, values: list[tuple[int, str]], kind: str) -> str:
        if not values:
            return ""
        canon = [(no, canonical_protocol(v) if kind == "protocol" else canonical_algorithm(v)) for no, v in values]
        distinct = sorted({v for _, v in canon})
        if len(distinct) > 1:
            self.warn(canon[-1][0], f"NCCL_{'PROTO' if kind == 'protocol' else 'ALGO'} is set more than once "
                                    f"({', '.join(distinct)}); using the last, {canon[-1][1]!r}")
        return canon[-1][1]

    def _section_meta(self, sec: Section, index: int, single: bool) -> dict[str, Any]:
        parent = sec.parent
        cols = sec.columns
        banner = sec.banner or (parent.banner if parent is not None else {})
        ranks_list = sec.ranks or (parent.ranks if parent is not None else [])
        era = cols.era if cols else ("nccl-tests-2.13+" if banner.get("graph") is not None else "")
        if sec.nccl1_ranks or (parent is not None and parent.nccl1_ranks):
            era = "nccl1"
        elif era == "nccl-tests-v1" and not banner and not ranks_list:
            era = "nccl1"
        if sec.tests_version:
            era = "nccl-tests-" + sec.tests_version
        # ranks, GPUs, hosts
        ranks: int | None = None
        if ranks_list:
            ids = {r["rank"] for r in ranks_list}
            ranks = max(len(ids), max(ids) + 1)
            if sec.ranks_cut:
                expected = banner.get("nThread", 1) * banner.get("nGpus", 1)
                ranks = max(ranks, expected)
                self.warn(sec.start, "the rank list is cut off ('...'): rank count may be low")
        elif self.info["nranks"]:
            ranks = max(self.info["nranks"])
        elif banner.get("nGpus") is not None:
            # nThread × nGpus per process; processes as mpirun --tag-output numbers them
            procs = len({ln.stream for ln in self.lines if ln.stream.startswith("rank")}) or 1
            ranks = banner.get("nThread", 1) * banner["nGpus"] * procs
            self.warn(sec.banner_line, f"no rank lines: ranks = nThread×nGpus×processes = {ranks}"
                                       + ("" if procs > 1 else " (assumes one process)"))
        gpus: list[str] = []
        hosts: list[str] = []
        for r in ranks_list:
            if r["name"] and r["name"] not in gpus:
                gpus.append(r["name"])
            if r["host"] and r["host"] not in hosts:
                hosts.append(r["host"])
        if hosts:
            nodes: int | None = len(hosts)
        elif era == "nccl1" and ranks_list:
            nodes = 1  # NCCL 1.x tests are single-process
        elif self.info["nnodes"]:
            nodes = max(self.info["nnodes"])
        else:
            nodes = None
        # versions
        lib, lib_version = sec.library, sec.library_version
        if not lib_version and self.info["nccl_version"]:
            # the last version line before this table (same stream first), else the first one at all
            limit = cols.line if cols else sec.end
            versions = self.info["nccl_version"]
            before = [v for v in versions if v[0] <= limit]
            same = [v for v in before if v[1] == sec.stream]
            _, _, lib, lib_version = (same or before)[-1] if (same or before) else versions[0]
        if not lib_version and sec.library_code_version:
            lib_version = sec.library_code_version
        if not lib and parent is not None:
            lib, lib_version = parent.library, parent.library_version
        lib = lib or "NCCL"
        # collective
        collective, how = self._collective(sec, single)
        graph = banner.get("graph")
        if graph is not None:
            launch = "graph" if graph > 0 else "eager"
        elif banner or era in ("nccl1", "nccl-tests-v1"):
            launch, graph = "eager", 0
        else:
            launch = ""
        validation = banner.get("validation")
        failure = self._failure(sec)
        # a run is cut off when its footer never came; NCCL 1.x tests and rows
        # pasted without a header have no footer to wait for, so only a
        # failure line or a cut-off row marks them
        footerless = era == "nccl1" or (cols is not None and cols.synthetic)
        truncated = (sec.footer_line is None and not sec.concluded and not footerless) or (
            footerless and failure is not None)
        return {
            "section": index,
            "stream": sec.stream,
            "format": "nccl-tests-text",
            "era": era,
            "program": sec.program,
            "collective": collective,
            "collective_from": how,
            "gpus": gpus,
            "gpu": ", ".join(gpus),
            "gpu_count": len(ranks_list) or None,
            "ranks": ranks,
            "nodes": nodes,
            "hostnames": hosts,
            "library": lib,
            "nccl_version": lib_version,
            "nccl_tests_version": sec.tests_version or (parent.tests_version if parent is not None else ""),
            "protocol": self.protocol,
            "algorithm": self.algorithm,
            "graph": graph,
            "launch": launch,
            "validation": None if validation is None else validation > 0,
            "cputime": bool(cols and cols.cputime),
            "nthreads": banner.get("nThread"),
            "ngpus": banner.get("nGpus"),
            "min_bytes": banner.get("minBytes"),
            "max_bytes": banner.get("maxBytes"),
            "step": banner.get("step"),
            "warmup_iters": banner.get("warmup"),
            "iters": banner.get("iters"),
            "agg_iters": banner.get("agg"),
            "avg_busbw": sec.avg,
            "out_of_bounds": sec.oob,
            "header_line": cols.line if cols else None,
            "footer_line": sec.footer_line,
            "truncated": truncated,
            "failure": failure[1] if failure else None,
            "failure_line": failure[0] if failure else None,
        }

    def _failure(self, sec: Section) -> tuple[int, str] | None:
        lo = sec.start
        hi = sec.end if sec.footer_line is None else sec.footer_line
        found = [(no, text) for no, stream, text in self.info["failures"] if lo <= no and (sec.footer_line is None or no <= hi)]
        if sec.footer_line is None:
            # a crash may print on another stream (stderr of another rank, mpirun)
            found = [(no, text) for no, stream, text in self.info["failures"] if no >= lo]
        if not found:
            return None
        tests = [f for f in found if "Test" in f[1] and "failure" in f[1]]
        return (tests or found)[0]

    def _collective(self, sec: Section, single: bool) -> tuple[str, str]:
        if sec.program:
            name = program_mentions(sec.program + "_perf") or program_mentions(sec.program)
            if name:
                return name[0], "program"
        mentions = self.info["mentions"]
        end = sec.end if sec.end else 10**12
        top = sec.columns.line if sec.columns else end
        # the nearest mention before this table that no other table of the
        # same stream started after (the command line of this run) ...
        starts = [s.start for s in self.sections if s is not sec and s.stream == sec.stream and s.start < sec.start]
        floor = max(starts) if starts else 0
        before = [name for no, name in mentions if floor < no <= top]
        if before:
            return before[-1], "command line"
        # ... else one inside it (a failure backtrace names its source file)
        inside = [name for no, name in mentions if sec.start <= no <= end]
        if inside:
            return inside[0], "command line"
        if single and mentions:
            return mentions[0][1], "command line"
        name = collective_from_filename(self.path)
        if name:
            return name, "file name"
        return "", ""

    def _section_rows(self, sec: Section, meta: dict[str, Any], index: int) -> list[dict[str, Any]]:
        cols = sec.columns
        if cols is None:
            if meta["truncated"]:
                msg = "the run ended before its result table"
                if meta["failure"]:
                    msg += f" (line {meta['failure_line']}: {meta['failure']})"
                self.warn(sec.start, msg + ": no rows")
            return []
        raw = sec.rows
        # time unit
        unit = self._time_unit(sec, meta)
        to_us = UNIT_TO_US[unit]
        meta["time_unit"] = unit
        ranks = meta["ranks"]
        nccl1 = meta["era"] == "nccl1"
        rows_out: list[dict[str, Any]] = []
        for r in raw:
            dtype = canonical_dtype(r.get("dtype_raw", ""))
            redop_raw = (r.get("redop_raw") or "").lower()
            redop = "" if redop_raw in ("none", "-", "") else redop_raw
            row: dict[str, Any] = {
                "source": self.path,
                "source_line": r["_line"],
                "source_format": "nccl-tests-text",
                "section": index,
                "gpu": meta["gpu"],
                "ranks": ranks,
                "nodes": meta["nodes"],
                "collective": meta["collective"],
                "algorithm": meta["algorithm"],
                "protocol": meta["protocol"],
                "library": meta["library"],
                "library_version": meta["nccl_version"],
                "nccl_tests_version": meta["nccl_tests_version"],
                "dtype": dtype,
                "redop": redop,
                "root": r.get("root"),
                "size_bytes": r.get("size_bytes"),
                "count": r.get("count"),
                "launch": meta["launch"],
                "graph_launches": meta["graph"],
                "truncated": meta["truncated"] or r.get("_partial", False),
                "notes": "cputime" if meta["cputime"] else "",
            }
            reduction = redop in REDUCTION_OPS
            wrong_bits = []
            any_checked = False
            for place, suffix in (("oop", ""), ("ip", "_inplace")):
                t = r.get(f"time_{place}")
                # a NaN time stays NaN (not absent): ingest leaves such rows out and says so
                row[f"time_us{suffix}"] = None if t is None else t if math.isnan(t) else (
                    round(t * to_us, 6) if to_us != 1.0 else t)
                alg, bus = r.get(f"algbw_{place}"), r.get(f"busbw_{place}")
                row[f"algbw_gbps{suffix}"] = None if alg is None else alg * sec.bw_scale
                row[f"busbw_gbps{suffix}"] = None if bus is None else bus * sec.bw_scale
                nw = r.get(f"nwrong_{place}")
                row[f"nwrong{suffix}"] = None if nw is None or math.isnan(nw) else int(round(nw))
                err = r.get(f"error_{place}")
                row[f"max_error{suffix}"] = None if err is None or math.isnan(err) else err
                if row[f"nwrong{suffix}"] is not None:
                    any_checked = True
                    if row[f"nwrong{suffix}"] > 0:
                        wrong_bits.append(f"#wrong={row[f'nwrong{suffix}']} ({'out-of-place' if place == 'oop' else 'in-place'})")
                if row[f"max_error{suffix}"] is not None:
                    any_checked = True
                    tol = tolerance(dtype, ranks, reduction=reduction, nccl1=nccl1)
                    if err is not None and err > tol:
                        wrong_bits.append(f"error={err:g} > {tol:g} ({'out-of-place' if place == 'oop' else 'in-place'})")
            validation = meta["validation"]
            row["validation"] = validation if validation is not None else (True if any_checked else None)
            row["wrong"] = bool(wrong_bits)
            if wrong_bits:
                row["notes"] = "; ".join(x for x in (row["notes"], *wrong_bits) if x)
                self.warn(r["_line"], f"size {row['size_bytes']}: {', '.join(wrong_bits)}: "
                                      "row flagged wrong (excluded by default)")
            rows_out.append(row)
        self._check_collective(sec, meta, rows_out)
        for row in rows_out:
            row["collective"] = meta["collective"]
        if meta["truncated"]:
            msg = f"the run ended before its footer after {len(rows_out)} row(s)"
            if meta["failure"]:
                msg += f" (line {meta['failure_line']}: {meta['failure']})"
            last = raw[-1]["_line"] if raw else cols.line
            self.warn(last, msg + ("; rows kept and marked truncated" if rows_out else ": no rows"))
        elif meta["failure"]:
            self.warn(meta["failure_line"], f"failure reported: {meta['failure']}")
        if sec.oob_failed:
            self.warn(sec.footer_line, f"nccl-tests reports {sec.oob} out-of-bounds (wrong) result(s)")
        if sec.avg_failed:
            self.warn(sec.footer_line, "nccl-tests reports the average bus bandwidth check FAILED")
        return rows_out

    def _time_unit(self, sec: Section, meta: dict[str, Any]) -> str:
        cols = sec.columns
        assert cols is not None
        declared = {u for u, _ in sec.units}
        if len(declared) > 1:
            line = sec.units[0][1]
            raise InputError("inconsistent units: the column header gives times in "
                             + " and ".join(sorted(declared)), file=self.path, line=line)
        if declared:
            assumed = next(iter(declared))
        elif cols.era == "nccl-tests-v1" or meta["era"] == "nccl1":
            assumed = "ms"
        else:
            assumed = "us"
        fits: dict[str, str | None] = {}
        for place in ("oop", "ip"):
            points = [(r.get("size_bytes") or 0, r.get(f"time_{place}"),
                       None if r.get(f"algbw_{place}") is None else r[f"algbw_{place}"] * sec.bw_scale)
                      for r in sec.rows]
            fit, ratio = implied_time_unit(points)
            if ratio is None:
                continue
            fits[place] = fit
            if fit is None:
                self.warn(cols.line, f"algbw disagrees with size/time by a factor of {ratio:.3g} "
                                     f"({'out-of-place' if place == 'oop' else 'in-place'}); times kept as {assumed}")
        found = {f for f in fits.values() if f is not None}
        if len(found) > 1:
            raise InputError("inconsistent units: out-of-place times fit " + str(fits.get("oop"))
                             + " but in-place times fit " + str(fits.get("ip")),
                             file=self.path, line=sec.rows[0]["_line"] if sec.rows else cols.line)
        if found:
            data_unit = next(iter(found))
            if data_unit != assumed:
                if declared:
                    raise InputError(
                        f"inconsistent units: the header gives times in {assumed} but size/time "
                        f"matches algbw only with times in {data_unit}",
                        file=self.path, line=sec.units[0][1])
                self.warn(cols.line, f"times read as {data_unit} (size/time matches algbw), not {assumed}")
                return data_unit
        return assumed

    def _check_collective(self, sec: Section, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        cols = sec.columns
        assert cols is not None
        empty = cols.has_redop and all(not r.get("redop_raw") for r in sec.rows)
        cands = collective_candidates(rows, meta["ranks"], has_redop=cols.has_redop, has_root=cols.has_root,
                                      empty_redop=empty)
        name = meta["collective"]
        line = cols.line
        if name:
            if cands is not None and name not in cands and cands:
                self.warn(line, f"the table looks like {' or '.join(sorted(cands))} (redop/root/size/busbw), "
                                f"not {name} (from the {meta['collective_from']}); kept {name}")
            return
        if cands and len(cands) == 1:
            meta["collective"] = next(iter(cands))
            meta["collective_from"] = "table shape"
            return
        choices = " or ".join(sorted(cands)) if cands else "unknown"
        self.warn(line, f"cannot tell which collective this table measures ({choices}); "
                        "collective left empty (name it with --collective)")
