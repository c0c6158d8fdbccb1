"""scripts/collective_bandwidth.py over Gloo on CPU ranks (the same code measures NCCL on a
cluster, docs/cluster.md): its rows follow nccl-tests' formulas (all-reduce busbw =
algbw x 2 (n - 1) / n, send/recv busbw = algbw, algbw = bytes / time), its results were
checked on every rank, and a job of one rank is refused with a clear message."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "collective_bandwidth.py"


def torchrun(ranks, *args):
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--rdzv-backend", "c10d",
         "--rdzv-endpoint", "127.0.0.1:0", str(SCRIPT), *args],
        capture_output=True, text=True, timeout=240)


def test_three_gloo_ranks_follow_the_nccl_tests_formulas(tmp_path):
    out = tmp_path / "bw.json"
    done = torchrun(3, "--backend", "gloo", "--sizes", "4K,256K", "--iterations", "2", "--warmup", "1",
                    "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["ranks"] == 3 and result["wrong"] == []
    rows = result["rows"]
    assert [(r["op"], r["bytes"]) for r in rows] == [("all-reduce", 4096), ("sendrecv", 4096),
                                                      ("all-reduce", 262144), ("sendrecv", 262144)]
    for r in rows:
        assert r["algbw_gbs"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e-6) / 1e9)
        factor = 4 / 3 if r["op"] == "all-reduce" else 1.0
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * factor)
    assert "| all-reduce | 262144 |" in done.stdout


def test_one_rank_is_refused():
    done = torchrun(1, "--backend", "gloo", "--sizes", "4K")
    assert done.returncode != 0
    assert "needs two or more ranks" in done.stderr
