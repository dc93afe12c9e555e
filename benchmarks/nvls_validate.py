"""Compare the NVLink SHARP protocols with every published NVLS measurement, and the LL128-atomic scaling claim.

Reads ``../shared/data/measured/allreduce_measured.csv`` (``--csv`` to point
elsewhere) through collsim's own ingest and mapping
(:mod:`collsim.calibrate.mapping`), keeps every row that is NVLS in the
source (NCCL_ALGO=NVLS/NVLSTree, NCCL's tuner choosing NVLS, multimem
kernels) and prints, per family, each row's simulated (des) and measured
time and the family's median absolute % error; rows that cannot be mapped
are listed with the reason. ``--scaling`` prints the 2 -> 8 rank growth at
64 KiB on hgx-h100 of ll one-shot against the atomic protocols, with the
critical-path time by operation kind that explains it.

Usage::

    python benchmarks/nvls_validate.py              # NVLS families (markdown)
    python benchmarks/nvls_validate.py --scaling    # also the LL128-atomic scaling table
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collsim import simulate  # noqa: E402
from collsim.calibrate.ingest import read_measurements  # noqa: E402
from collsim.calibrate.mapping import map_measurements  # noqa: E402

#: Sources whose harness is not the launch mode the measurement table records: S20 is kraken's
#: benchmark_with_event (CUDA events around each call, launches queued behind a GPU sleep, L2 flushed), the
#: ``events`` harness, as benchmarks/sim_validate.py maps its other families.
HARNESS = {"S20": "events"}  # by the source id that opens a family label

DEFAULT_CSV = ROOT.parent / "shared" / "data" / "measured" / "allreduce_measured.csv"
_NVLS = ("nvls", "multimem", "nvlink sharp")


def _is_nvls(row) -> bool:
    text = " ".join(str(row.get(k) or "") for k in ("algorithm", "library", "notes")).lower()
    return row.get("m_protocol") == "nvls" or any(k in text for k in _NVLS)


def nvls_families(csv: Path) -> None:
    table = map_measurements(read_measurements(csv))
    rows = [r for r in table.to_dict("records") if _is_nvls(r)]
    families: dict[str, list[dict]] = {}
    for r in rows:
        families.setdefault(r["family_label"], []).append(r)
    print("| family | mapped to | rows | median abs % | per row: size B, measured us, simulated us |")
    print("|---|---|---|---|---|")
    unmapped = []
    for label, members in sorted(families.items()):
        mapped = [r for r in members if r["mapped"] and r["m_protocol"] == "nvls"]
        elsewhere = [r for r in members if r["mapped"] and r["m_protocol"] != "nvls"]
        if elsewhere:
            unmapped.append((label, len(elsewhere), f"NCCL's tuner picks {elsewhere[0]['m_algorithm']}/"
                                                    f"{elsewhere[0]['m_protocol']} at these sizes"))
        rest = [r for r in members if not r["mapped"]]
        if rest:
            unmapped.append((label, len(rest), rest[0]["reason"]))
        if not mapped:
            continue
        cells, errors = [], []
        for r in mapped:
            launch = HARNESS.get(str(r["family_label"]).split()[0], r["m_launch"])
            sim = simulate(r["m_topology"], int(r["m_ranks"]), r["m_algorithm"], "nvls", int(r["size_bytes"]),
                           launch=launch, model="des").latency_us
            errors.append(abs(sim - r["measured_us"]) / r["measured_us"] * 100)
            cells.append(f"{int(r['size_bytes'])}: {r['measured_us']:.1f} / {sim:.1f}")
        first = mapped[0]
        launch = HARNESS.get(str(first["family_label"]).split()[0], first["m_launch"])
        where = f"nvls/{first['m_algorithm']} {first['m_topology']} x{int(first['m_ranks'])} {launch}"
        print(f"| {label} | {where} | {len(mapped)} | {statistics.median(errors):.0f} | {'; '.join(cells)} |")
    for label, n, reason in unmapped:
        print(f"| {label} | not compared: {reason} | {n} | | |")


def scaling() -> None:
    from collsim.models import SimRequest
    from collsim.sim.model import run_des
    from collsim.topology import load_topology
    from collsim.ir.registry import load_protocol

    topo = load_topology("hgx-h100")
    print("\n| protocol | 2 ranks us | 4 ranks us | 8 ranks us | growth 2->8 us | 8-rank critical path by kind |")
    print("|---|---|---|---|---|---|")
    for name in ("ll", "ll128", "atomic-counter", "ll128-atomic", "ll128-atomic-nvls", "nvls"):
        times = []
        for n in (2, 4, 8):
            times.append(simulate(topo, n, "one-shot", name, 65536, model="des").latency_us)
        run = run_des(SimRequest(topology=topo, ranks=8, algorithm="one-shot", protocol=load_protocol(name),
                                 size_bytes=65536))
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in run.breakdown.items())
        print(f"| {name} | {times[0]:.2f} | {times[1]:.2f} | {times[2]:.2f} | {times[2] - times[0]:+.2f} | {kinds} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--scaling", action="store_true", help="also print the LL128-atomic scaling table")
    args = parser.parse_args()
    if not args.csv.exists():
        sys.exit(f"nvls_validate: no measurements at {args.csv}")
    nvls_families(args.csv)
    if args.scaling:
        scaling()


if __name__ == "__main__":
    main()
