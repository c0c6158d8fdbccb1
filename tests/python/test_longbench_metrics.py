"""Every LongBench metric of the C++ scorer against the upstream definitions computed with the
upstream packages (longbench_reference.py: jieba, rouge, fuzzywuzzy + python-Levenshtein):
hand-written edge cases (empty prediction, punctuation only, articles, Unicode case
mapping, full-width and other non-ASCII digits, Chinese) and thousands of generated pairs.
Scores must be equal to the last bit, not approximately.
"""

import math
import random
import sys
import unicodedata

import numpy as np
import pytest

import longbench_reference as ref
from longbench_oracle_client import cpp, cpp_values

EN_WORDS = ["the", "The", "THE", "a", "A", "an", "An", "then", "anthem", "theater", "apple", "Paris", "France",
            "is", "capital", "of", "cat's", "don't", "U.S.A.", "e.g.", "Mr.", "well-known", "O'Neil", "naïve",
            "Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "ΌΣΟΣ", "café", "cafe\u0301", "a\u0301", "ǅemal", "ﬁne", "ẞig",
            "1984", "3.14", "1,000", "１２３", "٣٤", "x²", "Ⅻ", "½", "the_end", "a·b", "an—the", "über"]
PUNCT = [".", ",", "!", "?", ";", ":", "...", "-", "--", "(", ")", "\"", "'", "`", "~", "_", "@", "#", "%", "&",
         "。", "，", "！", "《", "》", "“", "”", "…"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u2028", "\x1c", "\u0085", "\u200b"]
ZH_WORDS = ["我们", "北京", "清华大学", "机器学习", "会议", "总结", "今天", "天气", "很好", "中华人民共和国", "模型",
            "长文本", "评测", "基准", "讨论", "项目", "进度", "问题", "的", "了", "是", "在", "和", "有", "不"]
ZH_PUNCT = ["，", "。", "！", "？", "、", "；", "：", "“", "”", "《", "》", "（", "）", "【", "】", "—", "…", "～", "·"]


def en_text(rng, max_parts=25):
    parts = []
    for _ in range(rng.randint(0, max_parts)):
        k = rng.random()
        parts.append(rng.choice(EN_WORDS) if k < 0.6 else rng.choice(PUNCT) if k < 0.8 else rng.choice(SPACES))
        parts.append(rng.choice([" ", " ", "", "\n"]))
    return "".join(parts)


def rare_han(rng):
    return chr(rng.choice([rng.randint(0x4E00, 0x9FD5), rng.randint(0x3400, 0x4DB5)]))


def zh_text(rng, max_parts=30):
    parts = []
    for _ in range(rng.randint(0, max_parts)):
        k = rng.random()
        if k < 0.45:
            parts.append(rng.choice(ZH_WORDS))
        elif k < 0.6:
            parts.append("".join(rare_han(rng) for _ in range(rng.randint(1, 4))))
        elif k < 0.75:
            parts.append(rng.choice(ZH_PUNCT))
        elif k < 0.85:
            parts.append(rng.choice(EN_WORDS))
        elif k < 0.93:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 6))) + rng.choice(["", "%", ".5", "年"]))
        else:
            parts.append(rng.choice(SPACES))
    return "".join(parts)


def summary_text(rng, n_sentences, words_per_sentence=(1, 25)):
    vocab = [w for w in EN_WORDS if "." not in w] + ["model", "data", "report", "agency", "budget", "meeting"]
    sentences = []
    for _ in range(n_sentences):
        words = [rng.choice(vocab) for _ in range(rng.randint(*words_per_sentence))]
        sentences.append(" ".join(words) + rng.choice([".", ". ", ".  ", "..", " . ", "\n"]))
    return "".join(sentences)


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def compare(metric_name, python_fn, pairs, **extra):
    requests = [{"op": "metric", "metric": metric_name, "pred": p, "truth": t, **extra} for p, t in pairs]
    got = cpp_values(requests, "score")
    bad = [(p, t, g, python_fn(p, t, **extra)) for (p, t), g in zip(pairs, got) if g != python_fn(p, t, **extra)]
    assert not bad, f"{len(bad)} of {len(pairs)} differ, first: {bad[0]!r}"


EN_EDGE = ["", " ", "...", "!?!", "the", "a an the", "The Answer", "answer", "A", "an apple", "the_the", "thé",
           "Σ", "ΌΣΟΣ ΌΣΟΣ.", "İ", "１２３", "123", "a·b", "a\u0301", "\u3000", "unanswerable", "yes", "No."]


def test_qa_f1_edge_cases_and_generated_pairs():
    rng = random.Random(1)
    pairs = [(p, t) for p in EN_EDGE for t in EN_EDGE]
    pairs += [(en_text(rng), en_text(rng)) for _ in range(3000)]
    pairs += [(t + " " + en_text(rng, 4), t) for t in (en_text(rng, 6) for _ in range(500))]
    compare("qa_f1", ref.qa_f1, pairs)


def test_normalization_matches_python_on_unicode():
    rng = random.Random(2)
    texts = EN_EDGE + [en_text(rng) for _ in range(2000)] + [zh_text(rng) for _ in range(1000)]
    got = cpp_values([{"op": "metric", "metric": "normalize", "text": t} for t in texts], "text")
    assert got == [ref.normalize_en(t) for t in texts]
    got = cpp_values([{"op": "metric", "metric": "normalize_zh", "text": t} for t in texts], "text")
    assert got == [ref.normalize_zh(t) for t in texts]


def test_qa_f1_zh_edge_cases_and_generated_pairs():
    rng = random.Random(3)
    edge = ["", "。", "，。！", "北京", "我们在北京", "ABC", "abc", "１２３", "123", "  ", "《北京》", "北京》"]
    pairs = [(p, t) for p in edge for t in edge] + [(zh_text(rng), zh_text(rng)) for _ in range(1500)]
    pairs += [(t + zh_text(rng, 3), t) for t in (zh_text(rng, 8) for _ in range(300))]
    compare("qa_f1_zh", ref.qa_f1_zh, pairs)


def test_rouge_edge_cases():
    edge = ["", " ", ".", "...", " . . ", "a", "a.", ". a", "a  b. c", "the cat sat. the cat ran.", "cat sat the",
            "x y z", "A a A", "Ünïcödé. ünïcödé", "one. two. three. four", "\n\n.\n", "a.b.c", "  .  x"]
    compare("rouge", ref.rouge, [(p, t) for p in edge for t in edge])


def test_rouge_generated_summaries():
    rng = random.Random(4)
    pairs = [(summary_text(rng, rng.randint(0, 8)), summary_text(rng, rng.randint(0, 8))) for _ in range(1500)]
    pairs += [(en_text(rng), en_text(rng)) for _ in range(1000)]
    compare("rouge", ref.rouge, pairs)


def test_rouge_zh_generated_pairs():
    rng = random.Random(5)
    pairs = [(zh_text(rng, 60), zh_text(rng, 60)) for _ in range(600)]
    pairs += [("", "北京"), ("北京", ""), ("。", "。"), ("北京。上海", "上海。北京")]
    compare("rouge_zh", ref.rouge_zh, pairs)


def test_classification_removal_while_iterating():
    trec = ["Abbreviation", "Expression abbreviated", "Description of something", "Definition of something",
            "Manner of an action", "Reason", "Animal", "Other entity", "Other location", "City", "Country",
            "Description", "Definition", "Other", "Other number", "Number of something"]
    rng = random.Random(6)
    pairs = []
    for _ in range(3000):
        pred = " ".join(rng.choice(trec + ["foo", "Desc", "of something"]) for _ in range(rng.randint(0, 4)))
        pairs.append((pred, rng.choice(trec)))
    # Hand-picked: matches that are substrings of the truth, back to back, so that the
    # skipped element decides the score.
    pairs += [("Definition of something Definition Description", "Definition of something"),
              ("Other Other number Other entity", "Other number"), ("", "City"), ("City City", "City")]
    compare("classification", ref.classification, pairs, all_classes=trec)
    lsht = ["体育", "体育新闻", "财经", "财经新闻", "科技", "教育", "教育资讯"]
    zh_pairs = [("".join(rng.choice(lsht + ["新闻", "的"]) for _ in range(rng.randint(0, 4))), rng.choice(lsht))
                for _ in range(1500)]
    compare("classification", ref.classification, zh_pairs, all_classes=lsht)
    dup = ["A", "AB", "A", "ABC"]  # duplicates: list.remove takes the first equal element
    compare("classification", ref.classification, [("A AB ABC", t) for t in dup], all_classes=dup)


def test_retrieval_and_count_with_unicode_digits():
    rng = random.Random(7)
    digits = ["1", "12", "７", "１２", "٣", "०", "3", "30", "03"]

    def pred():
        return rng.choice(["", "Paragraph ", "段落", "The answer is ", "第"]) + " ".join(
            rng.choice(digits + ["x", "Paragraph", "段落"]) for _ in range(rng.randint(0, 5)))

    compare("retrieval", ref.retrieval, [(pred(), f"Paragraph {rng.randint(1, 30)}") for _ in range(1500)])
    compare("retrieval_zh", ref.retrieval_zh, [(pred(), f"段落{rng.randint(1, 30)}") for _ in range(1500)])
    compare("count", ref.count, [(pred(), str(rng.randint(1, 30))) for _ in range(1500)] + [("１", "１"), ("", "3")])


def test_retrieval_without_paragraph_id_is_an_error():
    (answer,) = cpp([{"op": "metric", "metric": "retrieval", "pred": "1", "truth": "no id"}])
    assert "Paragraph" in answer["error"]


def test_code_sim_first_line_rule_and_round_half_even():
    rng = random.Random(8)
    lines = ["x = 1", "# comment", "```python", "// c comment", "return a + b", "", "   ", "if (a) {", "a//b",
             "print('héllo')", "s = \"#\"", "`x`", "def f(x):", "    return x * 2"]
    pairs = []
    for _ in range(3000):
        pred = rng.choice(["", "\n", "\n\n"]) + "\n".join(rng.choice(lines) for _ in range(rng.randint(0, 4)))
        pairs.append((pred, rng.choice(lines)))
    # 100 * ratio lands exactly on .5 here: 87.5 -> 88, 62.5 -> 62 (Python's round).
    pairs += [("aaaaaaab", "aaaaaaac"), ("abcdefgh", "abcdefgX"), ("aaaaaaaa", "aaaaaXYZ")]
    compare("code_sim", ref.code_sim, pairs)
    compare("fuzz_ratio", lambda a, b: ref.fuzz.ratio(a, b), [("", ""), ("a", ""), ("", "a")] + pairs)


def test_first_line_cut():
    texts = ["", "\n", "\n\nabc\ndef", "abc", "abc\n", " \nabc", "\r\nabc"]
    got = cpp_values([{"op": "metric", "metric": "first_line", "text": t} for t in texts], "text")
    assert got == [ref.first_line(t) for t in texts]


def test_item_score_takes_the_max_over_answers_after_the_first_line_cut():
    requests, expected = [], []
    cases = [("triviaqa", "\nParis\nLondon", ["London", "paris"], None),
             ("samsum", "A cat sat.\nThe dog ran.", ["The dog ran.", "A cat sat."], None),
             ("trec", "\nCity\nCountry", ["Country"], ["City", "Country"]),
             ("lcc", "#x\ny = 2", ["y = 2", "y = 3"], None),
             ("narrativeqa", "", ["anything"], None)]
    for task, pred, answers, classes in cases:
        requests.append({"op": "item", "task": task, "pred": pred, "answers": answers, "all_classes": classes})
        p = ref.first_line(pred) if task in ref.FIRST_LINE_TASKS else pred
        expected.append(max([0.0] + [ref.METRICS[task](p, a, all_classes=classes) for a in answers]))
    assert cpp_values(requests, "score") == expected


def test_python_character_classes_match_cpython():
    """isspace / \\w / \\d over every code point; ICU may know newer Unicode than CPython,
    so only code points CPython leaves unassigned may differ."""
    answers = cpp([{"op": "classes", "from": lo, "to": min(lo + 0x10000, 0x110000)}
                   for lo in range(0, 0x110000, 0x10000)])
    got = {k: set().union(*(set(a[k]) for a in answers)) for k in ("space", "word", "decimal")}
    import re
    expected = {
        "space": {c for c in range(0x110000) if chr(c).isspace()},
        "word": {c for c in range(0x110000) if re.match(r"\w", chr(c))},
        "decimal": {c for c in range(0x110000) if re.match(r"\d", chr(c))},
    }
    for key in expected:
        diff = got[key] ^ expected[key]
        assigned = [c for c in diff if unicodedata.category(chr(c)) != "Cn"]
        assert not assigned, f"{key}: differs at {[hex(c) for c in assigned[:10]]}"


def test_lower_matches_cpython_on_every_assigned_code_point():
    chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    chunks = ["".join(chars[i:i + 4000]) for i in range(0, len(chars), 4000)]
    # Final sigma depends on context: a cased letter before, none after.
    chunks += ["ΣΑΣ ΟΔΟΣ. Σ aΣ aΣb Σa a\u0301Σ aΣ\u0301 ΣΣ ΌΣΟΣ", "İSTANBUL ǅ ẞ ﬁ"]
    got = cpp_values([{"op": "lower", "text": t} for t in chunks], "text")
    for text, g in zip(chunks, got):
        if g != text.lower():
            diff = [c for c, l in zip(text, g) if l != c.lower()]
            pytest.fail(f"lower differs, e.g. at {[hex(ord(c)) for c in diff[:5]]}")


def test_float_repr_and_round_match_python():
    rng = random.Random(9)
    values = [0.0, -0.0, 1.0, 100.0, 0.1, 1e-5, 1e-4, 1e16, 1.5e16, 123456789012345678.0, 2.675, 0.125, 0.285,
              1.005, 33.335, 1 / 3, 2 / 3, 5e-324, 1.7976931348623157e308]
    values += [rng.random() * 100 for _ in range(3000)] + [rng.randint(0, 10000) / 100 for _ in range(3000)]
    values += [rng.randint(0, 10 ** 6) / 2 ** rng.randint(0, 20) for _ in range(2000)]
    (answer,) = cpp([{"op": "repr", "values": values}])
    assert answer["repr"] == [repr(v) for v in values]
    assert answer["round2"] == [round(v, 2) for v in values]


def test_json_dumps_matches_python():
    values = [{"a": 1.0, "b": [1, 2.5, "x\"y\\z\n\t\u0001é中"], "c": {}, "d": [], "e": None, "f": True,
               "g": {"0-4k": 12.34, "8k+": 1e-05}},
              [], {}, "plain", 3, -0.0, {"nested": {"deeper": [{"k": [1, {"z": 2}]}]}}]
    requests = [{"op": "dumps", "value": v, "indent": i} for v in values for i in (-1, 4)]
    got = cpp_values(requests, "text")
    import json
    for r, g in zip(requests, got):
        indent = None if r["indent"] < 0 else r["indent"]
        assert g == json.dumps(r["value"], ensure_ascii=False, indent=indent)


def test_task_scores_use_python_round_and_numpy_mean_and_round():
    rng = random.Random(10)
    requests, expected = [], []
    for n in (1, 3, 7, 8, 9, 17, 130, 257, 600):
        items = [{"pred": en_text(rng, 6), "answers": [en_text(rng, 4)], "all_classes": None,
                  "length": rng.choice([100, 3999, 4000, 7999, 8000, 20000])} for _ in range(n)]
        requests.append({"op": "task_score", "task": "hotpotqa", "items": items})
        preds = [i["pred"] for i in items]
        answers = [i["answers"] for i in items]
        lengths = [i["length"] for i in items]
        expected.append((ref.score_task("hotpotqa", preds, answers, lengths, None, False),
                         ref.score_task("hotpotqa", preds, answers, lengths, None, True)))
    for answer, (v1, e) in zip(cpp(requests), expected):
        assert answer["score"] == v1
        assert all(same(a, b) for a, b in zip(answer["bins"], [e["0-4k"], e["4-8k"], e["8k+"]]))

