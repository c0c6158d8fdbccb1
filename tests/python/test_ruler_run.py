"""`sparsebalance eval ruler` end to end on a tiny random Qwen2: prediction files in
RULER's layout (the prompt sent is the sample's input + answer prefix), summary.csv and
ruler.json recomputed here from the prediction lines with tests/python/ruler_reference.py
(RULER's scoring rebuilt on Python's str), a rerun that generates and predicts nothing,
samples drawn with other settings and another model's folder refused, and the same run from an eval spec (a
manifest's `eval` block) giving the report columns ruler_<L> and ruler_avg; the heatmap
script draws the run."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import ruler_reference as ref  # noqa: E402
from longbench_oracle_client import BINARY  # noqa: E402
from longbench_tiny_model import make_model  # noqa: E402
from test_ruler_oracle import make_essay, make_ruler_tokenizer, wonderwords_assets  # noqa: E402

PLOT = Path(__file__).resolve().parents[2] / "scripts" / "plot_ruler.py"
LENGTH = 1536
TASKS = ["niah_single_1", "vt", "fwe"]


def ruler(model, out, haystack, assets, *extra):
    return subprocess.run([str(BINARY), "eval", "ruler", "--model", str(model), "--out", str(out), "--lengths",
                           str(LENGTH), "--samples", "2", "--tasks", ",".join(TASKS), "--haystack", str(haystack),
                           "--words-dir", str(assets), *extra], capture_output=True, text=True, timeout=600)


def test_ruler_predicts_scores_and_resumes(tmp_path):
    assets = wonderwords_assets()
    model = tmp_path / "model"
    make_model(model, make_ruler_tokenizer(model, ref.Words.from_dir(assets)), max_position_embeddings=4096)
    haystack = tmp_path / "essay.txt"
    haystack.write_text(make_essay(), encoding="utf-8")
    out = tmp_path / "out"
    proc = ruler(model, out, haystack, assets)
    assert proc.returncode == 0, proc.stderr

    scores = {}
    for task in TASKS:
        data = [json.loads(x) for x in (out / str(LENGTH) / "data" / task / "validation.jsonl").read_text().splitlines()]
        raw = (out / str(LENGTH) / "pred" / f"{task}.jsonl").read_text().splitlines()
        lines = [json.loads(x) for x in raw]
        assert raw == [json.dumps(p) for p in lines]  # json.dumps' default bytes, as RULER's call_api.py
        assert len(lines) == len(data) == 2
        for d, p in zip(data, lines):
            assert list(p) == ["index", "pred", "input", "outputs", "others", "truncation", "length"]
            assert p["index"] == d["index"] and p["outputs"] == d["outputs"] and p["length"] == d["length"]
            assert p["input"] == d["input"] + d["answer_prefix"]
            assert isinstance(p["pred"], str)
        scores[task] = ref.score_lines(task, lines)
    csv = (out / str(LENGTH) / "pred" / "summary.csv").read_text()
    assert csv == ref.summary_csv_text(scores)
    result = json.loads((out / "ruler.json").read_text())
    assert result["tasks"] == TASKS and result["lengths"] == [LENGTH]
    assert {t: result["scores"][t][str(LENGTH)] for t in TASKS} == {t: s[0] for t, s in scores.items()}
    assert result["average"][str(LENGTH)] == pytest.approx(sum(s[0] for s in scores.values()) / len(TASKS))
    assert result["context"]["git_sha"]

    plot = subprocess.run([sys.executable, str(PLOT), str(out / "ruler.json")], capture_output=True, text=True,
                          timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert (out / "ruler_heatmap.png").stat().st_size > 1000 and (out / "ruler_heatmap.pdf").exists()

    before = {p: p.read_bytes() for p in out.rglob("*.jsonl")}
    again = ruler(model, out, haystack, assets)
    assert again.returncode == 0, again.stderr
    assert "generating" not in again.stderr and "ruler " not in again.stderr  # nothing drawn or predicted
    assert {p: p.read_bytes() for p in out.rglob("*.jsonl")} == before

    # Samples of another seed in the same folder are refused, naming the file.
    other = ruler(model, out, haystack, assets, "--seed", "7")
    assert other.returncode == 2 and "generation.json" in other.stderr and "other settings" in other.stderr

    # Another model (here the same weights under another folder) in the same folder is refused.
    shutil.copytree(model, tmp_path / "model2")
    moved = subprocess.run([str(BINARY), "eval", "ruler", "--model", str(tmp_path / "model2"), "--out", str(out),
                            "--lengths", str(LENGTH), "--samples", "2", "--tasks", ",".join(TASKS), "--haystack",
                            str(haystack), "--words-dir", str(assets)], capture_output=True, text=True, timeout=600)
    assert moved.returncode == 2 and "model.json" in moved.stderr, moved.stderr

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"ruler": {"lengths": [LENGTH], "samples": 2, "tasks": TASKS,
                                          "haystack": str(haystack), "words_dir": str(assets)}}))
    suite = subprocess.run([str(BINARY), "eval", "suite", "--model", str(model), "--spec", str(spec), "--out",
                            str(tmp_path / "suite")], capture_output=True, text=True, timeout=600)
    assert suite.returncode == 0, suite.stderr
    columns = json.loads((tmp_path / "suite" / "eval_columns.json").read_text())
    assert columns[f"ruler_{LENGTH}"] == pytest.approx(result["average"][str(LENGTH)])
    assert columns["ruler_avg"] == pytest.approx(result["average"][str(LENGTH)])
