"""LongBench scoring rebuilt from its written definitions (docs: longbench.md) on top of the
real upstream dependencies (jieba, rouge, fuzzywuzzy + python-Levenshtein, numpy): the
oracle the C++ scorer is compared with. Only the small glue is rewritten here; every
quirk the definitions name is kept (see the C++ side, harness/eval/longbench/longbench_metrics.h).

Run as a script it scores a prediction folder like upstream's eval.py:
    python longbench_reference.py PRED_DIR OUT_JSON [--e]
and writes the result.json text to OUT_JSON.

Call depth matters: the rouge package reconstructs LCSs recursively, and a RecursionError
inside it scores 0. Upstream's eval.py calls scorer() from module level, scorer calls the
metric, the metric calls Rouge.get_scores. The script part below keeps exactly that
depth (module -> score_task -> metric -> rouge), so that it fails exactly where eval.py
fails; do not wrap it in a function.
"""

import json
import os
import re
import string
import sys
import warnings
from collections import Counter

import jieba
import numpy as np
from fuzzywuzzy import fuzz
from rouge import Rouge

jieba.setLogLevel(60)

ZH_PUNCTUATION = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟"
                  "〰〾〿–—‘’‛“”„‟…‧﹏.")


def normalize_en(text):
    text = text.lower()
    text = "".join(c for c in text if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def normalize_zh(text):
    removed = set(string.punctuation + ZH_PUNCTUATION)
    text = "".join(c for c in text.lower() if c not in removed)
    return "".join(text.split())


def token_f1(pred_tokens, truth_tokens):
    overlap = sum((Counter(pred_tokens) & Counter(truth_tokens)).values())
    if overlap == 0:
        return 0
    p = 1.0 * overlap / len(pred_tokens)
    r = 1.0 * overlap / len(truth_tokens)
    return (2 * p * r) / (p + r)


def qa_f1(pred, truth, **_):
    return token_f1(normalize_en(pred).split(), normalize_en(truth).split())


def qa_f1_zh(pred, truth, **_):
    def words(text):
        return [w for w in (normalize_zh(t) for t in jieba.cut(text, cut_all=False)) if w]
    return token_f1(words(pred), words(truth))


def rouge(pred, truth, **_):
    try:
        return Rouge().get_scores([pred], [truth], avg=True)["rouge-l"]["f"]
    except:  # noqa: E722  (upstream's bare except: anything raised scores 0)
        return 0.0


def rouge_zh(pred, truth, **_):
    return rouge(" ".join(jieba.cut(pred, cut_all=False)), " ".join(jieba.cut(truth, cut_all=False)))


def classification(pred, truth, all_classes=None, **_):
    found = [c for c in all_classes if c in pred]
    for term in found:  # removing while iterating skips the next element, on purpose
        if term in truth and term != truth:
            found.remove(term)
    return 1.0 / len(found) if truth in found else 0.0


def _share_of(numbers, target):
    return 0.0 if not numbers else float(sum(1 for n in numbers if n == target) / len(numbers))


def retrieval(pred, truth, **_):
    return _share_of(re.findall(r"\d+", pred), re.findall(r"Paragraph (\d+)", truth)[0])


def retrieval_zh(pred, truth, **_):
    return _share_of(re.findall(r"\d+", pred), re.findall(r"段落(\d+)", truth)[0])


def count(pred, truth, **_):
    return _share_of(re.findall(r"\d+", pred), str(truth))


def code_sim(pred, truth, **_):
    line = next((l for l in pred.lstrip("\n").split("\n") if "`" not in l and "#" not in l and "//" not in l), "")
    return fuzz.ratio(line, truth) / 100


METRICS = {
    "narrativeqa": qa_f1, "qasper": qa_f1, "multifieldqa_en": qa_f1, "multifieldqa_zh": qa_f1_zh,
    "hotpotqa": qa_f1, "2wikimqa": qa_f1, "musique": qa_f1, "dureader": rouge_zh,
    "gov_report": rouge, "qmsum": rouge, "multi_news": rouge, "vcsum": rouge_zh,
    "trec": classification, "triviaqa": qa_f1, "samsum": rouge, "lsht": classification,
    "passage_count": count, "passage_retrieval_en": retrieval, "passage_retrieval_zh": retrieval_zh,
    "lcc": code_sim, "repobench-p": code_sim,
}
FIRST_LINE_TASKS = {"trec", "triviaqa", "samsum", "lsht"}


def first_line(pred):
    return pred.lstrip("\n").split("\n")[0]


def score_task(task, preds, answers, lengths, all_classes, by_length):
    """One task: v1 -> round(100 * mean, 2) (Python float); -E -> numpy mean and round per bin."""
    bins = {"0-4k": [], "4-8k": [], "8k+": []}
    total = 0.0
    for i, (pred, truths) in enumerate(zip(preds, answers)):
        if task in FIRST_LINE_TASKS:
            pred = first_line(pred)
        best = 0.0
        for truth in truths:
            best = max(best, METRICS[task](pred, truth, all_classes=all_classes))
        total += best
        if by_length:
            bins["0-4k" if lengths[i] < 4000 else "4-8k" if lengths[i] < 8000 else "8k+"].append(best)
    if not by_length:
        return round(100 * total / len(preds), 2)
    with warnings.catch_warnings():  # np.mean of an empty bin: NaN, as upstream writes it
        warnings.simplefilter("ignore")
        return {k: round(100 * np.mean(v), 2) for k, v in bins.items()}


def read_folder(folder):
    """(task, preds, answers, lengths, all_classes of the last line) per *.jsonl file."""
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith("jsonl"):
            continue
        preds, answers, lengths, classes = [], [], [], None
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                preds.append(d["pred"])
                answers.append(d["answers"])
                classes = d["all_classes"]
                if "length" in d:
                    lengths.append(d["length"])
        out.append((name.split(".")[0], preds, answers, lengths, classes))
    return out


if __name__ == "__main__":
    _folder, _out, _by_length = sys.argv[1], sys.argv[2], "--e" in sys.argv[3:]
    _scores = {}
    for _task, _preds, _answers, _lengths, _classes in read_folder(_folder):
        _scores[_task] = score_task(_task, _preds, _answers, _lengths, _classes, _by_length)
    with open(_out, "w", encoding="utf-8") as _f:
        json.dump(_scores, _f, ensure_ascii=False, indent=4)
