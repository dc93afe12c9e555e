"""How long ``collsim tune`` takes after the run: the NCCL tuner config and the decision tables.

Runs a scenario once (default scenarios/8gpu.yaml, its own model) into a
temporary directory, then times, ``--repeats`` times each:

* ``decide``: from the results table in memory to the three texts (timings,
  config, Markdown and JSON tables), what ``collsim tune SCENARIO`` does
  after its run before writing;
* ``read+decide+write``: reading results.json, deciding and writing the
  three files atomically, what ``collsim tune results.json`` does;
* ``cli``: ``collsim tune results.json -q`` as a fresh process (imports
  included; wall time).

CPU seconds (``time.process_time``) for the first two (the 2-core test
machines are shared, so wall time there is noisy), wall seconds for the
third; the median and the slowest of the repeats; the reference loop
(:mod:`reference`) before and after.

    python benchmarks/tune_files.py [SCENARIO] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reference import reference_loop_s  # noqa: E402 - benchmarks/, the script's own directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", default="scenarios/8gpu.yaml")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from collsim import run_scenario
    from collsim.resultsfile import load_results
    from collsim.tune import build_config, build_table, from_results
    from collsim.tune.files import default_names, write_files

    print(f"reference loop {reference_loop_s():.2f} s")
    out = Path(tempfile.mkdtemp(prefix="tune-bench-"))
    t0 = time.perf_counter()
    df = run_scenario(args.scenario, out=out, report=False)
    print(f"{args.scenario}: {len(df)} rows, model {df.attrs['model']}, run {time.perf_counter() - t0:.2f} s wall")
    frame, meta = load_results(out / "results.json")

    def decide(frame, meta):
        timings = from_results(frame, meta)
        table = build_table(timings)
        return build_config(timings).text(), table.to_markdown(), table.to_json()

    def full():
        f, m = load_results(out / "results.json")
        texts = decide(f, m)
        names = default_names()
        write_files({out / names[key]: text for key, text in zip(("config", "markdown", "json"), texts)})

    def cpu(fn) -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start

    def wall_cli() -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from collsim.cli import console; console()",
                        "tune", str(out / "results.json"), "-q"],
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ))
        return time.perf_counter() - start

    for label, fn in (("decide", lambda: cpu(lambda: decide(frame, meta))), ("read+decide+write", lambda: cpu(full)),
                      ("cli", wall_cli)):
        times = [fn() for _ in range(args.repeats)]
        unit = "s wall" if label == "cli" else "s CPU"
        print(f"{label:>18}: median {statistics.median(times):.3f} {unit}, slowest {max(times):.3f} {unit} "
              f"({args.repeats} repeats)")
    print(f"reference loop again {reference_loop_s():.2f} s")


if __name__ == "__main__":
    main()
