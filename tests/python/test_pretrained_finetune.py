"""Fine-tuning from a Hugging Face folder (`model.from`), with transformers and PEFT as
the oracles. A tiny random Qwen2 and a tiny ChatML tokenizer are saved by transformers
(tied head; untied head with YaRN rope scaling); `sparsebalance run` trains on JSONL
conversations from that folder, and:
- the first iteration's loss equals transformers' token-mean cross-entropy of the same
  batch (the conversations rendered as the ChatML pieces the data loader encodes, loss on
  the assistant spans) within 1e-5;
- the final checkpoint loads in transformers with no missing or unexpected tensors, and
  its logits equal the C++ model's on the same folder within 1e-4; it carries the
  source's token ids, generation_config.json and tokenizer files;
- a two-stage pipeline starts from the same weights (the one-process run's losses);
- a LoRA run's adapter/ loads in PEFT on the base folder and gives the merged
  checkpoint's logits.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file  # noqa: E402

import longbench_tiny_model as tiny  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SB_BUILD_DIR", REPO / "build"))
BINARY = os.environ.get("SB_BINARY", str(BUILD / "sparsebalance"))
ORACLE = str(BUILD / "tests" / "sb_model_oracle")

ITERATIONS = 3
CONVERSATIONS = [
    [{"role": "user", "content": "the model reads a long document"},
     {"role": "assistant", "content": "and answers a question about it ."}],
    [{"role": "system", "content": "you are terse"},
     {"role": "user", "content": "describe cities rivers and people"},
     {"role": "assistant", "content": "passages from wikipedia"},
     {"role": "user", "content": "who lived there ?"},
     {"role": "assistant", "content": "people in the nineteenth century"}],
    [{"role": "user", "content": "我们在北京讨论长文本模型"},
     {"role": "assistant", "content": "今天天气很好会议总结如下"}],
    [{"role": "user", "content": ""},
     {"role": "assistant", "content": "the rivers"}],
    [{"role": "user", "content": " ".join(["question about the document"] * 12)},
     {"role": "assistant", "content": " ".join(["answer"] * 9)}],
]


def run(*args, cwd=None):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def make_folder(root: Path, name: str, tied: bool, yarn: bool) -> Path:
    folder = root / name
    tok = tiny.make_tokenizer(folder)
    torch.manual_seed(1)
    config = transformers.Qwen2Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=256, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=tied, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), pad_token_id=tok.pad_token_id,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64} if yarn else None)
    model = transformers.Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("bias") or "norm" in pname:
                p.add_(torch.randn_like(p) * 0.1)
    model.generation_config.eos_token_id = [config.eos_token_id, tok.convert_tokens_to_ids("<|endoftext|>")]
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained")
    return {"tied": make_folder(root, "tied", tied=True, yarn=False),
            "untied_yarn": make_folder(root, "untied_yarn", tied=False, yarn=True)}


def write_data(path: Path):
    path.write_text("".join(json.dumps({"messages": m}, ensure_ascii=False) + "\n" for m in CONVERSATIONS),
                    encoding="utf-8")


def manifest(folder: Path, data: Path, **train):
    return {
        "name": "ft", "seed": 5,
        "model": {"from": str(folder)},
        "data": {"source": "jsonl", "jsonl": {"path": str(data), "shuffle": False}},
        "parallelism": {"dp": 1, "pp": train.pop("pp", 1), "timeout_s": 60},
        "checkpoint": {"every_iterations": 0, "at_end": True},
        "train": {"device": "cpu", "iterations": ITERATIONS, "warmup_iterations": 0,
                  "global_batch_size": len(CONVERSATIONS), "max_tokens_per_microbatch": 256,
                  "lr": 3e-3, "lr_warmup_fraction": 0.0, "threads": 1, **train},
        "methods": [{"name": "dense", "preset": "dense"}],
    }


def train(tmp_path: Path, m: dict) -> Path:
    """Runs the manifest; returns the run folder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(m))
    run(BINARY, "run", path, "--results", tmp_path / "results", "--no-plots")
    return tmp_path / "results" / m["name"] / "dense"


def losses(run_dir: Path):
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if line.strip()]


def chatml_pieces(tok, messages):
    """ids and trained flags as the data loader encodes a conversation: per message
    "<|im_start|>{role}\\n" (never trained), "{content}<|im_end|>" (trained for the
    assistant), "\\n" (never trained), each piece encoded on its own."""
    ids, trained = [], []
    for m in messages:
        for text, on in (("<|im_start|>" + m["role"] + "\n", False),
                         (m["content"] + "<|im_end|>", m["role"] == "assistant"), ("\n", False)):
            piece = tok.encode(text, add_special_tokens=False)
            ids += piece
            trained += [on] * len(piece)
    return ids, trained


def transformers_batch_loss(folder: Path) -> float:
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for messages in CONVERSATIONS:
            ids, trained = chatml_pieces(tok, messages)
            logits = model(torch.tensor([ids])).logits[0].double()  # [T, V]
            targets = torch.tensor(ids[1:])
            mask = torch.tensor(trained[1:])
            token_loss = torch.nn.functional.cross_entropy(logits[:-1], targets, reduction="none")
            total += token_loss[mask].sum().item()
            count += int(mask.sum())
    return total / count


def final_checkpoint(run_dir: Path) -> Path:
    root = run_dir / "checkpoints"
    return root / (root / "latest").read_text().strip()


def cpp_logits(folder: Path, ids, tmp_path: Path):
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps(ids))
    out = tmp_path / "logits.safetensors"
    run(ORACLE, "logits", folder, ids_file, "fp32", out)
    return load_file(out)["logits"]


def rope_scaling(config):
    """(type, factor, original positions) as transformers read them; None for plain RoPE."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    return None if kind == "default" else (kind, rope.get("factor"), rope.get("original_max_position_embeddings"))


PROBE = [5, 17, 230, 41, 9, 77, 120, 3, 64, 18, 200, 33]


@pytest.mark.parametrize("name", ["tied", "untied_yarn"])
def test_first_loss_is_transformers_loss_and_the_saved_folder_loads_in_transformers(folders, tmp_path, name):
    folder = folders[name]
    data = tmp_path / "data.jsonl"
    write_data(data)
    run_dir = train(tmp_path, manifest(folder, data))
    recorded = losses(run_dir)
    assert len(recorded) == ITERATIONS
    expected = transformers_batch_loss(folder)
    assert recorded[0] == pytest.approx(expected, rel=1e-5), (recorded, expected)
    assert recorded[-1] < recorded[0]  # it trained

    saved = final_checkpoint(run_dir)
    model, info = transformers.Qwen2ForCausalLM.from_pretrained(saved, dtype=torch.float32,
                                                                output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        theirs = model.eval()(torch.tensor([PROBE])).logits[0]
        before = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()(
            torch.tensor([PROBE])).logits[0]
    assert (theirs - before).abs().max() > 1e-3  # the saved weights are the trained ones
    torch.testing.assert_close(cpp_logits(saved, PROBE, tmp_path), theirs, rtol=1e-4, atol=1e-4)

    # What generation and tokenization need travels with the weights.
    source_config = json.loads((folder / "config.json").read_text())
    saved_config = json.loads((saved / "config.json").read_text())
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        assert saved_config[key] == source_config[key], key
    rope = [rope_scaling(transformers.AutoConfig.from_pretrained(f)) for f in (folder, saved)]
    assert rope[0] == rope[1], rope
    source_generation = json.loads((folder / "generation_config.json").read_text())
    assert json.loads((saved / "generation_config.json").read_text()) == source_generation
    for file in ("tokenizer.json", "tokenizer_config.json"):
        assert (saved / file).read_bytes() == (folder / file).read_bytes(), file
    assert transformers.AutoTokenizer.from_pretrained(saved).chat_template == tiny.QWEN_CHAT_TEMPLATE


def test_a_pipeline_of_two_stages_starts_from_the_folders_weights(folders, tmp_path):
    folder = folders["untied_yarn"]
    data = tmp_path / "data.jsonl"
    write_data(data)
    one = losses(train(tmp_path / "pp1", manifest(folder, data)))
    two = losses(train(tmp_path / "pp2", manifest(folder, data, pp=2)))
    assert two == pytest.approx(one, rel=1e-5)


def test_lora_adapter_loads_in_peft_on_the_base_folder(folders, tmp_path):
    peft = pytest.importorskip("peft")
    folder = folders["tied"]
    data = tmp_path / "data.jsonl"
    write_data(data)
    lora = {"rank": 4, "alpha": 16.0, "dropout": 0.0, "target_modules": ["q_proj", "v_proj", "down_proj"]}
    run_dir = train(tmp_path, manifest(folder, data, lr=2e-2, lora=lora))
    assert losses(run_dir)[0] == pytest.approx(transformers_batch_loss(folder), rel=1e-5)  # B starts at zero
    saved = final_checkpoint(run_dir)
    config = json.loads((saved / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(folder)
    assert config["r"] == 4 and config["lora_alpha"] == 16.0 and config["target_modules"] == lora["target_modules"]
    base = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        base_logits = base(torch.tensor([PROBE])).logits[0]
        adapted = peft.PeftModel.from_pretrained(base, saved / "adapter").eval()(torch.tensor([PROBE])).logits[0]
        merged, info = transformers.Qwen2ForCausalLM.from_pretrained(saved, dtype=torch.float32,
                                                                     output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], info
        merged_logits = merged.eval()(torch.tensor([PROBE])).logits[0]
    assert (adapted - base_logits).abs().max() > 1e-3  # the adapters moved the model
    torch.testing.assert_close(adapted, merged_logits, rtol=1e-4, atol=1e-5)


def test_training_on_a_tokenized_cache_gives_transformers_loss_of_its_ids(folders, tmp_path):
    """The cache of scripts/data/tokenize_sft.py (the folder's own chat template, checked
    against apply_chat_template in test_tokenize_sft.py) read by the C++ trainer: its
    first loss is transformers' loss of the cached ids on the cached assistant spans."""
    import numpy as np
    folder = folders["tied"]
    data = tmp_path / "data.jsonl"
    write_data(data)
    cache = tmp_path / "cache"
    run(sys.executable, REPO / "scripts" / "data" / "tokenize_sft.py", "--data", data, "--tokenizer-dir", folder,
        "--out", cache, "--workers", "1")
    m = manifest(folder, data)
    m["data"] = {"source": "tokenized", "tokenized": {"path": str(cache), "shuffle": False}}
    run_dir = train(tmp_path, m)

    ids = np.fromfile(cache / "tokens.u32", dtype="<u4").astype(np.int64)
    trained = np.fromfile(cache / "targets.u8", dtype=np.uint8).astype(bool)
    offsets = np.fromfile(cache / "offsets.i64", dtype="<i8")
    assert len(offsets) == len(CONVERSATIONS) + 1
    model = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for begin, end in zip(offsets[:-1], offsets[1:]):
            seq = torch.from_numpy(ids[begin:end])
            mask = torch.from_numpy(trained[begin + 1:end])
            logits = model(seq[None]).logits[0].double()
            token_loss = torch.nn.functional.cross_entropy(logits[:-1], seq[1:], reduction="none")
            total += token_loss[mask].sum().item()
            count += int(mask.sum())
    assert losses(run_dir)[0] == pytest.approx(total / count, rel=1e-5)
    # Qwen2.5's template adds its default system prompt, which the native ChatML path does not.
    assert losses(run_dir)[0] != pytest.approx(transformers_batch_loss(folder), rel=1e-5)


def test_a_preset_that_is_not_the_folders_architecture_is_refused(folders, tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data)
    m = manifest(folders["tied"], data)
    m["model"]["preset"] = "qwen2-tiny"
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(m))
    proc = subprocess.run([BINARY, "run", str(path), "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "$.model.from" in proc.stderr and "qwen2-tiny" in proc.stderr and "hidden_size" in proc.stderr, proc.stderr
    assert not (tmp_path / "results" / "ft").exists() or not any((tmp_path / "results" / "ft").iterdir())


@pytest.mark.parametrize("path", sorted((REPO / "experiments" / "paper").glob("*.json")), ids=lambda p: p.stem)
def test_paper_manifests_ask_for_the_checkpoint_through_set(path, tmp_path):
    """The paper's GPU rows name placeholder folders; run without --set, they stop before
    anything starts and say how to pass a checkpoint."""
    proc = subprocess.run([BINARY, "run", str(path), "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "$.model.from" in proc.stderr and "--set model.from=" in proc.stderr, proc.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("status.json"))
