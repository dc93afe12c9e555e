#!/usr/bin/env bash
# Build and run every emitted protocol x algorithm on this machine's GPU, then
# a compute-sanitizer racecheck on a small case; write CSVs and logs to
# benchmarks/gpu/results/<date>_<gpu>/.
#
#   benchmarks/gpu/run_all.sh                 # single-GPU mode, ranks 2 4 8, 8 B .. 64 MiB
#   UNVERIFIED=1 benchmarks/gpu/run_all.sh    # also programs without a "holds" verdict (marked)
#   ONLY="ll simple" RANKS="2 8" SIZES=8:1M:x4 benchmarks/gpu/run_all.sh
#   DRY_RUN=1 benchmarks/gpu/run_all.sh       # emit and build only (no GPU needed)
#
# Environment (defaults in brackets):
#   RANKS ["2 4 8"]  SIZES [8:64M:x2]  DTYPE [fp32]  ITERS [20]  WARMUP [5]  CTAS [1]  THREADS [512]
#   MODE [single]    LAUNCH [graph|eager: graph]  CHECK_ITERS [4]  POLL_TIMEOUT_MS [10000]
#   RUN_TIMEOUT_S [1800] wall-clock limit of one benchmark run   BUILD_TIMEOUT_S [1800]
#   SANITIZERS ["racecheck"] (e.g. "racecheck memcheck"; empty: none)   SANITIZER_TIMEOUT_S [900]
#   ONLY [all]: protocol names to keep   ARCH [from nvidia-smi]   UNVERIFIED [0]   DRY_RUN [0]
#   COLLSIM [collsim]  NVCC [nvcc]  OUT [benchmarks/gpu/results/<date>_<gpu>]
# Exit status: 0 when every build and run passed, 1 otherwise (each failure is listed at the end).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

RANKS="${RANKS:-2 4 8}"
SIZES="${SIZES:-8:64M:x2}"
DTYPE="${DTYPE:-fp32}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-5}"
CTAS="${CTAS:-1}"
THREADS="${THREADS:-512}"
MODE="${MODE:-single}"
LAUNCH="${LAUNCH:-graph}"
CHECK_ITERS="${CHECK_ITERS:-4}"
POLL_TIMEOUT_MS="${POLL_TIMEOUT_MS:-10000}"
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-1800}"
BUILD_TIMEOUT_S="${BUILD_TIMEOUT_S:-1800}"
SANITIZERS="${SANITIZERS-racecheck}"
SANITIZER_TIMEOUT_S="${SANITIZER_TIMEOUT_S:-900}"
ONLY="${ONLY:-}"
UNVERIFIED="${UNVERIFIED:-0}"
DRY_RUN="${DRY_RUN:-0}"
COLLSIM="${COLLSIM:-collsim}"
NVCC="${NVCC:-nvcc}"

log() { printf '[run_all %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# --- tools ---------------------------------------------------------------
have timeout || die "coreutils 'timeout' is required"
have make || die "make is required"
have "$NVCC" || { [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && NVCC="$CUDA_HOME/bin/nvcc"; } \
  || die "nvcc not found (set NVCC or CUDA_HOME)"
have "$COLLSIM" || die "'$COLLSIM' not found: install collsim (pip install -e .) or set COLLSIM"

gpu="none"; driver="unknown"; arch="${ARCH:-}"
if [ "$DRY_RUN" != 1 ]; then
  have nvidia-smi || die "nvidia-smi not found: no NVIDIA driver on this machine (DRY_RUN=1 builds without a GPU)"
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | sed 's/^ *//; s/ *$//')"
  driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1 | tr -d ' ')"
  [ -n "$gpu" ] || die "nvidia-smi lists no GPU"
  if [ -z "$arch" ]; then
    cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')"
    [ -n "$cc" ] || die "cannot read the GPU's compute capability; set ARCH=sm_XY"
    arch="sm_${cc}"
  fi
fi
arch="${arch:-sm_90}"
cuda="$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -n1)"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
slug="$(printf '%s' "$gpu" | tr -cs 'A-Za-z0-9' '-' | sed 's/-*$//')"
OUT="${OUT:-$here/results/${stamp}_${slug:-none}}"
mkdir -p "$OUT/logs" "$OUT/csv"
build="$OUT/build"

{
  echo "date_utc=$stamp"
  echo "gpu=$gpu"
  echo "driver=$driver"
  echo "cuda_toolkit=$cuda"
  echo "arch=$arch"
  echo "collsim_commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "ranks=$RANKS sizes=$SIZES dtype=$DTYPE iters=$ITERS warmup=$WARMUP ctas=$CTAS threads=$THREADS"
  echo "mode=$MODE launch=$LAUNCH check_iters=$CHECK_ITERS poll_timeout_ms=$POLL_TIMEOUT_MS unverified=$UNVERIFIED"
  if have nvidia-smi && [ "$DRY_RUN" != 1 ]; then nvidia-smi -L || true; nvidia-smi topo -m || true; fi
} > "$OUT/env.txt" 2>&1
log "results in $OUT (GPU: $gpu, driver $driver, CUDA $cuda, $arch)"

failures=()
fail() { failures+=("$1"); log "FAILED: $1"; }

# --- emit ----------------------------------------------------------------
emit_args=(emit --all --out "$build" --arch "$arch")
[ "$UNVERIFIED" = 1 ] && emit_args+=(--unverified)
set +e
"$COLLSIM" "${emit_args[@]}" > "$OUT/logs/emit.log" 2>&1
emit_rc=$?
set -e
if [ "$emit_rc" -ne 0 ]; then
  # Refusals (not verified) leave the verified programs emitted; anything else is fatal.
  grep -q "refusing to emit" "$OUT/logs/emit.log" || { cat "$OUT/logs/emit.log" >&2; die "collsim emit failed"; }
  log "some programs were refused (not verified; UNVERIFIED=1 emits them marked): see logs/emit.log"
  fail "emit: $(grep -c 'refusing to emit' "$OUT/logs/emit.log") program(s) refused"
fi
mapfile -t dirs < <(find "$build" -mindepth 1 -maxdepth 1 -type d -name '*__*' -printf '%f\n' 2>/dev/null | sort)
[ "${#dirs[@]}" -gt 0 ] || die "nothing was emitted (see $OUT/logs/emit.log)"
if [ -n "$ONLY" ]; then
  keep=()
  for d in "${dirs[@]}"; do
    for p in $ONLY; do [ "${d%%__*}" = "$p" ] && keep+=("$d"); done
  done
  dirs=("${keep[@]}")
  [ "${#dirs[@]}" -gt 0 ] || die "ONLY='$ONLY' matches no emitted program"
fi

# --- build ---------------------------------------------------------------
jobs="$(nproc 2>/dev/null || echo 2)"
built=()
for d in "${dirs[@]}"; do
  if ! grep -q "\"$arch\"" "$build/$d/emit.json"; then
    log "skip $d: it cannot run on $arch ($(grep -o '"archs": \[[^]]*\]' "$build/$d/emit.json"))"
    continue
  fi
  log "build $d"
  if timeout --kill-after=30 "$BUILD_TIMEOUT_S" make -C "$build/$d" -j"$jobs" ARCH="$arch" NVCC="$NVCC" \
      > "$OUT/logs/build_$d.log" 2>&1; then
    built+=("$d")
  else
    fail "build $d (logs/build_$d.log)"
  fi
done
[ "${#built[@]}" -gt 0 ] || die "no program built"

if [ "$DRY_RUN" = 1 ]; then
  log "DRY_RUN: built ${#built[@]} program(s) in $build; not running"
  [ "${#failures[@]}" -eq 0 ] || { printf '  %s\n' "${failures[@]}" >&2; exit 1; }
  exit 0
fi

# --- run -----------------------------------------------------------------
launch_flag="--graph"; [ "$LAUNCH" = eager ] && launch_flag="--eager"
for d in "${built[@]}"; do
  for r in $RANKS; do
    name="${d}_r${r}"
    log "run $d, $r ranks"
    set +e
    timeout --kill-after=30 "$RUN_TIMEOUT_S" "$build/$d/collsim_bench" \
      --ranks "$r" --sizes "$SIZES" --dtype "$DTYPE" --iters "$ITERS" --warmup "$WARMUP" --ctas "$CTAS" \
      --threads "$THREADS" --mode "$MODE" "$launch_flag" --check-iters "$CHECK_ITERS" \
      --timeout-ms "$POLL_TIMEOUT_MS" --csv "$OUT/csv/$name.csv" > "$OUT/logs/run_$name.log" 2>&1
    rc=$?
    set -e
    case "$rc" in
      0) ;;
      3) fail "run $name: WRONG RESULT (logs/run_$name.log)" ;;
      4) fail "run $name: TIMEOUT in a poll (logs/run_$name.log)" ;;
      6) fail "run $name: configuration refused (logs/run_$name.log)" ;;
      124|137) fail "run $name: killed after ${RUN_TIMEOUT_S}s (logs/run_$name.log)" ;;
      *) fail "run $name: exit $rc (logs/run_$name.log)" ;;
    esac
  done
done

# --- sanitizers (small case) ----------------------------------------------
sanitizer=""
if have compute-sanitizer; then sanitizer="compute-sanitizer"
elif [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ]; then sanitizer="$CUDA_HOME/bin/compute-sanitizer"
elif [ -x "$(dirname "$(command -v "$NVCC")")/compute-sanitizer" ]; then sanitizer="$(dirname "$(command -v "$NVCC")")/compute-sanitizer"
fi
if [ -n "$SANITIZERS" ]; then
  if [ -z "$sanitizer" ]; then
    fail "compute-sanitizer not found: sanitizer checks skipped"
  else
    for tool in $SANITIZERS; do
      for d in "${built[@]}"; do
        log "$tool $d (2 ranks, 4 KiB)"
        if ! timeout --kill-after=30 "$SANITIZER_TIMEOUT_S" "$sanitizer" --tool "$tool" --error-exitcode 9 \
            "$build/$d/collsim_bench" --ranks 2 --sizes 4K --iters 2 --warmup 0 --check-iters 2 --eager \
            --mode single --timeout-ms 60000 > "$OUT/logs/${tool}_$d.log" 2>&1; then
          fail "$tool $d (logs/${tool}_$d.log)"
        fi
      done
    done
  fi
fi

# --- combine -------------------------------------------------------------
combined="$OUT/all.csv"
first=1
for f in "$OUT"/csv/*.csv; do
  [ -s "$f" ] || continue
  if [ "$first" = 1 ]; then cat "$f" > "$combined"; first=0; else tail -n +2 "$f" >> "$combined"; fi
done
[ "$first" = 0 ] && log "combined results: $combined ($(($(wc -l < "$combined") - 1)) rows)"

if [ "${#failures[@]}" -gt 0 ]; then
  log "${#failures[@]} failure(s):"
  printf '  %s\n' "${failures[@]}" | tee "$OUT/failures.txt" >&2
  exit 1
fi
log "all builds, runs and sanitizer checks passed"
