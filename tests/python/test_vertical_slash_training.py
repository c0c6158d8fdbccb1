"""Training with vertical-slash attention (docs/vertical_slash.md) from a manifest: with
every key kept it is dense attention, so the loss and gradient norm of each iteration
equal the dense run's (the oracle); with a sparse pattern it trains and records the
pattern's coverage and kept keys per query; the combinations it cannot run yet are
refused with the manifest path.
"""

import json
import shutil
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))


def manifest(methods, **extra):
    m = {
        "name": "vs",
        "seed": 5,
        "model": {"preset": "qwen2-tiny"},
        "data": {"synthetic": {"length_mixture": [{"min_tokens": 40, "max_tokens": 120}]}},
        "train": {"iterations": 3, "warmup_iterations": 1, "global_batch_size": 4,
                  "max_tokens_per_microbatch": 240, "threads": 1},
        "methods": methods,
        "baseline": methods[0]["name"],
    }
    m.update(extra)
    return m


def run(root, m):
    path = root / "vs.json"
    path.write_text(json.dumps(m))
    return subprocess.run([BINARY, "run", str(path), "--results", str(root / "results")],
                          capture_output=True, text=True, timeout=600)


def records(root, run_name):
    lines = (root / "results" / "vs" / run_name / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line]


EVERY_KEY = {"name": "vertical_slash", "budget": "top_k", "vertical_count": 200, "slash_count": 0,
             "sink_tokens": 1, "local_window": 1}
SPARSE = {"name": "vertical_slash", "budget": "top_p", "p": 0.5, "sink_tokens": 2, "local_window": 4,
          "last_queries": 16, "block_size": 4}


def test_every_key_kept_trains_as_dense_and_a_sparse_pattern_trains(tmp_path):
    proc = run(tmp_path, manifest([{"name": "dense"},
                                   {"name": "all", "attention": EVERY_KEY},
                                   {"name": "sparse", "attention": SPARSE}]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dense, every, sparse = (records(tmp_path, n) for n in ("dense", "all", "sparse"))
    assert [r["loss"] for r in every] == pytest.approx([r["loss"] for r in dense], rel=1e-5)
    assert [r["grad_norm"] for r in every] == pytest.approx([r["grad_norm"] for r in dense], rel=1e-4)
    for r in every:
        assert all(c == pytest.approx(1.0, abs=1e-9) for c in r["coverage"])
    for r in sparse:
        longest = max(max(lengths) for lengths in r["microbatch_lengths"])
        assert all(0.0 < c < 1.0 for c in r["coverage"]), r["coverage"]
        # Kept keys per query (the layer budgets) stay below the longest sequence.
        assert all(0 < b < longest for layers in r["layer_budgets"] for b in layers), r["layer_budgets"]
    assert [r["loss"] for r in sparse][1:] != pytest.approx([r["loss"] for r in dense][1:], rel=1e-6)
    report = json.loads((tmp_path / "results" / "vs" / "report.json").read_text())
    row = next(r for r in report["runs"] if r["run"] == "sparse")
    assert row["budget_mean"] is None, "vertical-slash plans no budget"
    assert 0 < row["effective_budget_mean"] < 120
    # The Markdown runs table gives vertical-slash's kept keys per query and coverage.
    md = (tmp_path / "results" / "vs" / "report.md").read_text()
    assert "| kept keys per query / coverage |" in md
    sparse_line = next(line for line in md.splitlines() if line.startswith("| sparse |"))
    assert f"| {row['effective_budget_mean']:.0f} / {row['coverage_mean']:.3f} |" in sparse_line
    dense_line = next(line for line in md.splitlines() if line.startswith("| dense |"))
    assert "| - / - |" in dense_line
    resolved = json.loads((tmp_path / "results" / "vs" / "sparse" / "manifest.resolved.json").read_text())
    attention = resolved["methods"][0]["attention"]
    assert attention["name"] == "vertical_slash" and attention["p"] == 0.5 and attention["last_queries"] == 16
    assert attention["block_size"] == 4


def test_context_parallel_run_equals_the_one_rank_run(tmp_path):
    # The same sparse pattern on CP 2 (striped): every rank builds the one-rank index, so
    # the loss, the layers' kept keys per query (counted from the shared index) and their
    # coverage equal the one-rank run's (where the kernel counted them).
    method = {"name": "sparse", "attention": dict(SPARSE, budget="top_k", vertical_count=4, slash_count=2)}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = run(tmp_path / "one", manifest([method]))
    assert one.returncode == 0, one.stdout + one.stderr
    two = run(tmp_path / "two", manifest([method], parallelism={"cp": 2, "cp_stripe_tokens": 16}))
    assert two.returncode == 0, two.stdout + two.stderr
    single, ring = records(tmp_path / "one", "sparse"), records(tmp_path / "two", "sparse")
    assert [r["loss"] for r in ring] == pytest.approx([r["loss"] for r in single], rel=1e-5)
    for a, b in zip(single, ring):
        assert b["layer_budgets"] == a["layer_budgets"]
        # q and k come from float32 products over each rank's own tokens: rounding apart.
        assert b["coverage"] == pytest.approx(a["coverage"], abs=1e-6)
        assert all(0.0 < c < 1.0 for c in b["coverage"])


def test_sparsebalance_tunes_the_pattern_in_kept_keys_per_query(tmp_path):
    # SAB and DST over vertical-slash (docs/sparsebalance.md 2.1.1): the profile is measured
    # on first use over kept keys per query; the pattern's own rule (the baseline) plans no
    # budget; DST plans one for every micro-batch and moves layers off the rule. The
    # reference DST's first layer computes on the budgeted path equals, in the first
    # iteration (same data, same weights, same layer input), what the rule's run kept on
    # the plain path (later layers see the budgeted layers' outputs).
    m = manifest([{"name": "rule", "attention": SPARSE, "profile": "profile.json"},
                  {"name": "dst", "attention": SPARSE, "budget": "dst", "profile": "profile.json"},
                  {"name": "sab_dst", "attention": SPARSE, "batching": "sab", "budget": "dst",
                   "profile": "profile.json"}])
    m["data"] = {"synthetic": {"length_mixture": [{"min_tokens": 24, "max_tokens": 40},
                                                  {"min_tokens": 160, "max_tokens": 240}]}}
    m["train"].update(iterations=4, max_tokens_per_microbatch=240)
    m["method_defaults"] = {"dst": {"anchor": "mean", "p": 0.1}}
    proc = run(tmp_path, m)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    profile = json.loads((tmp_path / "profile.json").read_text())
    assert profile["attention"] == {"name": "vertical_slash", "block_size": 4, "last_queries": 16, "sink_tokens": 2,
                                    "local_window": 4, "max_verticals": 4096, "max_slashes": 4096}
    # Kept keys per query from 64 up to the longest sample's dense mean (at most 240 tokens).
    assert profile["budgets"][0] == 64 and 64 < profile["budgets"][-1] <= (240 + 2) // 2
    rule, dst = records(tmp_path, "rule"), records(tmp_path, "dst")
    for r in rule:
        assert all(b == 0 for b in r["budgets"]), "the rule plans no budget"
        assert [len(s) for s in r["sequence_reference_budgets"]] == [len(s) for s in r["microbatch_lengths"]]
    assert dst[0]["microbatch_lengths"] == rule[0]["microbatch_lengths"]
    assert [layers[0] for layers in dst[0]["layer_reference_budgets"]] == \
        [layers[0] for layers in rule[0]["layer_budgets"]]
    moved = 0
    for name in ("dst", "sab_dst"):
        for r in records(tmp_path, name):
            assert all(b > 0 for b in r["budgets"]), r["budgets"]
            for layers, references in zip(r["layer_budgets"], r["layer_reference_budgets"]):
                moved += sum(abs(kept - ref) > 1 for kept, ref in zip(layers, references))
    assert moved > 0, "DST never moved a layer off the pattern's own rule"
    report = json.loads((tmp_path / "results" / "vs" / "report.json").read_text())
    row = next(r for r in report["runs"] if r["run"] == "dst")
    assert row["budget_mean"] > 0 and row["reference_budget_mean"] > 0


def test_dst_under_context_parallelism_plans_and_runs_as_one_rank(tmp_path):
    # DST over vertical-slash on CP 2 (striped): every rank runs the one-rank budget search
    # on the index all of them hold (vertical_slash_ring_budget.h). Iteration 0 is planned
    # before anything is measured, from the same profile: the same budgets, and the layers
    # keep the same keys per query with the same coverage (rounding apart) and loss.
    method = {"name": "dst", "attention": SPARSE, "budget": "dst", "profile": "profile.json"}
    m = manifest([method])
    m["train"].update(iterations=2)
    m["method_defaults"] = {"dst": {"anchor": "mean", "p": 0.1}}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = run(tmp_path / "one", m)
    assert one.returncode == 0, one.stdout + one.stderr
    shutil.copy(tmp_path / "one" / "profile.json", tmp_path / "two" / "profile.json")
    m["parallelism"] = {"cp": 2, "cp_stripe_tokens": 16}
    two = run(tmp_path / "two", m)
    assert two.returncode == 0, two.stdout + two.stderr
    single, ring = records(tmp_path / "one", "dst")[0], records(tmp_path / "two", "dst")[0]
    assert all(b > 0 for b in single["budgets"]), single["budgets"]
    assert ring["budgets"] == single["budgets"]
    assert ring["layer_budgets"] == single["layer_budgets"]
    assert ring["layer_reference_budgets"] == single["layer_reference_budgets"]
    assert ring["coverage"] == pytest.approx(single["coverage"], abs=1e-6)
    assert ring["loss"] == pytest.approx(single["loss"], rel=1e-5)


@pytest.mark.parametrize("change, path", [
    ({"methods": [{"name": "v", "attention": {"name": "moba", "expected_keys": 64}}]},
     "$.methods[0].attention.expected_keys"),
    ({"methods": [{"name": "v", "attention": dict(SPARSE, expected_keys=0)}]}, "$.methods[0].attention.expected_keys"),
    ({"methods": [{"name": "v", "attention": dict(SPARSE, p=1.5)}]}, "$.methods[0].attention.p"),
    ({"methods": [{"name": "v", "attention": {"name": "moba", "p": 0.9}}]}, "$.methods[0].attention.p"),
    ({"methods": [{"name": "v", "attention": dict(SPARSE, block_size=0)}]}, "$.methods[0].attention.block_size"),
])
def test_what_it_cannot_run_is_refused_with_the_path(tmp_path, change, path):
    m = manifest([{"name": "v", "attention": SPARSE}])
    m.update(change)
    m["baseline"] = m["methods"][0]["name"]
    proc = run(tmp_path, m)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert path in proc.stdout + proc.stderr
