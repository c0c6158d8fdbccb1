"""scripts/gpu_check_wait.py on a real run: a PP 2 job on CPU ranks whose stage 0 sleeps
800 ms before iteration 2 (SB_FAULT_INJECT=slow) passes (stage 1 waited for it); the same
check on the run without the fault fails, so the check can fail; bad input exits 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))
SCRIPT = REPO / "scripts" / "gpu_check_wait.py"

MANIFEST = {
    "name": "wait",
    "seed": 3,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 32, "max_tokens": 48}]}},
    "parallelism": {"dp": 1, "pp": 2},
    "train": {"iterations": 5, "warmup_iterations": 1, "global_batch_size": 4, "max_tokens_per_microbatch": 48,
              "threads": 1},
    "checkpoint": {"every_iterations": 0},
    "methods": [{"name": "dense"}],
}


def run(tmp_path, results, fault=None):
    manifest = tmp_path / "wait.json"
    manifest.write_text(json.dumps(MANIFEST))
    env = dict(os.environ)
    env.pop("SB_FAULT_INJECT", None)
    if fault:
        env["SB_FAULT_INJECT"] = fault
    done = subprocess.run([BINARY, "run", str(manifest), "--results", str(results), "--no-plots"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return results / "wait" / "dense"


def check(run_dir):
    return subprocess.run([sys.executable, str(SCRIPT), str(run_dir), "--iteration", "2", "--ms", "800"],
                          capture_output=True, text=True, timeout=60)


def test_a_slowed_stage_is_wait_on_the_other(tmp_path):
    slowed = check(run(tmp_path, tmp_path / "slow", "slow:rank=0:iteration=2:ms=800"))
    assert slowed.returncode == 0, slowed.stdout + slowed.stderr
    assert "PASS" in slowed.stdout and "rank 1:" in slowed.stdout
    plain = check(run(tmp_path, tmp_path / "plain"))
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "FAIL" in plain.stdout


def test_bad_input_exits_2(tmp_path):
    missing = check(tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr
