"""`eval ppl`, `eval niah` (+ scripts/plot_niah.py) and `eval suite` on a tiny random checkpoint:
- ppl: each window's NLL from transformers (labels = input_ids, i.e. the mean over the
  window's predicted tokens), combined token-weighted; ppl = exp(nll);
- niah: contexts of exactly L tokens (prompt tokens - L is the same for every cell), the
  grid is the mean of its cells, a rerun resumes from the cells file (edited scores are
  what the grid then shows), the plot script writes a PNG and a PDF;
- suite: a spec file with every section; its columns equal what the single subcommands
  write (summary.json, longbench_v2_result.json, niah.json, the ppl result).
"""

import json
import math
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from longbench_oracle_client import BINARY, REPO  # noqa: E402
from longbench_tiny_model import ENGLISH, make_checkpoint, sentence  # noqa: E402

PLOT = REPO / "scripts" / "plot_niah.py"
CONFIG = REPO / "tests" / "data" / "longbench" / "config"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("niah_ppl_suite")
    tok, model = make_checkpoint(root / "model")
    return {"root": root, "dir": root / "model", "tok": tok, "model": model}


def run_cli(*args):
    proc = subprocess.run([str(BINARY), "eval", *map(str, args)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_ppl_matches_transformers_window_by_window(tiny, tmp_path):
    state = [5]
    docs = [{"text": " ".join(sentence(state, n, ENGLISH))} for n in (3, 40, 150)]
    docs += [{"input_ids": [5, 9, 11, 30, 2, 7, 8]}, {"text": ""}]
    data = tmp_path / "held.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    window = 32
    result = json.loads(run_cli("ppl", "--model", tiny["dir"], "--input", data, "--max-length", window,
                                "--out", tmp_path / "ppl.json").stdout)
    assert json.loads((tmp_path / "ppl.json").read_text()) == result
    total, tokens, windows = 0.0, 0, 0
    for d in docs:
        ids = d["input_ids"] if "input_ids" in d else tiny["tok"](d["text"]).input_ids
        for start in range(0, len(ids), window):
            chunk = ids[start:start + window]
            if len(chunk) < 2:
                continue
            with torch.no_grad():
                loss = tiny["model"](torch.tensor([chunk]), labels=torch.tensor([chunk])).loss.item()
            total += loss * (len(chunk) - 1)
            tokens += len(chunk) - 1
            windows += 1
    assert result["tokens"] == tokens and result["windows"] == windows
    assert result["skipped_documents"] == 1 and result["documents"] == 4
    assert result["nll"] == pytest.approx(total / tokens, rel=1e-5)
    assert result["ppl"] == pytest.approx(math.exp(total / tokens), rel=1e-5)


def token_losses(model, ids):
    """-log p(ids[t + 1] | ids[:t + 1]) for t = 0 .. len(ids) - 2, from transformers."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].double()
    return (-torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:]).unsqueeze(1))[:, 0]).tolist()


def test_sliding_windows_and_position_buckets_match_transformers(tiny, tmp_path):
    """transformers' perplexity guide: windows every `stride` tokens, each scoring only the
    tokens after the previous window; a token's position is its index in its window."""
    state = [7]
    docs = [{"text": " ".join(sentence(state, n, ENGLISH))} for n in (40, 150)]
    docs += [{"input_ids": [5, 9, 11, 30, 2, 7, 8]}]
    data = tmp_path / "held.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    window, stride, width = 32, 12, 8
    result = json.loads(run_cli("ppl", "--model", tiny["dir"], "--input", data, "--max-length", window,
                                "--stride", stride, "--bucket-tokens", width).stdout)
    total, scored, windows = 0.0, 0, 0
    buckets = {}
    for d in docs:
        ids = d["input_ids"] if "input_ids" in d else tiny["tok"](d["text"]).input_ids
        scored_until = 1
        for start in range(0, len(ids), stride):
            if scored_until >= len(ids):
                break
            chunk = ids[start:start + window]
            losses = token_losses(tiny["model"], chunk)
            windows += 1
            for t in range(max(0, scored_until - start - 1), len(chunk) - 1):
                total += losses[t]
                scored += 1
                bucket = buckets.setdefault((t + 1) // width, [0.0, 0])
                bucket[0] += losses[t]
                bucket[1] += 1
            scored_until = start + len(chunk)
    assert scored == sum(len(d.get("input_ids") or tiny["tok"](d["text"]).input_ids) - 1 for d in docs)
    assert result["tokens"] == scored and result["windows"] == windows > len(docs)
    assert result["stride"] == stride and result["bucket_tokens"] == width
    assert result["nll"] == pytest.approx(total / scored, rel=1e-5)
    got = result["by_position"]
    assert [(b["from"], b["to"], b["tokens"]) for b in got] == \
        [(k * width, (k + 1) * width, buckets[k][1]) for k in sorted(buckets)]
    for b, k in zip(got, sorted(buckets)):
        assert b["nll"] == pytest.approx(buckets[k][0] / buckets[k][1], rel=1e-5)
        assert b["ppl"] == pytest.approx(math.exp(b["nll"]), rel=1e-9)
    # A stride that is not below the window is a clear error naming the flag.
    proc = subprocess.run([str(BINARY), "eval", "ppl", "--model", str(tiny["dir"]), "--input", str(data),
                           "--max-length", "32", "--stride", "32"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "--stride" in proc.stderr


def test_niah_grid_resume_and_plot(tiny, tmp_path):
    out = tmp_path / "niah"
    args = ["niah", "--model", tiny["dir"], "--out", out, "--lengths", "64,128,200", "--depths", "0,50,100",
            "--samples", "2", "--max-new-tokens", "4"]
    run_cli(*args)
    grid = json.loads((out / "niah.json").read_text())
    cells = [json.loads(line) for line in (out / "niah_cells.jsonl").read_text().splitlines()]
    assert len(cells) == 3 * 3 * 2
    assert len({c["prompt_tokens"] - c["length"] for c in cells}) == 1  # contexts of exactly L tokens
    assert all(len(c["value"]) == 7 and c["value"].isdigit() for c in cells)
    assert all(0 <= c["needle_position"] <= c["length"] for c in cells)
    # Edit the recorded scores: the resumed run generates nothing and aggregates them.
    for i, c in enumerate(cells):
        c["score"] = float(i % 3 == 0)
    (out / "niah_cells.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cells))
    proc = run_cli(*args)
    assert "niah: length" not in proc.stderr  # nothing predicted again
    grid = json.loads((out / "niah.json").read_text())
    for di, depth in enumerate([0, 50, 100]):
        for li, length in enumerate([64, 128, 200]):
            mine = [c["score"] for c in cells if c["length"] == length and c["depth"] == depth]
            assert grid["scores"][di][li] == sum(mine) / 2
    assert grid["mean"] == pytest.approx(sum(c["score"] for c in cells) / len(cells))
    # Other settings on the same folder are refused.
    bad = subprocess.run([str(BINARY), "eval", *map(str, args[:-4]), "--seed", "7"], capture_output=True, text=True)
    assert bad.returncode == 2 and "other settings" in bad.stderr
    subprocess.run([sys.executable, str(PLOT), str(out / "niah.json")], check=True)
    for suffix in (".png", ".pdf"):
        assert (out / f"niah_heatmap{suffix}").stat().st_size > 1000
    image = __import__("matplotlib.image", fromlist=["imread"]).imread(str(out / "niah_heatmap.png"))
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_suite_columns_equal_the_single_commands(tiny, tmp_path):
    state = [9]
    data = tmp_path / "lb"
    data.mkdir()
    for task in ("qasper", "passage_count"):
        items = [{"input": " ".join(sentence(state, 5, ENGLISH)), "context": " ".join(sentence(state, 60, ENGLISH)),
                  "answers": ["3"] if task == "passage_count" else [" ".join(sentence(state, 2, ENGLISH))],
                  "length": 500, "all_classes": None, "_id": f"{task}{i}"} for i in range(2)]
        (data / f"{task}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    v2 = [{"_id": f"q{i}", "domain": "d", "sub_domain": "s", "difficulty": "easy", "length": "short",
           "question": "which?", "choice_A": "a", "choice_B": "b", "choice_C": "c", "choice_D": "d", "answer": "A",
           "context": " ".join(sentence(state, 50, ENGLISH))} for i in range(2)]
    (tmp_path / "v2.json").write_text(json.dumps(v2))
    (tmp_path / "held.jsonl").write_text(json.dumps({"text": " ".join(sentence(state, 80, ENGLISH))}) + "\n")
    config = tmp_path / "config"
    config.mkdir()
    for name in ("dataset2prompt.json", "v2_0shot.txt"):
        (config / name).write_bytes((CONFIG / name).read_bytes())
    (config / "dataset2maxlen.json").write_text(json.dumps({"qasper": 6, "passage_count": 4}))
    spec = {"longbench": {"data": "lb", "config": "config", "tasks": ["qasper", "passage_count"], "max_length": 100},
            "longbench_v2": {"data": "v2.json", "config": "config", "max_length": 100, "max_new_tokens": 6},
            "niah": {"lengths": [64], "depths": [0, 100], "max_new_tokens": 4},
            "heldout": {"data": "held.jsonl", "max_length": 32}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out"
    columns = json.loads(run_cli("suite", "--model", tiny["dir"], "--spec", tmp_path / "spec.json",
                                 "--out", out).stdout)
    assert json.loads((out / "eval_columns.json").read_text()) == columns
    summary = json.loads((out / "longbench" / "summary.json").read_text())
    assert columns["longbench_avg"] == summary["overall"]["average"]
    assert columns["longbench_en_avg"] == summary["english"]["average"]
    assert columns["longbench_single_doc_qa"] == summary["overall"]["single_doc_qa"]
    assert "longbench_zh_avg" not in columns
    v2_result = json.loads((out / "longbench_v2" / "longbench_v2_result.json").read_text())
    assert columns["longbench_v2_overall"] == v2_result["overall"]
    assert columns["niah_score"] == json.loads((out / "niah" / "niah.json").read_text())["mean"]
    ppl = json.loads(run_cli("ppl", "--model", tiny["dir"], "--input", tmp_path / "held.jsonl",
                             "--max-length", 32).stdout)
    assert columns["heldout_nll"] == ppl["nll"] and columns["heldout_ppl"] == ppl["ppl"]
    # A typo in the spec names its JSON path.
    spec["niah"]["lenghts"] = [64]
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    proc = subprocess.run([str(BINARY), "eval", "suite", "--model", str(tiny["dir"]), "--spec",
                           str(tmp_path / "bad.json"), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2 and "$.niah.lenghts" in proc.stderr
