"""The same binary under the real torchrun (torch.distributed.run, whose agent serves
the rendezvous store): a DP1 x PP2 run started by torchrun gives the same losses as
the same manifest started by sparsebalance's own launcher, and records that torchrun
launched it."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))

MANIFEST = {
    "name": "torchrun",
    "seed": 4,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "parallelism": {"pp": 2},
    "train": {"iterations": 3, "warmup_iterations": 1, "global_batch_size": 6,
              "max_tokens_per_microbatch": 64, "threads": 1},
    "methods": [{"name": "dense"}],
}


def losses(run_dir):
    return [json.loads(line)["loss"] for line in (run_dir / "records.jsonl").read_text().splitlines()]


def test_torchrun_ranks_match_the_local_launcher(tmp_path):
    manifest = tmp_path / "torchrun.json"
    manifest.write_text(json.dumps(MANIFEST))
    launcher = subprocess.run([BINARY, "run", str(manifest), "--results", str(tmp_path / "launcher")],
                              capture_output=True, text=True, timeout=300)
    assert launcher.returncode == 0, launcher.stdout + launcher.stderr
    torchrun = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", "127.0.0.1:0", "--no-python",
         BINARY, "run", str(manifest), "--results", str(tmp_path / "torchrun")],
        capture_output=True, text=True, timeout=300)
    assert torchrun.returncode == 0, torchrun.stdout + torchrun.stderr
    by_launcher = tmp_path / "launcher" / "torchrun" / "dense"
    by_torchrun = tmp_path / "torchrun" / "torchrun" / "dense"
    assert losses(by_torchrun) == losses(by_launcher)
    world = json.loads((by_torchrun / "context.json").read_text())["world"]
    assert world["launched_by"] == "torchrun"
    assert (world["dp"], world["pp"]) == (1, 2)
    assert json.loads((by_launcher / "context.json").read_text())["world"]["launched_by"] == "sparsebalance launcher"
