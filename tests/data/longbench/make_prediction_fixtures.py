"""Writes the fixture prediction folders predictions/v1 (21 tasks) and predictions/e (the 13
LongBench-E tasks, with lengths in all three bins and one empty bin) in upstream's format:
one {"pred", "answers", "all_classes", "length"} object per line, json.dumps with
ensure_ascii=False, as upstream's pred.py writes them.

The predictions are the kinds a model gives: exact and partial answers, extra words,
articles and punctuation, empty output, several lines (the first-line tasks), Chinese,
full-width digits, code with comment lines, class names that contain each other, and
summaries whose LCS traceback sits on both sides of the rouge package's recursion limit.
Deterministic (seeded); rerun only to change the fixture:
    python tests/data/longbench/make_prediction_fixtures.py
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

EN_QA = [("Paris", ["Paris"]), ("the city of Paris, France.", ["Paris"]), ("", ["1969"]),
         ("It was in 1969", ["1969", "July 1969"]), ("Unanswerable", ["unanswerable"]), ("yes", ["Yes"]),
         ("No, he did not.", ["no"]), ("Marie Curie and Pierre Curie", ["Marie Curie"]),
         ("An apple a day", ["apple"]), ("The Beatles", ["the beatles", "Beatles"]), ("...", ["Oslo"]),
         ("Über-Straße", ["über straße"]), ("１２３", ["123"]), ("the the the", ["the"]),
         ("He moved to London\nand then to Rome", ["Rome"]), ("Answer: 42 people", ["42"])]
ZH_QA = [("北京", ["北京"]), ("答案是北京市。", ["北京"]), ("", ["上海"]), ("１９４９年", ["1949年"]),
         ("中华人民共和国成立于1949年10月1日", ["1949年10月1日"]), ("不知道", ["无法回答"]),
         ("《红楼梦》的作者是曹雪芹", ["曹雪芹"]), ("他们在会议上讨论了预算问题", ["预算问题"])]
EN_SUMMARY_WORDS = ("the report says agency budget funding program federal review costs increased data "
                    "meeting team discussed project design remote control market product users cost "
                    "a an of to in and for was were will be on by with that this").split()
ZH_SUMMARY = ["会议讨论了产品设计和市场推广的问题。", "大家认为遥控器的成本需要控制在十二点五欧元以内。",
              "项目经理总结了上次会议的内容", "工业设计师介绍了新的外观方案，并回答了关于电池的问题。",
              "最后决定下周继续讨论预算", "与会人员对用户需求进行了分析"]
TREC = ["Abbreviation", "Expression abbreviated", "Animal", "Organ of body", "Color", "Event", "Food",
        "Other entity", "Definition of something", "Description of something", "Manner of an action",
        "Reason", "Individual", "Title of a person", "Description of a person", "City", "Country",
        "Other location", "State", "Number of something", "Date", "Other number", "Percent, fraction"]
LSHT = ["农业、农村", "军事", "文学、艺术", "体育", "传媒业", "电子信息产业", "文化、休闲娱乐", "社会、劳动", "经济",
        "服装、纺织", "环境保护", "教育", "科技"]
CODE = ["x = compute(a, b)", "return self.weights[i]", "if (n == 0) {", "for i in range(10):", "}",
        "self.assertEqual(result, expected)", "int total = 0;", "print('done')", "import numpy as np"]


def summary(rng, sentences, words=(3, 20)):
    return " ".join(" ".join(rng.choice(EN_SUMMARY_WORDS) for _ in range(rng.randint(*words))) + "."
                    for _ in range(sentences))


def long_sentence_pair(words):
    """A prediction whose ROUGE-L traceback takes exactly `words` + 1 nested calls against
    the reference "a": one sentence "a b b ... b" of `words` words."""
    return " ".join(["a"] + ["b"] * (words - 1)), "a"


def long_zh_pair(words):
    return " ".join(["我"] + ["b"] * (words - 1)), "我"


def en_qa(rng):
    pred, answers = rng.choice(EN_QA)
    if rng.random() < 0.3:
        pred = rng.choice(["The answer is ", "", "Answer: "]) + pred + rng.choice(["", ".", "\nExplanation: none"])
    return pred, answers, None


def zh_qa(rng):
    pred, answers = rng.choice(ZH_QA)
    return pred + rng.choice(["", "。", "\n"]), answers, None


def item_for(task, rng, index):
    if task in ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "triviaqa"):
        return en_qa(rng)
    if task == "multifieldqa_zh":
        return zh_qa(rng)
    if task in ("gov_report", "qmsum", "multi_news", "samsum"):
        if task == "gov_report" and index < 4:  # both sides of the recursion limit (991 calls)
            pred, truth = long_sentence_pair(988 + index)
            return pred, [truth], None
        pred = summary(rng, rng.randint(0, 6)) + rng.choice(["", "\n" + summary(rng, 2)])
        return pred, [summary(rng, rng.randint(1, 6))], None
    if task in ("dureader", "vcsum"):
        if task == "vcsum" and index < 4:  # rouge_zh is one frame deeper: 990 calls fit
            pred, truth = long_zh_pair(987 + index)
            return pred, [truth], None
        pick = lambda: "".join(rng.sample(ZH_SUMMARY, rng.randint(0, 4)))  # noqa: E731
        return pick(), [pick() or ZH_SUMMARY[0]], None
    if task == "trec":
        truth = rng.choice(TREC)
        pred = rng.choice([truth, "Type: " + truth, " ".join(rng.sample(TREC, 2)), "", "\n" + truth + "\nCity"])
        return pred, [truth], TREC
    if task == "lsht":
        truth = rng.choice(LSHT)
        pred = rng.choice([truth, "类别：" + truth, "".join(rng.sample(LSHT, 2)), "", "文学"])
        return pred, [truth], LSHT
    if task == "passage_count":
        n = rng.randint(2, 30)
        pred = rng.choice([str(n), f"There are {n} unique paragraphs.", f"{n - 1}, {n}", "", "１２"])
        return pred, [str(n)], None
    if task == "passage_retrieval_en":
        n = rng.randint(1, 30)
        pred = rng.choice([f"Paragraph {n}", f"Paragraph {n + 1}", f"Paragraph {n} or Paragraph 3", "", "None"])
        return pred, [f"Paragraph {n}"], None
    if task == "passage_retrieval_zh":
        n = rng.randint(1, 30)
        pred = rng.choice([f"段落{n}", f"答案是段落{n + 1}", f"段落{n}和段落２", ""])
        return pred, [f"段落{n}"], None
    if task in ("lcc", "repobench-p"):
        truth = rng.choice(CODE)
        lines = [rng.choice(["# next", "```python", "// hint", truth, rng.choice(CODE)]) for _ in range(3)]
        return rng.choice(["", "\n"]) + "\n".join(lines), [truth], None
    raise ValueError(task)


V1_TASKS = ["narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
            "dureader", "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht",
            "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p"]
E_TASKS = ["qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news", "trec", "triviaqa",
           "samsum", "passage_count", "passage_retrieval_en", "lcc", "repobench-p"]


def write(folder, tasks, n_items, seed, length_of):
    folder.mkdir(parents=True, exist_ok=True)
    for t, task in enumerate(tasks):
        rng = random.Random(seed * 1000 + t)
        with open(folder / f"{task}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n_items):
                pred, answers, classes = item_for(task, rng, i)
                line = {"pred": pred, "answers": answers, "all_classes": classes, "length": length_of(task, rng)}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")


def e_length(task, rng):
    if task == "trec":  # no item of 8k+: that bin is NaN, as upstream writes it
        return rng.randint(500, 7999)
    return rng.choice([rng.randint(300, 3999), rng.randint(4000, 7999), rng.randint(8000, 30000), 4000, 8000])


if __name__ == "__main__":
    write(HERE / "predictions" / "v1", V1_TASKS, 24, 1, lambda task, rng: rng.randint(1000, 30000))
    write(HERE / "predictions" / "e", E_TASKS, 40, 2, e_length)
