"""`sparsebalance run` refuses, before it measures a profile or starts a rank, a manifest
whose inputs are missing or whose world does not fit on this machine (exit 2, naming the
manifest, the JSON path and the fix); and a run that completes draws the report's
figures."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance")))


@pytest.fixture(autouse=True)
def needs_binary():
    if not BINARY.exists():
        pytest.skip(f"{BINARY} is not built (scripts/sparsebalance builds it)")


def tiny_manifest(name):
    m = json.loads((REPO / "experiments" / "quickstart_dp2_pp2.json").read_text())
    m["name"] = name
    m["parallelism"] = {"dp": 1, "pp": 1}
    m["checkpoint"] = {"every_iterations": 0}
    m["train"].update({"iterations": 3, "warmup_iterations": 1, "global_batch_size": 2})
    return m


def run(tmp_path, manifest, *flags, env=None):
    path = tmp_path / (manifest["name"] + ".json")
    path.write_text(json.dumps(manifest))
    environment = dict(os.environ, **(env or {}))
    proc = subprocess.run([str(BINARY), "run", str(path), "--results", str(tmp_path / "results"), *flags],
                          capture_output=True, text=True, timeout=300, env=environment, cwd=tmp_path)
    return path, proc


def test_a_world_larger_than_the_machine_is_refused_before_anything_starts(tmp_path):
    m = tiny_manifest("huge")
    m["parallelism"] = {"dp": 100000, "pp": 1}
    path, proc = run(tmp_path, m)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: $.parallelism" in proc.stderr
    assert "dp x pp x cp x tp = 100000 ranks do not fit on this machine" in proc.stderr
    assert "--max-local-ranks" in proc.stderr
    assert "starting" not in proc.stderr
    assert not (tmp_path / "results").exists()


def test_the_limit_can_be_raised_and_lowered(tmp_path):
    m = tiny_manifest("two_ranks")
    m["parallelism"] = {"dp": 2, "pp": 1}
    _, proc = run(tmp_path, m, "--max-local-ranks", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "at most 1: the --max-local-ranks 1" in proc.stderr


def test_a_missing_data_file_is_named_before_training(tmp_path):
    m = tiny_manifest("no_data")
    m["data"] = {"source": "jsonl", "jsonl": {"path": "absent.jsonl", "tokenizer": "absent.json"}}
    path, proc = run(tmp_path, m)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: $.data.jsonl.path" in proc.stderr
    assert "absent.jsonl, which does not exist" in proc.stderr


def test_a_missing_tokenizer_is_named_before_the_ranks_start(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "a"},
                                             {"role": "assistant", "content": "b"}]}) + "\n")
    m = tiny_manifest("no_tokenizer")
    m["parallelism"] = {"dp": 2, "pp": 1}
    m["data"] = {"source": "jsonl", "jsonl": {"path": str(data), "tokenizer": "absent-tokenizer.json"}}
    path, proc = run(tmp_path, m)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: $.data.jsonl.tokenizer" in proc.stderr
    assert "starting" not in proc.stderr  # the launcher refused before any rank


def test_a_profile_that_cannot_be_measured_is_named_before_measuring(tmp_path):
    blocker = tmp_path / "a-file"  # a profile "inside" a plain file can never be written
    blocker.write_text("")
    m = tiny_manifest("no_profile_place")
    m["methods"] = [{"name": "sab", "preset": "sab", "attention": {"name": "moba", "block_size": 32, "top_k": 4},
                     "profile": str(blocker / "profiles" / "profile.json")}]
    path, proc = run(tmp_path, m)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: $.methods[0].profile" in proc.stderr
    assert "cannot be written" in proc.stderr
    assert "measuring" not in proc.stderr


def test_a_finished_run_draws_the_plots(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (scripts/lib.sh sb_setup_venv)")
    m = tiny_manifest("plotted")
    env = {"SB_PLOT_PYTHON": sys.executable, "SB_NO_PLOTS": "0"}
    _, proc = run(tmp_path, m, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plots = tmp_path / "results" / "plotted" / "plots"
    assert f"drew the plots into {plots}" in proc.stdout
    assert (plots / "loss.png").stat().st_size > 1000
    _, again = run(tmp_path, copy.deepcopy(m), "--no-plots", env=env)
    assert again.returncode == 0 and "drew the plots" not in again.stdout
