#!/usr/bin/env bash
# What a lent GPU should check, in one go, into one report folder (docs/gpu.md):
#   tests   the CUDA tests (sb_tests_cuda: fused block-sparse kernels, MoBA's two CUDA
#           paths, vertical-slash, bf16 training, RMSNorm, NCCL with one rank)
#   bench   `sparsebalance bench attention`: dense attention (SDPA's own choice of kernel,
#           cuDNN's on an H100, and SDPA pinned to flash-attention), MoBA through the fused
#           kernels and through flash-attention varlen, side by side per shape
#   token   MoBA's token gate against the block gate on the device (`bench attention`:
#           moba-token beside moba-fused and moba-varlen at the same block and k, and dense)
#   memory  the memory estimate `run` prints against the GPU's measured peak
#           (experiments/gpu1-memory.json at 16K-128K tokens, with and without activation
#           checkpointing; the shape that exceeds the GPU must be refused before it starts)
#   train   one-GPU training, experiments/table1-gpu1-kernels.json (the two MoBA paths in
#           one invocation) and experiments/gpu1-vertical-slash.json (dense, MoBA and the
#           vertical-slash pattern)
#   multirank  experiments/gpu1-multirank.json as one process, then as DP 2, PP 2, TP 2,
#           DP 2 x PP 2, DP 2 x TP 2 and CP 2 ranks (--layouts adds pp2tp2, cp2striped;
#           dp2cp2 needs more than one GPU's 80 GB) sharing the GPU (Gloo through host memory; NCCL
#           refuses two ranks on one device), every iteration's loss and gradient norm
#           compared with the one-process run
#   vs      vertical-slash beyond one process: experiments/gpu1-cp2-vertical-slash.json on
#           CP 2 ranks sharing the GPU against one process, and the pattern's latency
#           profile on the GPU with its held-out check
#   cluster two or more GPUs, one rank per GPU over NCCL (docs/cluster.md): all-reduce and
#           send/recv bandwidth (scripts/collective_bandwidth.py, nccl-tests' formulas),
#           experiments/gpu1-multirank.json as DP 2, PP 2, TP 2, CP 2 and DP 2 x PP 2 with
#           train.collectives "auto" (NCCL) against one process, and PP 2 with stage 0 slowed by
#           1 s before iteration 2, which stage 1 must time as wait (scripts/gpu_check_wait.py);
#           refused, with the reason in the report, on a machine with one GPU
#
# Usage: scripts/gpu-check.sh [--out DIR] [--stages tests,bench,token,memory,train,multirank,vs,cluster] [--grid quick|full]
#                             [--bin DIR] [--layouts dp2,pp2,tp2,dp2pp2,dp2tp2,cp2,...]
# DST on the GPU ring is checked by hand (docs/context_parallel.md):
#   sparsebalance run experiments/gpu1-cp2-dst.json
#   --bin DIR   take sparsebalance and sb_tests_cuda (and any shared libraries in DIR/lib)
#               from DIR instead of building: for a GPU machine that cannot install the
#               build's dependencies; the LibTorch libraries come from python3's torch.
#   --grid      quick: block 256 at 8K-128K (k 8, 32) and blocks 64/128 at 16K and 64K
#               (k 8, 16), about 3 minutes on an H100; full: every length x block x k of
#               docs/benchmarks.md.
# Each stage runs under a time limit; the report says what ran, passed, failed or timed out.
# A stage first removes what an earlier check left in OUT (run would skip a completed run
# and the report would show its old results).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/results/gpu-check"
STAGES="tests,bench,token,memory,train,multirank,vs,cluster"
GRID="quick"
BIN=""
LAYOUTS="dp2,pp2,tp2,dp2pp2,dp2tp2,cp2"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --stages) STAGES="$2"; shift 2 ;;
    --grid) GRID="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --layouts) LAYOUTS="$2"; shift 2 ;;
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
  for part in "*BlockSparse*" "-*BlockSparse*"; do
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
  timeout 120 "$SB" bench attention --device cuda --impl dense,dense-flash,moba-fused,moba-varlen --heads 14/2 \
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
kernel = next((i["dense"].get("sdpa_kernel") for i in shapes.values() if "dense" in i), None) or "?"
print(f"dense = SDPA's choice ({kernel}); dense-flash = SDPA pinned to flash-attention. Ratios: dense time / fused time.")
print()
print("| tokens | block | k | ideal | dense | dense-flash | fused | varlen | dense / fused | dense-flash / fused | dense / varlen | fused TF/s | fused / dense peak MiB | fused err |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (seq, block, k), impls in sorted(shapes.items()):
    d, df, f, v = impls.get("dense"), impls.get("dense-flash"), impls.get("moba-fused"), impls.get("moba-varlen")
    if not (d and f):
        continue
    ideal = d["attended_pairs"] / f["attended_pairs"]
    ms = lambda r: r["fwdbwd_ms"] if r else float("nan")
    mib = lambda r: r["peak_mem_bytes"] / 2**20
    print(f"| {seq} | {block} | {k} | {ideal:.2f} | {ms(d):.2f} | {ms(df):.2f} | {ms(f):.2f} | {ms(v):.2f} | "
          f"{ms(d) / ms(f):.2f} | {ms(df) / ms(f):.2f} | {ms(d) / ms(v):.2f} | {f['fwdbwd_tflops']:.0f} | "
          f"{mib(f):.0f} / {mib(d):.0f} | {f['max_abs_err']:.1e} |")
print()
print("Forward only (ms): " + "; ".join(
    f"{s}/{b}/k{k} dense {i['dense']['fwd_ms']:.2f} fused {i['moba-fused']['fwd_ms']:.2f}"
    for (s, b, k), i in sorted(shapes.items()) if "dense" in i and "moba-fused" in i))
EOF
fi

# ---- token ----------------------------------------------------------------------------
# MoBA's own gate (per query token; flash-attention varlen over (head, key block) segments)
# beside the block gate at the same block and k: the fused kernels and flash-attention
# varlen over gathered blocks. Goal (docs/benchmarks.md): within 1.5x of the block gate.
if has_stage token; then
  start=$(now)
  : >"$OUT/token.jsonl"
  : >"$OUT/token.log"
  for shape in 8192:64:8 16384:64:8 32768:64:8 16384:256:32 32768:256:32 65536:256:32; do
    IFS=: read -r seq block k <<<"$shape"
    timeout 60 "$SB" bench attention --device cuda --impl dense,moba-fused,moba-varlen,moba-token --heads 14/2 \
      --head-dim 64 --backward --seq-len "$seq" --block "$block" --top-k "$k" --repetitions 5 --warmup 2 \
      --check-rows 32 --json >>"$OUT/token.jsonl" 2>>"$OUT/token.log" ||
      echo "token bench $shape failed or timed out (exit $?)" | tee -a "$OUT/token.log" >&2
  done
  note ""
  note "## MoBA's token gate against the block gate ($(( $(now) - start )) s): bf16, 14/2 heads, D 64, ms (median of 5)"
  note ""
  python3 - "$OUT/token.jsonl" <<'EOF' | tee -a "$REPORT"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
shapes = {}
for r in rows:
    shapes.setdefault((r["seq_len"], r["block"], r["top_k"]), {})[r["impl"]] = r
print("| tokens | block | k | dense | fused (block gate) | varlen (block gate) | token | token / fused | token / varlen | "
      "token fwd / fused fwd | token pairs / block pairs | token err | token / dense peak MiB |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
nan = float("nan")
for (seq, block, k), i in sorted(shapes.items()):
    d, f, v, t = (i.get(n) for n in ("dense", "moba-fused", "moba-varlen", "moba-token"))
    ms = lambda r, key="fwdbwd_ms": r[key] if r and r.get(key) is not None else nan
    ratio = lambda a, b: a / b if b == b and b > 0 else nan
    mib = lambda r: r["peak_mem_bytes"] / 2**20 if r else nan
    pairs = ratio(t["attended_pairs"], f["attended_pairs"]) if t and f else nan
    print(f"| {seq} | {block} | {k} | {ms(d):.2f} | {ms(f):.2f} | {ms(v):.2f} | {ms(t):.2f} | {ratio(ms(t), ms(f)):.2f} | "
          f"{ratio(ms(t), ms(v)):.2f} | {ratio(ms(t, 'fwd_ms'), ms(f, 'fwd_ms')):.2f} | {pairs:.3f} | "
          f"{(t or {}).get('max_abs_err', nan):.1e} | {mib(t):.0f} / {mib(d):.0f} |")
EOF
fi

# ---- memory ---------------------------------------------------------------------------
# The estimate `run` prints before anything starts against the caching allocator's peak
# (records' peak_gpu_allocated_mb; iteration 1 is the first with AdamW's state). The last
# shape should not fit one GPU: run must refuse it before it builds the model.
if has_stage memory; then
  manifest="$REPO/experiments/gpu1-memory.json"
  rm -rf "${OUT:?}/memory" "$OUT"/memory-*.log
  for shape in 16384:false:all 32768:false:all 32768:true:all 131072:true:dense 131072:true:moba 131072:false:dense; do
    IFS=: read -r tokens ckpt methods <<<"$shape"
    name="t${tokens}-$([ "$ckpt" = true ] && echo ckpt || echo full)$([ "$methods" = all ] || echo "-$methods")"
    only=()
    [ "$methods" = all ] || only=(--only "$methods")
    start=$(now)
    timeout 150 "$SB" run "$manifest" --set "train.max_tokens_per_microbatch=$tokens" \
      --set "data.synthetic.length_mixture.0.min_tokens=$tokens" --set "data.synthetic.length_mixture.0.max_tokens=$tokens" \
      --set "train.activation_checkpointing=$ckpt" "${only[@]}" --results "$OUT/memory/$name" --no-plots \
      >"$OUT/memory-$name.log" 2>&1
    rc=$?
    note ""
    note "## Memory: $tokens tokens, activation checkpointing $ckpt, methods $methods (exit $rc, $(( $(now) - start )) s)"
    note '```'
    grep -m1 "memory per rank" "$OUT/memory-$name.log" | tee -a "$REPORT"
    [ $rc -eq 0 ] || tail -8 "$OUT/memory-$name.log" | tee -a "$REPORT"
    note '```'
  done
  note ""
  python3 - "$OUT" <<'EOF' | tee -a "$REPORT"
import glob, json, os, re, sys
out = sys.argv[1]
print("| run | method | estimate GiB | peak allocated MiB (iterations) | reserved MiB | estimate / peak | loss (iterations) | iteration ms |")
print("|---|---|---:|---|---:|---:|---|---|")
for log in sorted(glob.glob(f"{out}/memory-*.log")):
    name = os.path.basename(log)[len("memory-"):-len(".log")]
    m = re.search(r"memory per rank \(estimate[^)]*\): ([0-9.]+) GiB", open(log).read())
    est = float(m.group(1)) if m else float("nan")
    records = sorted(glob.glob(f"{out}/memory/{name}/*/*/records.jsonl"))
    if not records:
        print(f"| {name} | (no records) | {est:.2f} | | | | | |")
    for path in records:
        recs = [json.loads(l) for l in open(path) if l.strip()]
        alloc = [r["peak_gpu_allocated_mb"][0] for r in recs if r.get("peak_gpu_allocated_mb")]
        res = [r["peak_gpu_reserved_mb"][0] for r in recs if r.get("peak_gpu_reserved_mb")]
        peak = max(alloc) if alloc else float("nan")
        losses = " ".join(f"{r['loss']:.4f}" for r in recs if "loss" in r)
        iters = " ".join(f"{r['iter_ms']:.0f}" for r in recs if "iter_ms" in r)
        print(f"| {name} | {os.path.basename(os.path.dirname(path))} | {est:.2f} | {' '.join(f'{a:.0f}' for a in alloc)} | "
              f"{max(res) if res else float('nan'):.0f} | {est * 1024 / peak:.2f} | {losses} | "
              f"{iters} |")
EOF
fi

# ---- train ----------------------------------------------------------------------------
if has_stage train; then
  for name in table1-gpu1-kernels gpu1-vertical-slash; do
    start=$(now)
    rm -rf "${OUT:?}/$name"
    timeout 400 "$SB" run "$REPO/experiments/$name.json" --results "$OUT" --no-plots >"$OUT/train-$name.log" 2>&1
    rc=$?
    note ""
    note "## One-GPU training: $name (exit $rc, $(( $(now) - start )) s)"
    note ""
    if [ -f "$OUT/$name/report.md" ]; then
      cat "$OUT/$name/report.md" >>"$REPORT"
    else
      tail -20 "$OUT/train-$name.log" | tee -a "$REPORT"
    fi
  done
fi

# ---- multirank -------------------------------------------------------------------------
# Every iteration's loss and gradient norm against the one-process run, with the
# tolerances scripts/gpu_check_agreement.py states.
if has_stage multirank; then
  manifest="$REPO/experiments/gpu1-multirank.json"
  rm -rf "${OUT:?}/multirank" "$OUT"/multirank-*.log
  for name in single ${LAYOUTS//,/ }; do
    case "$name" in  # dp pp tp cp cp_layout
      single) dims="1 1 1 1 zigzag" ;; dp2) dims="2 1 1 1 zigzag" ;; pp2) dims="1 2 1 1 zigzag" ;;
      tp2) dims="1 1 2 1 zigzag" ;; dp2pp2) dims="2 2 1 1 zigzag" ;; dp2tp2) dims="2 1 2 1 zigzag" ;;
      pp2tp2) dims="1 2 2 1 zigzag" ;; cp2) dims="1 1 1 2 zigzag" ;; cp2striped) dims="1 1 1 2 striped" ;;
      dp2cp2) dims="2 1 1 2 zigzag" ;;
      *) note "multirank: unknown layout $name (single, dp2, pp2, tp2, dp2pp2, dp2tp2, pp2tp2, cp2, cp2striped, dp2cp2)"; continue ;;
    esac
    read -r dp pp tp cp cp_layout <<<"$dims"
    cp_args=()
    [ "$cp" -gt 1 ] && cp_args=(--set "parallelism.cp=$cp" --set "parallelism.cp_layout=$cp_layout")
    start=$(now)
    timeout 240 "$SB" run "$manifest" --set "parallelism.dp=$dp" --set "parallelism.pp=$pp" \
      --set "parallelism.tp=$tp" "${cp_args[@]}" --results "$OUT/multirank/$name" --no-plots \
      >"$OUT/multirank-$name.log" 2>&1
    rc=$?
    note ""
    note "## Multi-rank on one GPU: $name (dp $dp, pp $pp, tp $tp, cp $cp${cp_args:+ $cp_layout}; exit $rc, $(( $(now) - start )) s)"
    [ $rc -eq 0 ] || { note '```'; tail -15 "$OUT/multirank-$name.log" | tee -a "$REPORT"; note '```'; }
  done
  note ""
  python3 "$REPO/scripts/gpu_check_agreement.py" "$OUT/multirank" gpu1-multirank single "$LAYOUTS" dense,moba |
    tee -a "$REPORT"
fi

# ---- vs --------------------------------------------------------------------------------
# Vertical-slash beyond one process: the pattern on CP 2 ranks sharing the GPU against one
# process (experiments/gpu1-cp2-vertical-slash.json; the index built on each rank's GPU),
# then a latency profile of the pattern on the GPU and the predictor's held-out check.
if has_stage vs; then
  manifest="$REPO/experiments/gpu1-cp2-vertical-slash.json"
  rm -rf "${OUT:?}/vs" "$OUT"/vs-*.log
  for name in single cp2; do
    cp=$([ "$name" = cp2 ] && echo 2 || echo 1)
    start=$(now)
    timeout 300 "$SB" run "$manifest" --set "parallelism.cp=$cp" --results "$OUT/vs/$name" --no-plots \
      >"$OUT/vs-$name.log" 2>&1
    rc=$?
    note ""
    note "## Vertical-slash, $name (cp $cp; exit $rc, $(( $(now) - start )) s)"
    note ""
    if [ -f "$OUT/vs/$name/gpu1-cp2-vertical-slash/report.md" ]; then
      sed -n '/^## Runs/,/^## Methods/p' "$OUT/vs/$name/gpu1-cp2-vertical-slash/report.md" | sed '$d' >>"$REPORT"
    else
      note '```'; tail -15 "$OUT/vs-$name.log" | tee -a "$REPORT"; note '```'
    fi
  done
  note ""
  python3 "$REPO/scripts/gpu_check_agreement.py" "$OUT/vs" gpu1-cp2-vertical-slash single cp2 vs_top_p,vs_top_k |
    tee -a "$REPORT"
  start=$(now)
  profile="$OUT/vs/gpu-qwen2.5-0.5b-vertical-slash64.json"
  timeout 300 "$SB" profile --model qwen2.5-0.5b --attention vertical_slash --block 64 --device cuda \
    --precision bf16-mixed --seq-lens 1024,2048,4096,8192 --budgets 64,128,256,512,1024 --out "$profile" \
    >"$OUT/vs-profile.log" 2>&1 &&
    timeout 200 "$SB" profile --check "$profile" >"$OUT/vs-profile-check.log" 2>&1
  rc=$?
  note ""
  note "## Vertical-slash latency profile on the GPU (exit $rc, $(( $(now) - start )) s)"
  note '```'
  tail -12 "$([ -s "$OUT/vs-profile-check.log" ] && echo "$OUT/vs-profile-check.log" || echo "$OUT/vs-profile.log")" |
    tee -a "$REPORT"
  note '```'
fi

# ---- cluster ---------------------------------------------------------------------------
# One rank per GPU over NCCL: what a user runs first on a new cluster (docs/cluster.md).
if has_stage cluster; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  note ""
  if [ "$gpus" -lt 2 ]; then
    note "## Cluster (NCCL, one rank per GPU): refused"
    note ""
    note "This machine has $gpus GPU(s); the cluster stage needs two or more (NCCL refuses two ranks"
    note "on one device). Ranks sharing one GPU are the multirank stage's (Gloo through host memory)."
  else
    rm -rf "${OUT:?}/cluster" "$OUT"/cluster-*.log
    mkdir -p "$OUT/cluster"
    start=$(now)
    timeout 300 python3 -m torch.distributed.run --nproc-per-node "$gpus" "$REPO/scripts/collective_bandwidth.py" \
      --backend nccl --out "$OUT/cluster/bandwidth.json" >"$OUT/cluster-bandwidth.log" 2>&1
    rc=$?
    note "## Cluster: NCCL bandwidth over $gpus GPUs (exit $rc, $(( $(now) - start )) s)"
    note ""
    grep -E '^(\||nccl)' "$OUT/cluster-bandwidth.log" | tee -a "$REPORT"
    [ $rc -eq 0 ] || { note '```'; tail -15 "$OUT/cluster-bandwidth.log" | tee -a "$REPORT"; note '```'; }
    manifest="$REPO/experiments/gpu1-multirank.json"
    layouts=""
    for name in single dp2 pp2 tp2 cp2 dp2pp2; do
      case "$name" in  # dp pp tp cp
        single) dims="1 1 1 1" ;; dp2) dims="2 1 1 1" ;; pp2) dims="1 2 1 1" ;; tp2) dims="1 1 2 1" ;;
        cp2) dims="1 1 1 2" ;; dp2pp2) dims="2 2 1 1" ;;
      esac
      read -r dp pp tp cp <<<"$dims"
      if [ $(( dp * pp * tp * cp )) -gt "$gpus" ]; then
        note ""; note "## Cluster: $name skipped (needs $(( dp * pp * tp * cp )) GPUs, $gpus here)"; continue
      fi
      [ "$name" = single ] || layouts="${layouts:+$layouts,}$name"
      start=$(now)
      timeout 300 "$SB" run "$manifest" --set train.collectives=auto --set "parallelism.dp=$dp" \
        --set "parallelism.pp=$pp" --set "parallelism.tp=$tp" --set "parallelism.cp=$cp" \
        --results "$OUT/cluster/$name" --no-plots >"$OUT/cluster-$name.log" 2>&1
      rc=$?
      note ""
      note "## Cluster: $name over NCCL (dp $dp, pp $pp, tp $tp, cp $cp; exit $rc, $(( $(now) - start )) s)"
      [ $rc -eq 0 ] || { note '```'; tail -15 "$OUT/cluster-$name.log" | tee -a "$REPORT"; note '```'; }
    done
    note ""
    [ -n "$layouts" ] && python3 "$REPO/scripts/gpu_check_agreement.py" "$OUT/cluster" gpu1-multirank single \
      "$layouts" dense,moba | tee -a "$REPORT"
    start=$(now)
    SB_FAULT_INJECT="slow:rank=0:iteration=2:ms=1000" timeout 300 "$SB" run "$manifest" \
      --set train.collectives=auto --set parallelism.pp=2 --only dense --results "$OUT/cluster/slowed" --no-plots \
      >"$OUT/cluster-slowed.log" 2>&1
    rc=$?
    note ""
    note "## Cluster: PP 2 with stage 0 slowed 1 s before iteration 2 (exit $rc, $(( $(now) - start )) s)"
    note '```'
    [ $rc -eq 0 ] || tail -15 "$OUT/cluster-slowed.log" | tee -a "$REPORT"
    python3 "$REPO/scripts/gpu_check_wait.py" "$OUT/cluster/slowed/gpu1-multirank/dense" --iteration 2 --ms 1000 \
      2>&1 | tee -a "$REPORT"
    note '```'
  fi
fi

note ""
note "Report: $REPORT"
