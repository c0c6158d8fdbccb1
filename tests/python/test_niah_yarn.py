"""Needle in a haystack past 32K positions through YaRN rope scaling: a tiny random Qwen2
whose config.json extends 16,384 positions 8x by YaRN (131,072) runs a 65,536-token cell
at depths 0 and 100 with `eval niah`: the contexts hold exactly 65,536 tokens, the needle
lies inside them, a rerun resumes without predicting again; the same folder without
rope_scaling refuses that length, naming its limit. The prefill runs SDPA's fused causal
kernel and keeps only the last token's logits (about 500 MB resident per cell)."""

import json
import subprocess

import pytest

transformers = pytest.importorskip("transformers")

from longbench_oracle_client import BINARY  # noqa: E402
from longbench_tiny_model import make_model, make_tokenizer  # noqa: E402

LENGTH = 65536
YARN = {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16384}


def niah(folder, out):
    return subprocess.run([str(BINARY), "eval", "niah", "--model", str(folder), "--out", str(out), "--lengths",
                           str(LENGTH), "--depths", "0,100", "--samples", "1", "--max-new-tokens", "4"],
                          capture_output=True, text=True, timeout=900)


def test_niah_at_64k_through_yarn_and_refused_without_it(tmp_path):
    yarn = tmp_path / "yarn"
    tok = make_tokenizer(yarn)
    make_model(yarn, tok, max_position_embeddings=16384, rope_scaling=YARN)
    written = json.loads((yarn / "config.json").read_text())
    rope = written.get("rope_parameters") or written.get("rope_scaling")
    assert rope["factor"] == 8.0 and rope.get("rope_type", rope.get("type")) == "yarn"
    proc = niah(yarn, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    cells = [json.loads(line) for line in (tmp_path / "out" / "niah_cells.jsonl").read_text().splitlines()]
    assert sorted(c["depth"] for c in cells) == [0, 100]
    assert all(c["length"] == LENGTH for c in cells)
    assert len({c["prompt_tokens"] - c["length"] for c in cells}) == 1  # contexts of exactly L tokens
    assert all(c["prompt_tokens"] > 32768 for c in cells)
    assert all(0 <= c["needle_position"] <= LENGTH for c in cells)
    grid = json.loads((tmp_path / "out" / "niah.json").read_text())
    assert grid["mean"] == pytest.approx(sum(c["score"] for c in cells) / 2)
    again = niah(yarn, tmp_path / "out")
    assert again.returncode == 0 and "niah: length" not in again.stderr  # resumed: nothing predicted

    plain = tmp_path / "plain"
    make_model(plain, make_tokenizer(plain), max_position_embeddings=16384)
    refused = niah(plain, tmp_path / "out_plain")
    assert refused.returncode == 2, refused.stderr
    assert "16384 positions" in refused.stderr
