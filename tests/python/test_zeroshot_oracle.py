"""`sparsebalance eval zeroshot` against lm-evaluation-harness itself (the pinned lm_eval)
on the same tiny random Qwen2: every task's stock YAML, pointed at local JSONL files in
the Hugging Face datasets' columns, scored by lm-eval's HFLM and by the C++ binary. The
requests (context, continuation strings) must be identical, the per-choice
log-likelihoods equal to 1e-4 with the same is_greedy, and acc / acc_norm per document
and per task (with their standard errors) equal. The documents exercise each task's
preprocessing: HellaSwag's bracket removal, " [title]", double spaces and capitalize()
(non-ASCII included), WinoGrande's partial scoring, OpenBookQA's answerKey.lstrip(),
ARC's numeric labels, a context with trailing whitespace, and left truncation of inputs
longer than the model's window; the same with documents packed into batches
(--batch-tokens). Then a rerun resumes without scoring again, and an
unknown task or a missing file is refused with the file named."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

lm_eval = pytest.importorskip("lm_eval")
transformers = pytest.importorskip("transformers")

from longbench_oracle_client import BINARY  # noqa: E402
from longbench_tiny_model import ENGLISH, make_model, make_tokenizer, sentence  # noqa: E402

PLOT = Path(__file__).resolve().parents[2] / "scripts" / "plot_zeroshot.py"
WINDOW = 96  # max_position_embeddings: BoolQ's long passage is cut from the left


def words(state, n):
    return " ".join(sentence(state, n, ENGLISH))


def task_rows():
    s = [11]
    arc = [{"id": f"arc{i}", "question": words(s, 6 + i),
            "choices": {"text": [words(s, 1 + (i + j) % 3) for j in range(4)], "label": labels},
            "answerKey": labels[i % 4]}
           for i, labels in enumerate([["A", "B", "C", "D"], ["1", "2", "3", "4"], ["A", "B", "C", "D"]])]
    boolq = [{"question": words(s, 5), "passage": words(s, 12), "idx": 0, "label": 1},
             {"question": words(s, 4), "passage": words(s, 120), "idx": 1, "label": 0}]  # > WINDOW tokens
    hellaswag = [
        {"ind": 4, "activity_label": "Removing ice", "ctx_a": "the model reads [header] a long document .",
         "ctx_b": "then CITIES  rivers", "ctx": "", "endings": [" people who lived [step] there ", "the  river",
                                                                  "[title] cities", "nineteenth century"],
         "source_id": "x", "split": "val", "split_type": "indomain", "label": "2"},
        {"ind": 5, "activity_label": "Wiki [title] page", "ctx_a": words(s, 8), "ctx_b": "élan CITIES [broken",
         "ctx": "", "endings": [words(s, 3), "élan cities", words(s, 4), "a [b\nc] d"],
         "source_id": "y", "split": "val", "split_type": "zeroshot", "label": "0"},
    ]
    piqa = [{"goal": words(s, 7), "sol1": words(s, 3), "sol2": words(s, 5), "label": i % 2} for i in range(3)]
    winogrande = [{"sentence": "the model reads _ document about rivers .", "option1": "cities",
                   "option2": "a long", "answer": "2"},
                  {"sentence": words(s, 5) + " _ " + words(s, 4), "option1": "people", "option2": "the river",
                   "answer": "1"}]
    openbookqa = [{"id": "o1", "question_stem": words(s, 6) + " ",  # trailing space moves to the continuation
                   "choices": {"text": [words(s, 2) for _ in range(4)], "label": ["A", "B", "C", "D"]},
                   "answerKey": " C"},
                  {"id": "o2", "question_stem": words(s, 9),
                   "choices": {"text": [words(s, 1) for _ in range(4)], "label": ["A", "B", "C", "D"]},
                   "answerKey": "A"}]
    return {"arc_easy": arc, "arc_challenge": arc[::-1], "boolq": boolq, "hellaswag": hellaswag, "piqa": piqa,
            "winogrande": winogrande, "openbookqa": openbookqa}


STOCK_YAML = {"arc_easy": "arc/arc_easy.yaml", "arc_challenge": "arc/arc_challenge.yaml",
              "boolq": "super_glue/boolq/default.yaml", "hellaswag": "hellaswag/hellaswag.yaml",
              "piqa": "piqa/piqa.yaml", "winogrande": "winogrande/default.yaml",
              "openbookqa": "openbookqa/openbookqa.yaml"}
SPLIT = {"arc_easy": "test", "arc_challenge": "test", "boolq": "validation", "hellaswag": "validation",
         "piqa": "validation", "winogrande": "validation", "openbookqa": "test"}


def run_lm_eval(model_dir, data_dir, include_dir, tasks):
    """lm-eval's own scoring: each stock task YAML included, with its data from a local file."""
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    stock = Path(lm_eval.__file__).parent / "tasks"
    include_dir.mkdir()
    for task in tasks:
        split = SPLIT[task]
        others = "".join(f"{k}: null\n" for k in ("training_split", "validation_split", "test_split") if k != split + "_split")
        (include_dir / f"{task}.yaml").write_text(
            f"include: {stock / STOCK_YAML[task]}\ntask: oracle_{task}\ntag: []\ndataset_path: json\n"
            f"dataset_name: null\ndataset_kwargs:\n  data_files:\n    {split}: {data_dir / (task + '.jsonl')}\n"
            f"{split}_split: {split}\n{others}")
    lm = HFLM(pretrained=str(model_dir), dtype="float32", batch_size=4, device="cpu")
    return lm_eval.simple_evaluate(model=lm, tasks=[f"oracle_{t}" for t in tasks],
                                   task_manager=TaskManager(include_path=str(include_dir)), num_fewshot=0,
                                   log_samples=True)


def zeroshot(model_dir, data_dir, out, *extra):
    return subprocess.run([str(BINARY), "eval", "zeroshot", "--model", str(model_dir), "--data", str(data_dir),
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=600)


def test_zeroshot_matches_lm_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_dir, data_dir = tmp_path / "model", tmp_path / "data"
    make_model(model_dir, make_tokenizer(model_dir), max_position_embeddings=WINDOW)
    data_dir.mkdir()
    rows = task_rows()
    for task, docs in rows.items():
        (data_dir / f"{task}.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs),
                                                encoding="utf-8")
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    oracle = run_lm_eval(model_dir, data_dir, tmp_path / "include", list(rows))

    proc = zeroshot(model_dir, data_dir, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    ours = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(ours["results"]) == list(rows)
    truncated = False
    for task in rows:
        theirs = sorted(oracle["samples"][f"oracle_{task}"], key=lambda x: x["doc_id"])
        mine = [json.loads(line) for line in (tmp_path / "out" / f"samples_{task}.jsonl").read_text().splitlines()]
        assert len(mine) == len(theirs) == len(rows[task])
        for a, b in zip(mine, theirs):
            assert [tuple(x) for x in a["arguments"]] == [tuple(x) for x in b["arguments"]], task
            assert a["target"] == b["target"], task
            for (ll, greedy), (ll_ref, greedy_ref) in zip(a["filtered_resps"], b["filtered_resps"]):
                assert ll == pytest.approx(ll_ref, abs=1e-4), (task, a["doc_id"])
                assert greedy == greedy_ref
            for metric in ("acc", "acc_norm"):
                assert a.get(metric) == b.get(metric), (task, a["doc_id"], metric)
            truncated |= any(len(tok(c + x)["input_ids"]) > WINDOW + 1 for c, x in a["arguments"])
        r, ref = ours["results"][task], oracle["results"][f"oracle_{task}"]
        assert r["sample_len"] == ref["sample_len"]
        for key in ("acc,none", "acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none"):
            assert (key in r) == (key in ref), (task, key)
            if key in r:
                assert r[key] == pytest.approx(ref[key], abs=1e-12), (task, key)
        assert ours["versions"][task] == oracle["versions"][f"oracle_{task}"]
        assert ours["higher_is_better"][task] == oracle["higher_is_better"][f"oracle_{task}"]
    assert truncated  # BoolQ's long passage ran cut from the left in both

    # Packed batches across documents (no shared prefix) give the same scores.
    packed = zeroshot(model_dir, data_dir, tmp_path / "packed", "--batch-tokens", "200")
    assert packed.returncode == 0, packed.stderr
    for task in rows:
        theirs = sorted(oracle["samples"][f"oracle_{task}"], key=lambda x: x["doc_id"])
        mine = [json.loads(line) for line in (tmp_path / "packed" / f"samples_{task}.jsonl").read_text().splitlines()]
        for a, b in zip(mine, theirs, strict=True):
            for (ll, greedy), (ll_ref, greedy_ref) in zip(a["filtered_resps"], b["filtered_resps"], strict=True):
                assert ll == pytest.approx(ll_ref, abs=1e-4), (task, a["doc_id"])
                assert greedy == greedy_ref
            assert a.get("acc") == b.get("acc") and a.get("acc_norm") == b.get("acc_norm")
    primary = [ours["results"][t].get("acc_norm,none", ours["results"][t]["acc,none"]) for t in rows]
    assert ours["sparsebalance"]["average"] == pytest.approx(sum(primary) / len(primary), abs=1e-12)

    plot = subprocess.run([sys.executable, str(PLOT), str(tmp_path / "out" / "results.json")], capture_output=True,
                          text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert (tmp_path / "out" / "zeroshot_bars.png").stat().st_size > 1000

    again = zeroshot(model_dir, data_dir, tmp_path / "out")
    assert again.returncode == 0, again.stderr
    assert "zeroshot" not in again.stderr  # resumed: nothing scored
    assert json.loads((tmp_path / "out" / "results.json").read_text())["results"] == ours["results"]

    # The same through an eval spec (a manifest's `eval` block): report columns per task.
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"zeroshot": {"data": str(data_dir), "tasks": ["piqa", "winogrande"]}}))
    suite = subprocess.run([str(BINARY), "eval", "suite", "--model", str(model_dir), "--spec", str(spec), "--out",
                            str(tmp_path / "suite")], capture_output=True, text=True, timeout=600)
    assert suite.returncode == 0, suite.stderr
    columns = json.loads((tmp_path / "suite" / "eval_columns.json").read_text())
    piqa, wino = ours["results"]["piqa"]["acc_norm,none"], ours["results"]["winogrande"]["acc,none"]
    assert columns["zeroshot_piqa"] == piqa and columns["zeroshot_winogrande"] == wino
    assert columns["zeroshot_avg"] == pytest.approx((piqa + wino) / 2, abs=1e-12)
    assert columns["zeroshot_acc_avg"] == pytest.approx((ours["results"]["piqa"]["acc,none"] + wino) / 2, abs=1e-12)

    unknown = zeroshot(model_dir, data_dir, tmp_path / "o2", "--tasks", "arc_easy,mmlu")
    assert unknown.returncode == 2 and "mmlu" in unknown.stderr and "openbookqa" in unknown.stderr
    (data_dir / "piqa.jsonl").unlink()
    missing = zeroshot(model_dir, data_dir, tmp_path / "o3", "--tasks", "piqa")
    assert missing.returncode == 2 and "piqa.jsonl" in missing.stderr and "convert_zeroshot.py" in missing.stderr
