"""`sparsebalance eval longbench` / `longbench-v2` end to end on a tiny random Qwen2 checkpoint
and a tiny byte-level BPE tokenizer with ChatML tokens, both made here with transformers /
tokenizers, against upstream's prediction recipe written in Python on the same files:

- prompt ids: template.format(**item); if longer than max_length tokens, decode the first
  and the last int(max_length / 2) ids separately (skipping special tokens) and join the
  strings; Qwen2.5-Instruct's chat template through transformers' apply_chat_template
  (except trec, triviaqa, samsum, lsht, lcc, repobench-p); tokenize again;
- predictions: transformers' greedy generate with each task's max new tokens; samsum with
  eos_token_id=[tokenizer eos, id of "\\n"] and min_length = prompt + 1; decoded skipping
  special tokens; the prediction files equal, line for line and byte for byte;
- resume: a file cut mid-line is completed to the same bytes; a file of other data is an
  error; v2: the v2 truncation (one decode), template, answer parsing, result file.

max new tokens are lowered in the test's config (dataset2maxlen.json) to keep it short;
the prompt templates are upstream's (tests/data/longbench/config).
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from longbench_oracle_client import BINARY, REPO, cpp_values  # noqa: E402
from longbench_tiny_model import CHINESE, ENGLISH, make_checkpoint, sentence  # noqa: E402

CONFIG = REPO / "tests" / "data" / "longbench" / "config"
REFERENCE = Path(__file__).resolve().parent / "longbench_reference.py"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
NO_CHAT = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}
TASKS = ["hotpotqa", "multifieldqa_zh", "trec", "samsum", "lcc"]
MAX_NEW = {"hotpotqa": 12, "multifieldqa_zh": 10, "trec": 8, "samsum": 16, "lcc": 8}
MAX_LENGTH = 120


def make_items(task):
    state = [sum(map(ord, task)) + 3]
    items = []
    for i, n in enumerate((20, 90, 260)):  # the longer two exceed MAX_LENGTH tokens
        if task == "multifieldqa_zh":
            context = "".join(sentence(state, n, list(CHINESE)))
            question = "".join(sentence(state, 6, list(CHINESE))) + "？"
        else:
            context = " ".join(sentence(state, n, ENGLISH))
            question = " ".join(sentence(state, 6, ENGLISH)) + "?"
        if i == 2:  # a special token's text inside the context: encoded as the token, dropped by the decode
            context = context[:40] + "<|endoftext|>" + context[40:]
        if task == "samsum":
            question = "Dialogue: " + question + "\nSummary: "
        items.append({"input": question, "context": context, "answers": [" ".join(sentence(state, 3, ENGLISH))],
                      "length": 1000 * (i + 1), "dataset": task, "language": "en",
                      "all_classes": ["City", "Country", "Other location"] if task == "trec" else None,
                      "_id": f"{task}-{i}"})
    return items


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("longbench_predict")
    model_dir = root / "model"
    tok, model = make_checkpoint(model_dir)
    data = root / "data"
    data.mkdir()
    for task in TASKS:
        (data / f"{task}.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in make_items(task)),
                                            encoding="utf-8")
    config = root / "config"
    shutil.copytree(CONFIG, config)
    (config / "dataset2maxlen.json").write_text(json.dumps(MAX_NEW))
    return {"root": root, "model_dir": model_dir, "tok": tok, "model": model, "data": data, "config": config,
            "prompts": json.loads((CONFIG / "dataset2prompt.json").read_text(encoding="utf-8"))}


def python_prompt_ids(tok, task, template, item, max_length, system=QWEN_SYSTEM):
    prompt = template.format(**item)
    ids = tok(prompt).input_ids
    if len(ids) > max_length:
        half = int(max_length / 2)
        prompt = tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-half:], skip_special_tokens=True)
    if task not in NO_CHAT:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok(prompt).input_ids


def python_prediction(model, tok, task, ids, repetition_penalty=1.0):
    kwargs = {"max_new_tokens": MAX_NEW[task], "do_sample": False, "num_beams": 1,
              "pad_token_id": tok.pad_token_id, "repetition_penalty": repetition_penalty}
    if task == "samsum":
        kwargs["eos_token_id"] = [tok.eos_token_id, tok.encode("\n", add_special_tokens=False)[-1]]
        kwargs["min_length"] = len(ids) + 1
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), **kwargs)[0]
    return tok.decode(out[len(ids):], skip_special_tokens=True)


def run_cli(*args):
    return subprocess.run([str(BINARY), "eval", *map(str, args)], capture_output=True, text=True, timeout=900)


def test_prompt_ids_follow_upstreams_truncation_and_qwens_chat_template(setup):
    tok = setup["tok"]
    requests, expected = [], []
    for task in TASKS:
        for item in make_items(task):
            for max_length in (MAX_LENGTH, 41, 2, 100000):
                requests.append({"op": "longbench_prompt", "tokenizer": str(setup["model_dir"] / "tokenizer.json"),
                                 "task": task, "template": setup["prompts"][task], "item": item,
                                 "max_length": max_length, "chat": True, "system_prompt": QWEN_SYSTEM})
                expected.append(python_prompt_ids(tok, task, setup["prompts"][task], item, max_length))
    got = cpp_values(requests, "ids")
    assert got == expected
    truncated = cpp_values(requests, "truncated")
    assert 0 < sum(truncated) < len(truncated)
    # A system prompt of the user's choice.
    item = make_items("hotpotqa")[1]
    request = dict(requests[0], item=item, system_prompt="Be brief.")
    assert cpp_values([request], "ids")[0] == python_prompt_ids(
        tok, "hotpotqa", setup["prompts"]["hotpotqa"], item, MAX_LENGTH, system="Be brief.")


def test_predictions_equal_transformers_greedy_generate(setup, tmp_path):
    out = tmp_path / "pred"
    proc = run_cli("longbench", "--model", setup["model_dir"], "--data", setup["data"], "--config", setup["config"],
                   "--out", out, "--tasks", ",".join(TASKS), "--max-length", MAX_LENGTH)
    assert proc.returncode == 0, proc.stderr
    tok, model = setup["tok"], setup["model"]
    nonempty = 0
    for task in TASKS:
        lines = (out / f"{task}.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
        items = make_items(task)
        assert len(lines) == len(items)
        for line, item in zip(lines, items):
            ids = python_prompt_ids(tok, task, setup["prompts"][task], item, MAX_LENGTH)
            expected = {"pred": python_prediction(model, tok, task, ids), "answers": item["answers"],
                        "all_classes": item["all_classes"], "length": item["length"]}
            assert line == json.dumps(expected, ensure_ascii=False), task
            nonempty += bool(expected["pred"])
    assert nonempty > len(TASKS)  # the model says something: the comparison has content
    # Then scored as upstream scores the folder.
    ref_out = tmp_path / "reference.json"
    subprocess.run([sys.executable, str(REFERENCE), str(out), str(ref_out)], check=True, cwd=tmp_path)
    assert json.loads((out / "result.json").read_text()) == json.loads(ref_out.read_text())
    setup["predictions"] = out


def test_repetition_penalty_equals_transformers(setup, tmp_path):
    out = tmp_path / "pred"
    tasks = ["hotpotqa", "samsum"]
    proc = run_cli("longbench", "--model", setup["model_dir"], "--data", setup["data"], "--config", setup["config"],
                   "--out", out, "--tasks", ",".join(tasks), "--max-length", MAX_LENGTH, "--repetition-penalty", 1.3)
    assert proc.returncode == 0, proc.stderr
    tok, model = setup["tok"], setup["model"]
    differs = 0
    for task in tasks:
        lines = (out / f"{task}.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
        for line, item in zip(lines, make_items(task)):
            ids = python_prompt_ids(tok, task, setup["prompts"][task], item, MAX_LENGTH)
            expected = python_prediction(model, tok, task, ids, repetition_penalty=1.3)
            assert json.loads(line)["pred"] == expected, task
            differs += expected != python_prediction(model, tok, task, ids)
    assert differs > 0  # the penalty changes some predictions: the comparison is not vacuous


def test_resume_completes_a_cut_file_to_the_same_bytes(setup, tmp_path):
    if "predictions" not in setup:
        pytest.skip("needs test_predictions_equal_transformers_greedy_generate")
    done = setup["predictions"]
    out = tmp_path / "pred"
    shutil.copytree(done, out)
    (out / "result.json").unlink()
    text = (done / "hotpotqa.jsonl").read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]
    (out / "hotpotqa.jsonl").write_text(lines[0] + "\n" + lines[1][:25], encoding="utf-8")  # cut mid-line
    (out / "trec.jsonl").unlink()
    proc = run_cli("longbench", "--model", setup["model_dir"], "--data", setup["data"], "--config", setup["config"],
                   "--out", out, "--tasks", ",".join(TASKS), "--max-length", MAX_LENGTH)
    assert proc.returncode == 0, proc.stderr
    assert "unfinished last line was cut off" in proc.stderr
    for task in TASKS:
        assert (out / f"{task}.jsonl").read_bytes() == (done / f"{task}.jsonl").read_bytes(), task
    assert (out / "result.json").read_bytes() == (done / "result.json").read_bytes()

    # A prediction file of other data is refused, naming the file and line.
    other = json.loads(lines[0])
    other["answers"] = ["something else"]
    (out / "hotpotqa.jsonl").write_text(json.dumps(other, ensure_ascii=False) + "\n", encoding="utf-8")
    proc = run_cli("longbench", "--model", setup["model_dir"], "--data", setup["data"], "--config", setup["config"],
                   "--out", out, "--tasks", "hotpotqa", "--max-length", MAX_LENGTH)
    assert proc.returncode == 2 and "hotpotqa.jsonl:1" in proc.stderr


def extract_answer(response):
    response = response.replace("*", "")
    m = re.search(r"The correct answer is \(([A-D])\)", response) or re.search(r"The correct answer is ([A-D])", response)
    return m.group(1) if m else None


def test_v2_answer_parsing_matches_the_regexes():
    texts = ["The correct answer is (B)", "The correct answer is B.", "**The correct answer is (C)**",
             "The correct answer is (E) or The correct answer is D", "the correct answer is (A)", "",
             "The correct answer is (A", "The correct answer is *(*D*)*", "The correct answer is  (A)",
             "x The correct answer is (B) then The correct answer is (C)", "The correct answer is AB"]
    assert cpp_values([{"op": "v2_extract", "text": t} for t in texts], "answer") == [extract_answer(t) for t in texts]


def v2_items():
    state = [11]
    items = []
    for i, n in enumerate((30, 200, 400)):
        items.append({"_id": f"q{i}", "domain": "Single-Document QA", "sub_domain": "x",
                      "difficulty": ["easy", "hard", "hard"][i], "length": ["short", "medium", "long"][i],
                      "question": " ".join(sentence(state, 8, ENGLISH)) + "? ",
                      "choice_A": " yes", "choice_B": "no ", "choice_C": "$Q$", "choice_D": "maybe",
                      "answer": "ABC"[i], "context": "  " + " ".join(sentence(state, n, ENGLISH)) + "\n"})
    return items


def test_v2_predictions_follow_upstream(setup, tmp_path):
    tok, model = setup["tok"], setup["model"]
    data = tmp_path / "data.json"
    data.write_text(json.dumps(v2_items()), encoding="utf-8")
    out = tmp_path / "v2"
    proc = run_cli("longbench-v2", "--model", setup["model_dir"], "--data", data, "--config", setup["config"],
                   "--out", out, "--max-length", 151, "--max-new-tokens", 12)
    assert proc.returncode == 0, proc.stderr
    template = (CONFIG / "v2_0shot.txt").read_text(encoding="utf-8")
    records = [json.loads(line) for line in (out / "longbench_v2.jsonl").read_text(encoding="utf-8").splitlines()]
    for item, record in zip(v2_items(), records):
        prompt = (template.replace("$DOC$", item["context"].strip()).replace("$Q$", item["question"].strip())
                  .replace("$C_A$", item["choice_A"].strip()).replace("$C_B$", item["choice_B"].strip())
                  .replace("$C_C$", item["choice_C"].strip()).replace("$C_D$", item["choice_D"].strip()))
        ids = tok.encode(prompt)
        if len(ids) > 151:
            ids = ids[:151 // 2] + ids[-151 // 2:]
            prompt = tok.decode(ids, skip_special_tokens=True)
        chat = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        input_ids = tok(chat).input_ids
        with torch.no_grad():
            gen = model.generate(torch.tensor([input_ids]), max_new_tokens=12, do_sample=False,
                                 pad_token_id=tok.pad_token_id)[0]
        response = tok.decode(gen[len(input_ids):], skip_special_tokens=True).strip()
        assert record["response"] == response
        assert record["pred"] == extract_answer(response)
        assert record["judge"] == (extract_answer(response) == item["answer"])
        assert record["context"] == item["context"][:1000] and record["_id"] == item["_id"]
    result = json.loads((out / "longbench_v2_result.json").read_text())
    judged = [r["judge"] for r in records]
    assert result["overall"] == round(100 * sum(judged) / 3, 1)
    assert result["counts"] == {"overall": 3, "easy": 1, "hard": 2, "short": 1, "medium": 1, "long": 1}
    # score-v2 on upstream-style records with known judgements.
    scored = tmp_path / "scored.jsonl"
    rows = [{"judge": j, "difficulty": d, "length": l} for j, d, l in
            [(True, "easy", "short"), (False, "hard", "short"), (True, "hard", "medium"), (True, "hard", "long"),
             (False, "easy", "long"), (False, "hard", "long")]]
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("score-v2", scored)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"overall": 50.0, "easy": 50.0, "hard": 50.0, "short": 50.0, "medium": 100.0,
                                       "long": 33.3, "counts": {"overall": 6, "easy": 2, "hard": 4, "short": 2,
                                                                "medium": 1, "long": 3}}
