"""A small results folder (results/<manifest>/ as `sparsebalance run` writes it) for the
plot tests: a baseline and a DST method swept over anchor x p, dp 2 x pp 2, with
records (predictions, budgets, coverage on the DST runs), timeline_events.jsonl and a
report.json in the report's format (harness/report/report_writers.cpp; its golden
tests live in tests/cpu/test_report.cpp)."""

import json
from pathlib import Path

ITER_MS = [900.0, 410.0, 400.0, 430.0, 395.0]  # iteration 0 is warm-up; median of 1..4: 405
DP, PP = 2, 2


def _record(it, scale, dst):
    micro = [10.0 * scale, 20.0 * scale, 12.0 * scale, 18.0 * scale]
    r = {
        "iteration": it, "warmup": it == 0, "loss": 5.0 - 0.5 * it, "loss_tokens": 900, "tokens": 1000,
        "sequences": 4, "lr": 1e-3, "grad_norm": 1.0, "iter_ms": ITER_MS[it] * scale,
        "microbatch_ms": micro, "microbatch_tokens": [100, 400, 200, 300], "microbatch_dp_rank": [0, 0, 1, 1],
        "imbalance": max(micro) / (sum(micro) / len(micro)), "per_stage_busy_ms": [1, 1, 1, 1],
        "per_stage_idle_ms": [1, 1, 1, 1], "bubble_fraction": 0.2, "bubble_fraction_max": 0.3,
        "balance_overhead_ms": 1.5, "allreduce_ms": 3.0,
    }
    if dst:
        r["microbatch_pred_ms"] = [m * 1.1 for m in micro]
        r["budgets"] = [0, 40, 24, 36]
        r["coverage"] = [0.95, 0.9, 0.92, 0.91]
        r["layer_budgets"] = [[32, 32], [40, 40], [24, 24], [36, 36]]
    return r


def _timeline(it, scale):
    """Every (DP rank, stage): forward and backward of two micro-batches, then the
    all-reduce and the optimizer step, on one clock starting at 1000 ms."""
    ranks = []
    for dp in range(DP):
        for stage in range(PP):
            t = 1000.0 + 5.0 * stage
            events = []
            for kind in ("forward", "backward"):
                for mb in range(2):
                    length = (4.0 + mb + stage) * scale
                    events.append([kind, mb, t, t + length])
                    t += length + 1.0
            events.append(["allreduce", -1, t, t + 3.0])
            events.append(["optimizer", -1, t + 3.0, t + 4.0])
            ranks.append({"rank": dp * PP + stage, "dp_rank": dp, "stage": stage, "start_ms": 1000.0,
                          "end_ms": t + 4.0, "events": events})
    return {"iteration": it, "origin_unix_ms": 1.7e12, "ranks": ranks}


def _write_run(folder, method, sweep_point, scale, anchor=None, p=None):
    folder.mkdir(parents=True)
    m = {"name": method, "attention": {"name": "moba", "block_size": 64, "top_k": 32},
         "batching": "sab" if anchor else "sequential", "budget": "dst" if anchor else "fixed"}
    if anchor:
        m["dst"] = {"anchor": anchor, "p": p, "k_min": 1, "k_max": 64, "bottleneck": "smallest"}
    (folder / "manifest.resolved.json").write_text(json.dumps(
        {"name": "plots", "methods": [m], "parallelism": {"dp": DP, "pp": PP}, "train": {"warmup_iterations": 1}}))
    (folder / "context.json").write_text(json.dumps(
        {"git_sha": "abc", "seed": 1, "experiment": {"method": method, "baseline": "base",
                                                     "is_baseline": method == "base", "sweep_point": sweep_point,
                                                     "simulated": False}}))
    (folder / "records.jsonl").write_text(
        "".join(json.dumps(_record(it, scale, anchor is not None)) + "\n" for it in range(len(ITER_MS))))
    (folder / "timeline_events.jsonl").write_text(
        "".join(json.dumps(_timeline(it, scale)) + "\n" for it in range(len(ITER_MS))))
    (folder / "status.json").write_text(json.dumps({"state": "complete"}))


def write_results(root):
    """Writes root/plots_fixture/ and returns it. Speedups: DST runs are scaled by
    1 / speedup, the speedup of (anchor, p) being SPEEDUP[anchor][p]."""
    results = Path(root) / "plots_fixture"
    _write_run(results / "base__seed=1", "base", {"seed": 1}, 1.0)
    speedup = {"mean": {0.1: 1.3, 0.2: 1.4}, "max": {0.1: 1.1, 0.2: 1.2}}
    for anchor in ("mean", "max"):
        for p in (0.1, 0.2):
            _write_run(results / f"sab_dst__anchor={anchor}__p={p}__seed=1", "sab_dst",
                       {"methods.dst.anchor": anchor, "methods.dst.p": p, "seed": 1}, 1.0 / speedup[anchor][p],
                       anchor, p)
    (results / "sab_dst__anchor=mean__p=0.1__seed=1.interrupted-20260101T000000Z").mkdir()
    (results / "base__seed=1" / "eval").mkdir()
    (results / "base__seed=1" / "eval" / "coverage.json").write_text(json.dumps({
        "after": {"block_size": 64, "top_k": 4, "samples": 2, "k": [1, 2, 3, 4, 5],
                  "curve": [0.5, 0.8, 0.9, 0.95, 1.0], "floor": {"0.1": 3.0}},
        "before": {"block_size": 64, "top_k": 4, "samples": 2, "k": [1, 2, 3, 4, 5],
                   "curve": [0.2, 0.4, 0.6, 0.8, 1.0], "floor": {"0.1": 4.0}}}))
    (results / "base__seed=1" / "eval" / "heldout.json").write_text(json.dumps({
        "documents": 2, "skipped_documents": 0, "windows": 3, "tokens": 300, "window": 256, "stride": 128,
        "nll": 3.0, "ppl": 20.1, "bucket_tokens": 64,
        "by_position": [{"from": 64 * b, "to": 64 * (b + 1), "tokens": 60, "nll": 4.0 - 0.3 * b, "ppl": 1.0}
                        for b in range(4)]}))
    methods = [{"label": "base", "method": "base", "count": 1, "speedup": {"median": 1, "min": 1, "max": 1, "count": 1}}]
    for anchor in ("mean", "max"):
        for p in (0.1, 0.2):
            s = speedup[anchor][p]
            methods.append({"label": f"sab_dst (anchor={anchor}, p={p})", "method": "sab_dst", "count": 1,
                            "speedup": {"median": s, "min": s * 0.95, "max": s * 1.05, "count": 1},
                            "speedup_interval": [s * 0.9, s * 1.1]})
    ablation = [{"method": "sab_dst", "anchors": ["mean", "max"], "ps": [0.1, 0.2],
                 "metrics": ["speedup", "niah_score"],
                 "values": {"speedup": [[1.3, 1.4], [1.1, 1.2]], "niah_score": [[0.9, None], [0.95, 0.97]]},
                 "runs": [[1, 1], [1, 1]],
                 "speedup_intervals": [[[1.2, 1.4], None], [[1.0, 1.2], [1.1, 1.3]]]}]
    (results / "report.json").write_text(json.dumps({"manifest": "plots_fixture", "runs": [], "methods": methods,
                                                     "ablation": ablation}))
    return results
