"""The per-iteration metrics of a DP2 x PP2 run recomputed in Python from the raw
per-rank timelines (timeline_events.jsonl), by the written definitions (docs/metrics.md,
"Metrics"): iter_ms, per-stage busy/idle, bubble fraction (mean and max), micro-batch
latency summed over stages, imbalance. Also: the loss curve equals the one-process
run's, and timeline.json is a Chrome trace with one row per (DP rank, stage).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))


def manifest(name, dp, pp):
    return {
        "name": name,
        "seed": 9,
        "model": {"preset": "qwen2-tiny"},
        "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 120}]}},
        "parallelism": {"dp": dp, "pp": pp},
        "train": {"iterations": 4, "warmup_iterations": 1, "global_batch_size": 10,
                  "max_tokens_per_microbatch": 160, "threads": 1},
        "methods": [{"name": "dense"}],
    }


def run(root, m):
    path = root / (m["name"] + ".json")
    path.write_text(json.dumps(m))
    proc = subprocess.run([BINARY, "run", str(path), "--results", str(root)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / m["name"] / "dense"


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline_oracle")
    return run(root, manifest("dpxpp", 2, 2)), run(root, manifest("single", 1, 1))


def test_metrics_follow_their_definitions_from_raw_timelines(runs):
    pipeline, _ = runs
    dp, pp = 2, 2
    records = jsonl(pipeline / "records.jsonl")
    timelines = jsonl(pipeline / "timeline_events.jsonl")
    assert [t["iteration"] for t in timelines] == [r["iteration"] for r in records]
    for r, t in zip(records, timelines):
        ranks = sorted(t["ranks"], key=lambda x: x["rank"])
        assert [(x["dp_rank"], x["stage"]) for x in ranks] == [(d, s) for d in range(dp) for s in range(pp)]
        iter_ms = max(x["end_ms"] - x["start_ms"] for x in ranks)
        busy = [sum(e[3] - e[2] for e in x["events"] if e[0] in ("forward", "backward")) for x in ranks]
        idle = [iter_ms - b for b in busy]
        assert r["iter_ms"] == pytest.approx(iter_ms, rel=1e-12)
        assert r["per_stage_busy_ms"] == pytest.approx(busy, rel=1e-9)
        assert r["per_stage_idle_ms"] == pytest.approx(idle, rel=1e-9, abs=1e-9)
        assert r["bubble_fraction"] == pytest.approx(sum(i / iter_ms for i in idle) / len(idle), rel=1e-9)
        assert r["bubble_fraction_max"] == pytest.approx(max(i / iter_ms for i in idle), rel=1e-9)
        latency, per_rank = [], []
        for d in range(dp):
            count = r["microbatch_dp_rank"].count(d)
            per_mb = [0.0] * count
            for x in ranks:
                if x["dp_rank"] != d:
                    continue
                for kind, mb, start, end in x["events"]:
                    if kind in ("forward", "backward"):
                        per_mb[mb] += end - start
            latency += per_mb
            per_rank.append(per_mb)
        assert r["microbatch_ms"] == pytest.approx(latency, rel=1e-9)
        assert r["imbalance"] == pytest.approx(max(latency) / (sum(latency) / len(latency)), rel=1e-9)
        # Between DP ranks (docs/metrics.md): of their sums, and per slot over the slots
        # every DP rank ran.
        sums = [sum(mbs) for mbs in per_rank]
        assert r["dp_imbalance"] == pytest.approx(max(sums) / (sum(sums) / dp), rel=1e-9)
        slots = min(len(mbs) for mbs in per_rank)
        per_slot = [max(mbs[j] for mbs in per_rank) / (sum(mbs[j] for mbs in per_rank) / dp) for j in range(slots)]
        assert r["slot_imbalance"] == pytest.approx(sum(per_slot) / slots if slots else 1.0, rel=1e-9)
        assert sum(r["microbatch_tokens"]) == r["tokens"]
        assert "budgets" not in r and "coverage" not in r, "dense attention reports no budgets"


def test_pipeline_loss_curve_equals_one_process(runs):
    pipeline, single = runs
    a, b = jsonl(pipeline / "records.jsonl"), jsonl(single / "records.jsonl")
    assert [r["tokens"] for r in a] == [r["tokens"] for r in b]
    assert [r["loss"] for r in a] == pytest.approx([r["loss"] for r in b], rel=1e-5)
    assert [r["grad_norm"] for r in a] == pytest.approx([r["grad_norm"] for r in b], rel=1e-4)


def test_timeline_is_a_chrome_trace_with_a_row_per_rank(runs):
    pipeline, _ = runs
    trace = json.loads((pipeline / "timeline.json").read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in complete} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert min(e["ts"] for e in complete) == 0
    assert all(e["dur"] >= 0 for e in complete)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(1, 1)] == "stage 1 (rank 3)"
    iterations = [e for e in complete if e["cat"] == "iteration"]
    assert len(iterations) == 4 * 4  # 4 iterations x 4 ranks
