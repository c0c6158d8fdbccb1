"""MoBA inside the model against transformers running MoBA as MoBA's public code defines it.

transformers' Qwen2 runs with an attention function registered here that follows MoBA's
naive reference (MoonshotAI/MoBA, moba_naive.py) written anew: every query token scores
each key block by its dot product with the block's mean key, its own block is always
chosen (causal inside), later blocks never, and the top-(k - 1) earlier blocks complete
its selection; GQA repeats each key/value head over its group. The project's float64
gate and lower-index tie rule (docs/sparsebalance.md 1.1) are followed, so that the
selections are exact. The block gate ([our rule]: the block's mean query) is checked the
same way. The C++ side runs through the real CLI: `sparsebalance eval nll --attention
moba --block B --top-k K --gate token|block`.
"""

import json
import os
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SB_BUILD_DIR", REPO / "build"))
BINARY = os.environ.get("SB_BINARY", str(BUILD / "sparsebalance"))

BLOCK = 8
TOP_K = 3


def moba_mask(query, key, block, top_k, gate):
    """[B, H, S, S] bool: the keys each query attends under MoBA (one sequence, causal)."""
    heads, length = query.shape[1], query.shape[2]
    blocks = (length + block - 1) // block
    block_of = torch.arange(length) // block  # [S]
    key_means = torch.stack([key[:, :, j * block:(j + 1) * block].double().mean(2) for j in range(blocks)], 2)
    if gate == "token":
        rows = query.double()  # [B, H, S, D]: each token routes by itself
    else:
        means = torch.stack([query[:, :, j * block:(j + 1) * block].double().mean(2) for j in range(blocks)], 2)
        rows = means[:, :, block_of]  # every token takes its block's mean query
    scores = torch.einsum("bhsd,bhnd->bhsn", rows, key_means)  # [B, H, S, NB]
    earlier = torch.arange(blocks)[None, :] < block_of[:, None]  # [S, NB]
    ranked = scores.masked_fill(~earlier, float("-inf"))
    order = torch.sort(ranked, dim=-1, descending=True, stable=True).indices  # ties: lower block first
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(blocks).expand_as(order).contiguous())
    chosen = (earlier & (rank < top_k - 1)) | (torch.arange(blocks)[None, :] == block_of[:, None])
    token_mask = chosen[..., block_of]  # [B, H, S, S]: key block of each key
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return token_mask & causal


def make_attention(gate):
    def attend(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        group = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
        mask = moba_mask(query, key, BLOCK, TOP_K, gate)
        scores = torch.einsum("bhsd,bhtd->bhst", query, key) * scaling
        probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        return torch.einsum("bhst,bhtd->bshd", probs, value), None
    return attend


for _gate in ("token", "block"):
    transformers.AttentionInterface.register(f"sb_moba_{_gate}", make_attention(_gate))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(5)
    config = transformers.Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=256, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True)
    model = transformers.Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # sharper attention than HF's init, so that the routing matters
        for name, p in model.named_parameters():
            if "q_proj" in name or "k_proj" in name:
                p.mul_(4.0)
    out = tmp_path_factory.mktemp("moba_gate") / "model"
    model.save_pretrained(out, safe_serialization=True)
    return out


def sparsebalance_nll(checkpoint, ids, tmp_path, gate):
    input_file = tmp_path / "input.jsonl"
    input_file.write_text(json.dumps({"input_ids": ids}) + "\n")
    import subprocess
    proc = subprocess.run([BINARY, "eval", "nll", "--model", str(checkpoint), "--input", str(input_file),
                           "--attention", "moba", "--block", str(BLOCK), "--top-k", str(TOP_K), "--gate", gate],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])["nll"]


def transformers_nll(checkpoint, ids, implementation):
    model = transformers.Qwen2ForCausalLM.from_pretrained(
        checkpoint, dtype=torch.float32, attn_implementation=implementation).eval()
    with torch.no_grad():
        return model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()


@pytest.mark.parametrize("gate", ["token", "block"])
def test_nll_matches_moba_in_transformers(checkpoint, tmp_path, gate):
    ids = torch.randint(0, 96, (61,), generator=torch.Generator().manual_seed(9)).tolist()  # 8 blocks, k 3
    expected = transformers_nll(checkpoint, ids, f"sb_moba_{gate}")
    assert sparsebalance_nll(checkpoint, ids, tmp_path, gate) == pytest.approx(expected, rel=1e-5)
    # Non-vacuous: the sparse attention, and the two gates, give different models here.
    dense = transformers_nll(checkpoint, ids, "eager")
    other = transformers_nll(checkpoint, ids, f"sb_moba_{'block' if gate == 'token' else 'token'}")
    assert abs(expected - dense) > 1e-4
    assert abs(expected - other) > 1e-5


def test_attention_flags_are_checked(checkpoint, tmp_path):
    import subprocess
    input_file = tmp_path / "input.jsonl"
    input_file.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    base = [BINARY, "eval", "nll", "--model", str(checkpoint), "--input", str(input_file)]
    bad_gate = subprocess.run(base + ["--attention", "moba", "--gate", "tokens"], capture_output=True, text=True)
    assert bad_gate.returncode == 2 and "--gate" in bad_gate.stderr and "token" in bad_gate.stderr, bad_gate.stderr
    not_moba = subprocess.run(base + ["--attention", "dense", "--top-k", "4"], capture_output=True, text=True)
    assert not_moba.returncode == 2 and "--top-k" in not_moba.stderr and "moba" in not_moba.stderr, not_moba.stderr
