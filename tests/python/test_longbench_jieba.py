"""The C++ segmenter (harness/eval/longbench/jieba_segmenter.h) against jieba itself:
jieba.cut(text, cut_all=False) with the HMM, word for word, on a large varied corpus:
natural sentences (news, meetings, technical, classical, numbers and English mixed in),
random sequences of dictionary words drawn by frequency, unknown character runs that only
the HMM segments, the run characters + # & . _ % -, full-width forms, other scripts,
emoji, every kind of whitespace and "\\r\\n", and a few long documents.
"""

import logging
import random
from pathlib import Path

import jieba
import pytest

from longbench_oracle_client import cpp_values

jieba.setLogLevel(logging.ERROR)

JIEBA_DIR = str(Path(jieba.__file__).parent)

NATURAL = [
    "我来到北京清华大学",
    "他来到了网易杭研大厦",
    "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
    "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作",
    "结婚的和尚未结婚的",
    "今天上午，项目组召开了第三季度工作总结会议。会议由张经理主持，与会人员就下一阶段的研发计划进行了深入讨论。",
    "根据国家统计局发布的数据，2023年全年国内生产总值同比增长5.2%，其中第三产业增加值占比达到54.6%。",
    "长文本理解是大语言模型的重要能力之一，LongBench是首个双语、多任务的长文本理解评测基准。",
    "请基于给定的文章回答下述问题。文章：在很久很久以前，有一座山，山里有座庙，庙里有个老和尚在给小和尚讲故事。",
    "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？",
    "使用Python 3.11和PyTorch 2.11训练Qwen2.5-7B-Instruct模型，batch size设为32，学习率为1e-5。",
    "iPhone 15 Pro Max的售价为9999元，比上一代贵了1000元左右；C++和C#程序员都很喜欢它。",
    "会议记录：\n王总：大家好，今天我们讨论一下预算问题。\r\n李工：好的，我先说一下进度。\t（停顿）\n",
    "南京市长江大桥于1968年建成通车，是中国第一座自行设计建造的双层式铁路、公路两用桥梁。",
    "这篇论文提出了一种动态稀疏注意力的负载均衡方法，在数据并行和流水线并行下都能减少气泡时间。",
    "Ｅｍａｉｌ：ｔｅｓｔ＠ｅｘａｍｐｌｅ．ｃｏｍ，电话：０１０－１２３４５６７８。",
    "北京时间2024年3月15日晚8点，第15届全运会开幕式在广州举行，约5.6万名观众到场观看。",
    "他说：“我不知道。”她回答：‘那就算了吧……’ —— 这是《红楼梦》里的一段？还是《西游记》？",
    "下雨天留客天留我不留",
    "人工智能（Artificial Intelligence，简称AI）是计算机科学的一个分支。",
]

OTHER = ["😀", "👨‍👩‍👧", "こんにちは", "カタカナ", "한국어", "Привет", "مرحبا", "ÀÉÎ", "½", "①", "㈠", "〇", "々", "〆"]
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\r\r\n", "\u3000", "\u00a0", "\u2028", "\x0b", "\x1c", "\u0085"]
RUN_PIECES = ["C++", "C#", "AT&T", "3.5%", "1.2.3", "a_b", "x-y-z", "-", "--", ".", "...", "%", "#", "&", "_",
              "+", "abc.def", "v2.0", "100%", "e.g.", "U.S.", "0.5", "12.", ".5", "a1b2c3"]
PUNCT = ["，", "。", "！", "？", "、", "；", "：", "“", "”", "《", "》", "（", "）", "【", "】", "…", "—", ",", "!", "?",
         "(", ")", "\"", "'", "/", "\\", "|", "~", "·"]


@pytest.fixture(scope="module")
def dictionary_words():
    words, cumulative, total = [], [], 0.0
    with open(Path(JIEBA_DIR) / "dict.txt", encoding="utf-8") as f:
        for line in f:
            w, freq = line.split(" ")[:2]
            words.append(w)
            total += int(freq) ** 0.5
            cumulative.append(total)
    return words, cumulative


def random_text(rng, words, cumulative, n_parts):
    parts = []
    for _ in range(n_parts):
        k = rng.random()
        if k < 0.45:
            parts.extend(rng.choices(words, cum_weights=cumulative, k=rng.randint(1, 6)))
        elif k < 0.6:  # unknown combinations of common and rare characters: the HMM's work
            parts.append("".join(chr(rng.randint(0x4E00, 0x9FD5)) for _ in range(rng.randint(1, 8))))
        elif k < 0.65:
            parts.append(chr(rng.randint(0x3400, 0x4DB5)) + chr(rng.randint(0x9FD6, 0x9FFF)))
        elif k < 0.75:
            parts.append(rng.choice(PUNCT))
        elif k < 0.83:
            parts.append(rng.choice(RUN_PIECES))
        elif k < 0.88:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
        elif k < 0.93:
            parts.append(rng.choice(WHITESPACE))
        elif k < 0.96:
            parts.append(rng.choice(OTHER))
        else:
            parts.append(rng.choice(["LongBench", "Qwen", "GPU", "ok", "The", "model", "数据集", "ＡＢＣ", "１２３"]))
    return "".join(parts)


def corpus(dictionary_words):
    words, cumulative = dictionary_words
    rng = random.Random(2024)
    texts = list(NATURAL) + ["", " ", "\r\n", "。", "a", "1", "中"]
    texts += [random_text(rng, words, cumulative, rng.randint(1, 40)) for _ in range(4000)]
    texts += ["".join(NATURAL) * 3, random_text(rng, words, cumulative, 3000)]
    # Sentences rebuilt from the natural ones with pieces swapped: natural context, new joins.
    for _ in range(500):
        a, b = rng.sample(NATURAL, 2)
        i, j = rng.randint(0, len(a)), rng.randint(0, len(b))
        texts.append(a[:i] + b[j:])
    return texts


def test_segmentation_equals_jieba_on_a_large_mixed_corpus(dictionary_words):
    texts = corpus(dictionary_words)
    got = cpp_values([{"op": "jieba", "text": t, "jieba_dir": JIEBA_DIR} for t in texts], "words")
    mismatches = [(t, g) for t, g in zip(texts, got) if g != list(jieba.cut(t, cut_all=False))]
    total_words = sum(len(g) for g in got)
    print(f"{len(texts)} texts, {sum(len(t) for t in texts)} characters, {total_words} words")
    assert not mismatches, (f"{len(mismatches)} texts differ, first: {mismatches[0][0]!r}\n"
                            f"  C++:   {mismatches[0][1]}\n  jieba: {list(jieba.cut(mismatches[0][0]))}")
    assert total_words > 100000  # the corpus is substantial


def test_hmm_is_exercised(dictionary_words):
    """Words jieba's dictionary does not have, found by the HMM, appear in the corpus."""
    texts = corpus(dictionary_words)[:800]
    words = set(dictionary_words[0])
    new_words = {w for t in texts for w in jieba.cut(t) if len(w) > 1 and w not in words and
                 all("\u4e00" <= c <= "\u9fd5" for c in w)}
    assert len(new_words) > 200
