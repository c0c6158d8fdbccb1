#!/usr/bin/env bash
# What a lent GPU should check, in one go, into one report folder (docs/gpu.md):
#   tests   the CUDA tests (sb_tests_cuda: fused block-sparse kernels, MoBA's two CUDA
#           paths, bf16 training, RMSNorm, NCCL with one rank)
#   bench   `sparsebalance bench attention`: dense flash-attention, MoBA through the fused
#           kernels and through flash-attention varlen, side by side per shape
#   train   one-GPU training, experiments/table1-gpu1-kernels.json (the two MoBA paths in
#           one invocation)
# Multi-rank runs on one GPU are not part of it yet: NCCL refuses two ranks on one device
# and the trainer's Gloo path takes host tensors only (docs/gpu.md).
#
# Usage: scripts/gpu-check.sh [--out DIR] [--stages tests,bench,train] [--grid quick|full]
#                             [--bin DIR]
#   --bin DIR   take sparsebalance and sb_tests_cuda (and any shared libraries in DIR/lib)
#               from DIR instead of building: for a GPU machine that cannot install the
#               build's dependencies; the LibTorch libraries come from python3's torch.
#   --grid      quick: block 256 at 8K-128K (k 8, 32) and blocks 64/128 at 16K and 64K
#               (k 8, 16), about 3 minutes on an H100; full: every length x block x k of
#               docs/benchmarks.md.
# Each stage runs under a time limit; the report says what ran, passed, failed or timed out.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/results/gpu-check"
STAGES="tests,bench,train"
GRID="quick"
BIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --stages) STAGES="$2"; shift 2 ;;
    --grid) GRID="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    *) echo "gpu-check: unknown argument $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
case "$GRID" in quick|full) ;; *) echo "gpu-check: --grid must be quick or full, got $GRID" >&2; exit 2 ;; esac
mkdir -p "$OUT"
REPORT="$OUT/report.md"

if [ -n "$BIN" ]; then
  torch_lib="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')" || {
    echo "gpu-check: --bin needs python3 with torch for the LibTorch libraries" >&2; exit 2; }
  export LD_LIBRARY_PATH="$BIN/lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  SB="$BIN/sparsebalance"
  TESTS="$BIN/sb_tests_cuda"
else
  # shellcheck source=lib.sh
  source "$REPO/scripts/lib.sh"
  set +e
  sb_prepare sparsebalance sb_tests_cuda || { echo "gpu-check: build failed" >&2; exit 1; }
  SB="$SB_BUILD_DIR/sparsebalance"
  TESTS="$SB_BUILD_DIR/sb_tests_cuda"
fi
export SB_NO_PLOTS=1

has_stage() { [[ ",$STAGES," == *",$1,"* ]]; }
now() { date +%s; }
note() { printf '%s\n' "$*" | tee -a "$REPORT"; }

{
  echo "# GPU check"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"
  echo "- stages: $STAGES; grid: $GRID"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu \
    --format=csv 2>&1
  "$SB" version 2>&1
  echo '```'
} >"$REPORT"

# ---- tests ----------------------------------------------------------------------------
# Two processes, the fused kernels' tests first: a device fault ends a CUDA process, and
# the other tests should still run.
if has_stage tests; then
  for part in "BlockSparse*" "-BlockSparse*"; do
    start=$(now)
    name="cuda-tests$([ "${part:0:1}" = "-" ] && echo "-others" || echo "-block-sparse")"
    timeout 150 "$TESTS" --gtest_filter="$part" --gtest_output="xml:$OUT/$name.xml" >"$OUT/$name.log" 2>&1
    rc=$?
    note ""
    note "## CUDA tests $part (exit $rc, $(( $(now) - start )) s)"
    note '```'
    grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|tests? ran|SKIPPED|Failure|error' "$OUT/$name.log" | head -80 | tee -a "$REPORT"
    note '```'
  done
fi

# ---- bench ----------------------------------------------------------------------------
bench() {  # seq block k
  timeout 120 "$SB" bench attention --device cuda --impl dense,moba-fused,moba-varlen --heads 14/2 \
    --head-dim 64 --backward --seq-len "$1" --block "$2" --top-k "$3" --repetitions 5 --warmup 2 \
    --check-rows 32 --json >>"$OUT/bench.jsonl" 2>>"$OUT/bench.log" ||
    echo "bench $1 $2 $3 failed or timed out (exit $?)" | tee -a "$OUT/bench.log" >&2
}
if has_stage bench; then
  start=$(now)
  : >"$OUT/bench.jsonl"
  : >"$OUT/bench.log"
  if [ "$GRID" = quick ]; then
    for seq in 8192 16384 32768 65536 131072; do
      for k in 8 32; do bench "$seq" 256 "$k"; done
    done
    for block in 64 128; do
      for seq in 16384 65536; do
        for k in 8 16; do bench "$seq" "$block" "$k"; done
      done
    done
  else
    for block in 64 128 256; do
      for seq in 8192 16384 32768 65536 131072; do
        for k in 8 16 32; do bench "$seq" "$block" "$k"; done
      done
    done
  fi
  note ""
  note "## Attention benchmark ($(( $(now) - start )) s): bf16, 14/2 heads, D 64, forward + backward ms (median of 5)"
  note ""
  python3 - "$OUT/bench.jsonl" <<'EOF' | tee -a "$REPORT"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
shapes = {}
for r in rows:
    shapes.setdefault((r["seq_len"], r["block"], r["top_k"]), {})[r["impl"]] = r
print("| tokens | block | k | ideal | dense | fused | varlen | dense / fused | dense / varlen | fused TF/s | fused / dense peak MiB | fused err |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (seq, block, k), impls in sorted(shapes.items()):
    d, f, v = impls.get("dense"), impls.get("moba-fused"), impls.get("moba-varlen")
    if not (d and f):
        continue
    ideal = d["attended_pairs"] / f["attended_pairs"]
    vt = v["fwdbwd_ms"] if v else float("nan")
    mib = lambda r: r["peak_mem_bytes"] / 2**20
    print(f"| {seq} | {block} | {k} | {ideal:.2f} | {d['fwdbwd_ms']:.2f} | {f['fwdbwd_ms']:.2f} | {vt:.2f} | "
          f"{d['fwdbwd_ms'] / f['fwdbwd_ms']:.2f} | {d['fwdbwd_ms'] / vt:.2f} | {f['fwdbwd_tflops']:.0f} | "
          f"{mib(f):.0f} / {mib(d):.0f} | {f['max_abs_err']:.1e} |")
print()
print("Forward only (ms): " + "; ".join(
    f"{s}/{b}/k{k} dense {i['dense']['fwd_ms']:.2f} fused {i['moba-fused']['fwd_ms']:.2f}"
    for (s, b, k), i in sorted(shapes.items()) if "dense" in i and "moba-fused" in i))
EOF
fi

# ---- train ----------------------------------------------------------------------------
if has_stage train; then
  start=$(now)
  manifest="$REPO/experiments/table1-gpu1-kernels.json"
  timeout 400 "$SB" run "$manifest" --results "$OUT" --no-plots >"$OUT/train.log" 2>&1
  rc=$?
  note ""
  note "## One-GPU training: table1-gpu1-kernels (exit $rc, $(( $(now) - start )) s)"
  note ""
  if [ -f "$OUT/table1-gpu1-kernels/report.md" ]; then
    cat "$OUT/table1-gpu1-kernels/report.md" >>"$REPORT"
  else
    tail -20 "$OUT/train.log" | tee -a "$REPORT"
  fi
fi

note ""
note "Report: $REPORT"
