#!/usr/bin/env bash
# Emit, verify, build, check, time and sanitize every collsim protocol on this machine's GPU;
# write one output folder (env.txt, plan.txt, checks.csv, results.csv, summary.md, logs.tar.gz).
#
#   benchmarks/gpu/run_all.sh                         # stage here (installs collsim if needed), then run
#   benchmarks/gpu/run_all.sh --dry-run               # stage and plan only; no GPU needed
#   benchmarks/gpu/run_all.sh --dry-run --stage build/gpu-stage     # on a machine with pip and nvcc ...
#   benchmarks/gpu/run_all.sh --from build/gpu-stage --out DIR      # ... then on the GPU machine
#   benchmarks/gpu/run_all.sh --help                  # every option
#
# The work is done by run_all.py beside this file (Python standard library only), so a GPU machine
# without collsim's dependencies (and without network) can run a stage made elsewhere. See README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      python="$candidate"
      break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "run_all: error: no python3 (3.9 or newer) on PATH; set PYTHON" >&2
  exit 2
fi
export PYTHONUNBUFFERED=1
exec "$python" "$here/run_all.py" "$@"
