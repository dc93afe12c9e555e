"""CPU time of ``collsim verify`` per protocol and bound (ptx, every re-check), and whether anything is unknown.

Each case runs in a fresh interpreter, so nothing a previous case left in z3 changes it. Two CPU figures
(user + system) are reported, since wall time on a shared machine says more about the neighbours than about
the verifier: ``verify`` is the CPU of the :func:`collsim.verify.verify` call (lowering, encoding, every
solver call, counterexamples), ``process`` the whole interpreter's, imports included (what ``/usr/bin/time
collsim verify ...`` shows). A case reports the verdict of every property and of
every re-check (without each assumption, without the data domain): ``proves`` means every property of the
protocol as declared holds and nothing anywhere is unknown.

Usage::

    python benchmarks/verify_perf.py                          # the six original protocols at 4x3
    python benchmarks/verify_perf.py --bounds 4x3 8x3 --nvls  # also the NVLS protocols, also 8x3
    python benchmarks/verify_perf.py --protocols ll sentinel --bounds 8x3 --algorithm ring
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ORIGINAL = ["barrier", "simple", "ll", "ll128", "sentinel", "atomic-counter"]
NVLS = ["nvls", "nvls-poison", "ll128-atomic", "ll128-atomic-nvls"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: the child: verify one case and print its result with the CPU the call took
_CHILD = """
import json, sys, time
from collsim.verify.verifier import verify
a = json.loads(sys.argv[1])
t0 = time.process_time()
r = verify(a["protocol"], a["algorithm"], ranks=a["ranks"], iterations=a["iterations"], timeout=a["timeout"],
           use_cache=False)
print(json.dumps({"verify_cpu": time.process_time() - t0, "result": r.to_json()}))
"""


def run_case(protocol: str, ranks: int, iterations: int, algorithm: str | None, timeout: float,
             cap: float | None = None) -> dict:
    """One verification in a fresh interpreter: its CPU seconds (the call, the process), wall seconds, verdicts."""
    spec = {"protocol": protocol, "algorithm": algorithm, "ranks": ranks, "iterations": iterations,
            "timeout": timeout}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=cap)
    except subprocess.TimeoutExpired:  # the child is killed: its CPU is not in our children's usage
        return {"protocol": protocol, "bound": f"{ranks}x{iterations}", "algorithm": algorithm or "-",
                "verify_cpu_s": float("nan"), "process_cpu_s": float("nan"),
                "wall_s": round(time.perf_counter() - wall0, 2), "status": None,
                "verdict": f"did not finish in {cap:g} s wall"}
    cpu, wall = _children_cpu() - cpu0, time.perf_counter() - wall0
    case = {"protocol": protocol, "bound": f"{ranks}x{iterations}", "process_cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2), "status": proc.returncode}
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        case.update(algorithm=algorithm or "-", verify_cpu_s=float("nan"), verdict="error",
                    detail=(proc.stderr.strip().splitlines() or ["?"])[-1])
        return case
    data = out["result"]
    main = {p: r["status"] for p, r in data["properties"].items()}
    rechecks = [r["status"] for d in data.get("dependencies", []) for r in d["results"].values()]
    unknown = [p for p, s in main.items() if s == "unknown"] + (["re-check"] if "unknown" in rechecks else [])
    violated = [p for p, s in main.items() if s == "violated"]
    verdict = "unknown" if unknown else "violated" if violated else "proves"
    case.update(algorithm=data["algorithm"], verify_cpu_s=round(out["verify_cpu"], 2), verdict=verdict,
                unknown=unknown, violated=violated)
    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--protocols", nargs="+", default=None, help="protocols (default: the six original)")
    parser.add_argument("--nvls", action="store_true", help="also the NVLS protocols")
    parser.add_argument("--bounds", nargs="+", default=["4x3"], help="RANKSxLAUNCHES, e.g. 4x3 8x3")
    parser.add_argument("--algorithm", default=None, help="algorithm (default: each protocol's first)")
    parser.add_argument("--timeout", type=float, default=300.0, help="solver limit per property, seconds")
    parser.add_argument("--cap", type=float, default=None, help="stop a case after this many wall seconds")
    parser.add_argument("--json", dest="json_out", default=None, help="also write the cases to this file")
    args = parser.parse_args(argv)
    protocols = list(args.protocols or ORIGINAL) + (NVLS if args.nvls else [])
    bounds = [tuple(int(x) for x in b.lower().split("x")) for b in args.bounds]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {os.cpu_count()} CPUs ({_cpu_model()}), "
          f"Python {platform.python_version()}; CPU = user + system seconds")
    print("| protocol | algorithm | bound | verify CPU s | process CPU s | wall s | verdict |")
    print("|---|---|---|---:|---:|---:|---|")
    cases = []
    for ranks, iterations in bounds:
        total = [0.0, 0.0]
        for protocol in protocols:
            case = run_case(protocol, ranks, iterations, args.algorithm, args.timeout, args.cap)
            cases.append(case)
            total[0] += case["verify_cpu_s"] if case["verify_cpu_s"] == case["verify_cpu_s"] else 0.0
            total[1] += case["process_cpu_s"] if case["process_cpu_s"] == case["process_cpu_s"] else 0.0
            extra = ", ".join(case.get("unknown") or case.get("violated") or []) or case.get("detail", "")
            print(f"| {protocol} | {case['algorithm']} | {ranks}x{iterations} | {case['verify_cpu_s']:.1f} | "
                  f"{case['process_cpu_s']:.1f} | {case['wall_s']:.1f} | "
                  f"{case['verdict']}{' (' + extra + ')' if extra else ''} |", flush=True)
        print(f"| all | | {ranks}x{iterations} | {total[0]:.1f} | {total[1]:.1f} | | |", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(cases, indent=2) + "\n")
    return 0 if all(c["verdict"] == "proves" for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
