"""The report's numbers recomputed independently from records.jsonl, in Python.

Runs the real CLI on a short synthetic manifest, then checks report.json and
report.csv against the metric definitions (docs/metrics.md) applied here with
the standard library: median of iter_ms, tokens/s, first/last loss, imbalance and
bubble fraction of every record.
"""

import csv
import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))

MANIFEST = {
    "name": "oracle",
    "seed": 7,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [
        {"weight": 2, "min_tokens": 8, "max_tokens": 40},
        {"weight": 1, "min_tokens": 90, "max_tokens": 120}]}},
    "train": {"iterations": 8, "warmup_iterations": 3, "global_batch_size": 6,
              "max_tokens_per_microbatch": 160},
    "methods": [{"name": "dense"}, {"name": "dense-again", "attention": "dense"}],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("oracle")
    manifest = root / "oracle.json"
    manifest.write_text(json.dumps(MANIFEST))
    proc = subprocess.run([BINARY, "run", str(manifest), "--results", str(root)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "oracle"


def records_of(run_dir):
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def test_every_record_obeys_the_metric_definitions(results):
    for run in ("dense", "dense-again"):
        for r in records_of(results / run):
            mb = r["microbatch_ms"]
            assert r["imbalance"] == pytest.approx(max(mb) / (sum(mb) / len(mb)), rel=1e-12)
            assert sum(r["microbatch_tokens"]) == r["tokens"]
            assert max(r["microbatch_tokens"]) <= MANIFEST["train"]["max_tokens_per_microbatch"]
            assert r["per_stage_busy_ms"][0] == pytest.approx(sum(mb), rel=1e-12)
            idle = r["iter_ms"] - sum(mb)
            assert r["per_stage_idle_ms"][0] == pytest.approx(idle, rel=1e-9, abs=1e-9)
            assert r["bubble_fraction"] == pytest.approx(idle / r["iter_ms"], rel=1e-9)
            assert r["sequences"] == MANIFEST["train"]["global_batch_size"]
            assert r["warmup"] == (r["iteration"] < MANIFEST["train"]["warmup_iterations"])


def test_report_json_matches_independent_summary(results):
    report = json.loads((results / "report.json").read_text())
    assert report["manifest"] == "oracle"
    rows = {row["run"]: row for row in report["runs"]}
    assert set(rows) == {"dense", "dense-again"}
    for run, row in rows.items():
        recs = records_of(results / run)
        measured = [r for r in recs if not r["warmup"]]
        assert row["state"] == "complete"
        assert row["iterations_recorded"] == len(recs)
        assert row["iterations_measured"] == len(measured)
        assert row["iter_ms"]["median"] == pytest.approx(
            statistics.median(r["iter_ms"] for r in measured), rel=1e-12)
        assert row["tokens_per_s"] == pytest.approx(
            sum(r["tokens"] for r in measured) / sum(r["iter_ms"] for r in measured) * 1000,
            rel=1e-12)
        assert row["loss_first"] == recs[0]["loss"]
        assert row["loss_final"] == recs[-1]["loss"]
        assert row["imbalance"]["median"] == pytest.approx(
            statistics.median(r["imbalance"] for r in measured), rel=1e-12)
        assert row["bubble_fraction"]["mean"] == pytest.approx(
            statistics.fmean(r["bubble_fraction"] for r in measured), rel=1e-12)


def test_report_csv_agrees_with_json(results):
    report = {row["run"]: row for row in json.loads((results / "report.json").read_text())["runs"]}
    with open(results / "report.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["run"] for r in rows] == sorted(report)
    for r in rows:
        j = report[r["run"]]
        assert int(r["iterations_measured"]) == j["iterations_measured"]
        assert float(r["iter_ms_median"]) == pytest.approx(j["iter_ms"]["median"], rel=1e-9)
        assert float(r["loss_final"]) == pytest.approx(j["loss_final"], rel=1e-9)


def test_same_seed_runs_see_the_same_data(results):
    # Both methods are dense with the same seed: identical data, weights and losses.
    a, b = records_of(results / "dense"), records_of(results / "dense-again")
    assert [r["tokens"] for r in a] == [r["tokens"] for r in b]
    assert [r["loss"] for r in a] == pytest.approx([r["loss"] for r in b], rel=1e-6)


def test_resolved_manifest_reproduces_the_run(results):
    resolved = json.loads((results / "dense" / "manifest.resolved.json").read_text())
    assert [m["name"] for m in resolved["methods"]] == ["dense"]
    assert resolved["train"]["adam_beta2"] == 0.95  # defaults are written out
    context = json.loads((results / "dense" / "context.json").read_text())
    assert context["seed"] == 7
    world = context["world"]
    assert {k: world[k] for k in ("world_size", "dp", "pp", "device")} == {
        "world_size": 1, "dp": 1, "pp": 1, "device": "cpu"}
    assert world["stage_layers"] == [2]  # qwen2-test's two layers on the one stage
    assert world["collective_backend"] == "gloo"
