"""RULER's synthetic benchmark (github.com/NVIDIA/RULER at c3f5e3b) rebuilt in Python from its
generator and evaluation scripts: the independent oracle that `sparsebalance eval ruler` and
`sparsebalance eval ruler-score` are compared with (tests/python/test_ruler_oracle.py).

What RULER does is kept rule for rule, in the same order of random draws:

- scripts/data/prepare.py builds the prompt template (model template `base`, i.e. the task
  template followed by the answer prefix) and starts one generator process per task and
  length; each process seeds Python's `random` (and numpy's legacy global RNG) once with the
  same seed (42). Here every (task, length) gets `random.Random(seed)` and
  `np.random.RandomState(seed)`: the same streams as `random.seed(seed)` /
  `np.random.seed(seed)` followed by calls of the module-level functions, without touching
  global state. Where RULER makes a fresh `random.Random(seed)` for one shuffle, so does this.
- scripts/data/synthetic/{niah,variable_tracking,common_words_extraction,
  freq_words_extraction,qa}.py: the examples, the size searches (binary search of RULER main;
  fwe's linear walk), the per-sample shrink loops, the answer-prefix split (`rfind` of the
  prefix's first 10 characters) and the record layout of scripts/data/manifest_utils.py
  (one `json.dumps(record, ensure_ascii=True)` per line).
- scripts/eval/evaluate.py and scripts/eval/synthetic/constants.py: postprocess_pred,
  string_match_all / string_match_part and summary.csv.

Deviations (the same ones `sparsebalance eval ruler` makes, docs: its interface):

- Only the `base` model template (no chat wrapper, model_template_token = 0), one chunk,
  no --remove_newline_tab.
- Essay sentences are `re.split(r'(?<=[.!?])\\s+', text.strip())` instead of
  nltk.sent_tokenize (which needs downloaded punkt data).
- `index` is the sample number 0..N-1 for every task (RULER's niah.py overwrites it with the
  character offset of the first answer: a bug not copied).
- cwe has no english_words.json fallback: asking for more distinct words than the
  wonderwords pool (8169 words with wonderwords 2.2.0) raises, also inside the size search.
- Where RULER would retry forever (the length cannot be met even at the smallest size, or
  a qa sample index past the question list) this raises instead.

Word lists are wonderwords 2.2.0's assets nounlist.txt / adjectivelist.txt / verblist.txt,
read as wonderwords reads them: text lines, each rstrip()'d.

Python's built-in float `sum` is Neumaier-compensated from Python 3.12 on; RULER ran on 3.10
(docker: nvcr.io/nvidia/pytorch:23.10-py3), so the metrics here add left to right.

Run as a script, it generates every task at two lengths with a tokenizer.json and prints
the token lengths (a self-check):
    python ruler_reference.py TOKENIZER_JSON WORDS_DIR HAYSTACK_TXT SQUAD_JSON HOTPOTQA_JSON
"""

import json
import math
import re
import string
import uuid
import random

import numpy as np

# ---------------------------------------------------------------------------------------
# Configuration: scripts/synthetic.yaml, scripts/data/synthetic/constants.py,
# scripts/eval/synthetic/constants.py

TASK_ORDER = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
              "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2"]


def _niah(haystack, key, value, k=1, v=1, q=1):
    return ("niah", {"type_haystack": haystack, "type_needle_k": key, "type_needle_v": value,
                     "num_needle_k": k, "num_needle_v": v, "num_needle_q": q})


TASKS = {
    "niah_single_1": _niah("noise", "words", "numbers"),
    "niah_single_2": _niah("essay", "words", "numbers"),
    "niah_single_3": _niah("essay", "words", "uuids"),
    "niah_multikey_1": _niah("essay", "words", "numbers", k=4),
    "niah_multikey_2": _niah("needle", "words", "numbers"),
    "niah_multikey_3": _niah("needle", "uuids", "uuids"),
    "niah_multivalue": _niah("essay", "words", "numbers", v=4),
    "niah_multiquery": _niah("essay", "words", "numbers", q=4),
    "vt": ("variable_tracking", {"type_haystack": "noise", "num_chains": 1, "num_hops": 4}),
    "cwe": ("common_words_extraction", {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}),
    "fwe": ("freq_words_extraction", {"alpha": 2.0}),
    "qa_1": ("qa", {"dataset": "squad"}),
    "qa_2": ("qa", {"dataset": "hotpotqa"}),
}

FAMILIES = {
    "niah": {
        "tokens_to_generate": 128,
        "template": "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
                    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all "
                    "the special magic {type_needle_v} for {query} mentioned in the provided text?",
        "answer_prefix": " The special magic {type_needle_v} for {query} mentioned in the provided text are",
    },
    "variable_tracking": {
        "tokens_to_generate": 30,
        "template": "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
                    "{context}\nQuestion: Find all variables that are assigned the value {query} in the text above.",
        "answer_prefix": " Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
                         "variables are assigned the value {query}, they are: ",
    },
    "common_words_extraction": {
        "tokens_to_generate": 120,
        "template": "Below is a numbered list of words. In these words, some appear more often than others. "
                    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common "
                    "words in the above list?",
        "answer_prefix": " Answer: The top 10 words that appear most often in the list are:",
    },
    "freq_words_extraction": {
        "tokens_to_generate": 50,
        "template": "Read the following coded text and track the frequency of each coded word. Find the three "
                    "most frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. "
                    "Please ignore the dots '....'. What are the three most frequently appeared words in the "
                    "above coded text?",
        "answer_prefix": " Answer: According to the coded text above, the three most frequently appeared words "
                         "are:",
    },
    "qa": {
        "tokens_to_generate": 32,
        "template": "Answer the question based on the given documents. Only give me the answer and do not output "
                    "any other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question "
                    "based on the given documents. Only give me the answer and do not output any other words."
                    "\n\nQuestion: {query}",
        "answer_prefix": " Answer:",
    },
}

METRIC = {"niah": "string_match_all", "variable_tracking": "string_match_all",
          "common_words_extraction": "string_match_all", "freq_words_extraction": "string_match_all",
          "qa": "string_match_part"}

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
DOCUMENT_PROMPT = "Document {i}:\n{document}"
# niah.py: 40 depths in percent, 0..100.
DEPTHS = [int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)]

RETRY_LIMIT = 1000  # RULER retries forever; this gives up after so many draws at the smallest size


def full_template(family):
    """prepare.py with the `base` model template: task template + answer prefix."""
    return FAMILIES[family]["template"] + FAMILIES[family]["answer_prefix"]


def split_answer_prefix(family, text):
    """The saved input ends before the last occurrence of the prefix's first 10 characters."""
    i = text.rfind(FAMILIES[family]["answer_prefix"][:10])
    return text[:i], text[i:]


# ---------------------------------------------------------------------------------------
# Inputs


class Words:
    """wonderwords' noun, adjective and verb lists and the two pools RULER derives from them."""

    def __init__(self, nouns, adjs, verbs):
        self.nouns, self.adjs, self.verbs = list(nouns), list(adjs), list(verbs)
        self._pairs = None

    @classmethod
    def from_dir(cls, folder):
        def read(name):
            with open(f"{folder}/{name}", encoding="utf-8") as f:  # text mode: universal newlines
                return [line.rstrip() for line in f.readlines()]
        return cls(read("nounlist.txt"), read("adjectivelist.txt"), read("verblist.txt"))

    def niah_keys(self):
        """niah.py: sorted(set(f"{adj}-{noun}" for adj in adjs for noun in nouns)).

        Built in nearly sorted order (adjective blocks ordered by adjective + '-', nouns sorted)
        so that the sort is quick; the result is the sorted list of distinct strings all the same.
        """
        if self._pairs is None:
            nouns = sorted(set(self.nouns))
            pairs = [f"{a}-{n}" for a in sorted(set(self.adjs), key=lambda a: a + "-") for n in nouns]
            pairs.sort()
            self._pairs = [p for i, p in enumerate(pairs) if i == 0 or p != pairs[i - 1]]
        return self._pairs

    def cwe_pool(self, seed):
        """common_words_extraction.py: sorted(set(nouns + adjs + verbs)), shuffled by Random(seed)."""
        words = sorted(set(self.nouns + self.adjs + self.verbs))
        random.Random(seed).shuffle(words)
        return words


def essay_words(text):
    """niah.py: the essay as a list of words, whitespace runs made one space, split on ' '."""
    return re.sub(r"\s+", " ", text).split(" ")


def essay_sentences(text):
    """Replaces nltk.sent_tokenize(text.strip())."""
    return re.split(r"(?<=[.!?])\s+", text.strip())


def read_squad(path):
    """qa.py read_squad: (questions, documents)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    docs = sorted(set(p["context"] for d in data["data"] for p in d["paragraphs"]))
    doc_index = {c: i for i, c in enumerate(docs)}
    qas = []
    for d in data["data"]:
        article_docs = [doc_index[p["context"]] for p in d["paragraphs"]]
        for p in d["paragraphs"]:
            for qa in p["qas"]:
                if not qa["is_impossible"]:
                    own = doc_index[p["context"]]
                    qas.append({"query": qa["question"], "outputs": [a["text"] for a in qa["answers"]],
                                "context": [own], "more_context": [i for i in article_docs if i != own]})
    return qas, docs


def read_hotpotqa(path):
    """qa.py read_hotpotqa: a document is "title\\n" + its sentences joined with nothing."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)

    def doc(title, sentences):
        return f"{title}\n{''.join(sentences)}"
    docs = sorted(set(doc(t, s) for d in data for t, s in d["context"]))
    doc_index = {c: i for i, c in enumerate(docs)}
    qas = [{"query": d["question"], "outputs": [d["answer"]],
            "context": [doc_index[doc(t, s)] for t, s in d["context"]]} for d in data]
    return qas, docs


# ---------------------------------------------------------------------------------------
# Shared pieces of the generators


def search_size(generate, count, max_len, extra_tokens, incremental, estimate_size, upper_rule):
    """Estimate tokens per unit on one example of `estimate_size` units, then binary-search the
    number of units n in [incremental, upper] with count(prompt) + extra_tokens <= max_len."""
    text = generate(estimate_size)
    per_unit = count(text) / estimate_size
    upper = upper_rule(per_unit)
    lower = incremental
    best = None
    while lower <= upper:
        mid = (lower + upper) // 2
        if count(generate(mid)) + extra_tokens <= max_len:
            best, lower = mid, mid + 1
        else:
            upper = mid - 1
    return best if best is not None else incremental


def shrink_until_fits(generate, count, size, incremental, tokens_to_generate, max_len, what):
    """The per-sample loop: regenerate at `size`, lowering it by `incremental` while the prompt
    plus the generation budget exceeds max_len (at the smallest size RULER just draws again).
    Returns (generated, length)."""
    tries = 0
    while True:
        try:
            generated = generate(size)
        except (ValueError, IndexError) as e:
            # RULER catches this and draws again at the same size, which fails the same way for
            # ever (it happens only below `incremental`: fewer units than needles / chain
            # elements / hotpotqa's 10 documents).
            raise ValueError(f"{what}: generation fails at {size} units ({e}); RULER would retry forever") from e
        length = count(generated[0]) + tokens_to_generate
        if length <= max_len:
            return generated, length
        if size > incremental:
            size -= incremental
        else:
            tries += 1
            if tries >= RETRY_LIMIT:
                raise ValueError(f"{what}: no example of {incremental} units fits in {max_len} tokens")


def record(family, index, text, outputs, length, token_position=False, count=None):
    """manifest record; text is the whole prompt with its answer prefix."""
    inp, prefix = split_answer_prefix(family, text)
    rec = {"index": index, "input": inp, "outputs": outputs, "length": length, "length_w_model_temp": length,
           "answer_prefix": prefix}
    if token_position:  # niah: tokens before the first answer's first occurrence in input
        rec["token_position_answer"] = count(inp[:inp.find(outputs[0])])
    return rec


# ---------------------------------------------------------------------------------------
# niah.py


def generate_niah(args, count, words, haystack_text, max_seq_length, num_samples, seed):
    rng = random.Random(seed)  # random.seed(seed); np.random.seed(seed) is never drawn from
    num_k = max(args["num_needle_k"], args["num_needle_q"])
    num_v, num_q = args["num_needle_v"], args["num_needle_q"]
    kind, type_k, type_v = args["type_haystack"], args["type_needle_k"], args["type_needle_v"]
    if kind == "essay":
        haystack = essay_words(haystack_text)
    keys_pool = words.niah_keys() if "words" in (type_k, type_v) else None

    def draw(kind_of_needle):
        if kind_of_needle == "numbers":
            return str(rng.randint(10 ** 6, 10 ** 7 - 1))
        if kind_of_needle == "words":
            return rng.choice(keys_pool)
        if kind_of_needle == "uuids":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        raise ValueError(kind_of_needle)

    template = full_template("niah")
    shown_v = type_v
    if num_q * num_v == 1:  # singular wording, applied to the unformatted template
        template = template.replace("Some", "A").replace("are all", "is").replace("are", "is")
        template = template.replace("answers", "answer")
        shown_v = type_v[:-1]

    def generate(num_haystack):
        keys, values, needles = [], [], []
        for _ in range(num_k):
            keys.append(draw(type_k))
            value = []
            for _ in range(num_v):
                value.append(draw(type_v))
                needles.append(NEEDLE.format(type_needle_v=type_v, key=keys[-1], value=value[-1]))
            values.append(value)
        random.Random(seed).shuffle(needles)

        if kind == "essay":
            if num_haystack <= len(haystack):
                text = " ".join(haystack[:num_haystack])
            else:
                repeats = (num_haystack + len(haystack) - 1) // len(haystack)
                text = " ".join((haystack * repeats)[:num_haystack])
            sents = essay_sentences(text)
            positions = [0] + sorted(int(len(sents) * (depth / 100)) for depth in rng.sample(DEPTHS, len(needles))) \
                + [len(sents)]
            parts = []
            for i in range(1, len(positions)):
                parts.append(" ".join(sents[positions[i - 1]:positions[i]]))
                if i - 1 < len(needles):
                    parts.append(needles[i - 1])
            context = " ".join(parts)
        else:
            if kind == "noise":
                lines = [NOISE] * num_haystack
            else:  # "needle": distractor needles, key drawn before value
                lines = []
                for _ in range(num_haystack):
                    key = draw(type_k)
                    lines.append(NEEDLE.format(type_needle_v=type_v, key=key, value=draw(type_v)))
            indexes = sorted(rng.sample(range(num_haystack), len(needles)), reverse=True)
            for index, needle in zip(indexes, needles):
                lines.insert(index, needle)
            context = "\n".join(lines)

        picked = rng.sample(range(num_k), num_q)
        queries = [keys[i] for i in picked]
        answers = [a for i in picked for a in values[i]]
        query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        return template.format(type_needle_v=shown_v, context=context, query=query), answers

    ttg = FAMILIES["niah"]["tokens_to_generate"]
    max_len = max_seq_length
    incremental = 500 if kind == "essay" else 25
    if kind != "essay" and max_seq_length < 4096:
        incremental = 5
    n = search_size(lambda m: generate(m)[0], count, max_len, ttg, incremental, incremental,
                    lambda per: max(int((max_len / per) * 3), incremental * 2))
    records = []
    for index in range(num_samples):
        (text, answers), length = shrink_until_fits(generate, count, n, incremental, ttg, max_len, "niah")
        records.append(record("niah", index, text, answers, length, token_position=True, count=count))
    return records


# ---------------------------------------------------------------------------------------
# variable_tracking.py (noise haystack)


def generate_vt(args, count, max_seq_length, num_samples, seed):
    rng = random.Random(seed)
    nprng = np.random.RandomState(seed)
    num_chains, num_hops = args["num_chains"], args["num_hops"]
    assert args["type_haystack"] == "noise"
    template = full_template("variable_tracking")

    def chains_of(is_icl):
        k = 3 if is_icl else 5
        hops = min(10, num_hops) if is_icl else num_hops
        names = ["".join(rng.choices(string.ascii_uppercase, k=k)).upper() for _ in range((hops + 1) * num_chains)]
        while len(set(names)) < num_chains * (hops + 1):
            names.append("".join(rng.choices(string.ascii_uppercase, k=k)).upper())
        names_by_chain, chains = [], []
        for i in range(0, len(names), hops + 1):
            these = names[i:i + hops + 1]
            names_by_chain.append(these)
            chain = [f"VAR {these[0]} = 12345" if is_icl else f"VAR {these[0]} = {str(nprng.randint(10000, 99999))}"]
            for j in range(hops):
                chain.append(f"VAR {these[j + 1]} = VAR {these[j]} ")
            chains.append(chain)
        return names_by_chain, chains

    def generate(num_noises, is_icl):
        names, chains = chains_of(is_icl)
        value = chains[0][0].split("=")[-1].strip()
        lines = [NOISE] * num_noises
        for chain in chains:
            positions = sorted(rng.sample(range(len(lines)), len(chain)))
            for j, position in enumerate(positions):
                lines.insert(position + j, chain[j])
        context = "\n".join(lines).replace(". \n", ".\n")
        return template.format(context=context, query=value, num_v=num_hops + 1), names[0]

    def randomize_icl(icl):
        for item in icl.strip().split()[-num_hops - 1:]:
            icl = icl.replace(item, "".join(rng.choices(string.ascii_uppercase, k=len(item))).upper())
        return icl.replace("12345", str(nprng.randint(10000, 99999)))

    # 1. The one-shot example: its own run at max_seq_length 500, no generation budget,
    #    3-letter names and the value 12345; kept with its answer prefix.
    icl_max, icl_inc = 500, 5
    n = search_size(lambda m: generate(m, True)[0], count, icl_max, 0, icl_inc, icl_inc,
                    lambda per: max(int((icl_max / per) * 3), icl_inc * 2))
    (icl_input, icl_outputs), _ = shrink_until_fits(lambda m: generate(m, True), count, n, icl_inc, 0, icl_max,
                                                    "vt example")
    icl = icl_input + " " + " ".join(icl_outputs) + "\n"
    example_tokens = count(icl)

    # 2. The samples, each with a re-randomised copy of the example in front.
    ttg = FAMILIES["variable_tracking"]["tokens_to_generate"]
    max_len = max_seq_length
    incremental = 10 if max_seq_length >= 4096 else 5
    n = search_size(lambda m: generate(m, False)[0], count, max_len, example_tokens + ttg, incremental, incremental,
                    lambda per: max(int((max_len / per) * 3), incremental * 2))
    cut_at = FAMILIES["variable_tracking"]["template"][:20]

    def with_example(m):
        text, names = generate(m, False)
        cutoff = text.index(cut_at)
        return text[:cutoff] + randomize_icl(icl) + "\n" + text[cutoff:], names

    records = []
    for index in range(num_samples):
        (text, names), length = shrink_until_fits(with_example, count, n, incremental, ttg, max_len, "vt")
        records.append(record("variable_tracking", index, text, names, length))
    return records


# ---------------------------------------------------------------------------------------
# common_words_extraction.py


def generate_cwe(args, count, words, max_seq_length, num_samples, seed):
    rng = random.Random(seed)  # cwe seeds only Python's random
    pool = words.cwe_pool(seed)
    num_cw = args["num_cw"]
    template = full_template("common_words_extraction")

    def example(num_words, common_repeats, uncommon_repeats):
        if num_words > len(pool):
            raise ValueError(f"cwe: {num_words} distinct words asked, the word pool has {len(pool)} "
                             "(RULER's english_words.json fallback is not supported)")
        chosen = rng.sample(pool, num_words)
        common, uncommon = chosen[:num_cw], chosen[num_cw:]
        word_list = common * common_repeats + uncommon * uncommon_repeats
        random.Random(seed).shuffle(word_list)
        return " ".join(f"{i + 1}. {w}" for i, w in enumerate(word_list)), common

    def generate(num_words):
        if max_seq_length < 4096:
            shot = example(20, 3, 1)  # num_fewshot = 1, drawn before the main list
            context, answer = example(num_words, 6, 1)
        else:
            shot = example(40, 10, 3)
            context, answer = example(num_words, args["freq_cw"], args["freq_ucw"])
        shot_text = template.format(num_cw=num_cw, context=shot[0], query="") + " " + \
            " ".join(f"{i + 1}. {w}" for i, w in enumerate(shot[1]))
        return shot_text + "\n" + template.format(num_cw=num_cw, context=context, query=""), answer

    ttg = FAMILIES["common_words_extraction"]["tokens_to_generate"]
    max_len, incremental = max_seq_length, 10
    n = search_size(lambda m: generate(m)[0], count, max_len, ttg, incremental, 4096,
                    lambda per: max(int(max_len // per) * 2, incremental * 2))
    records = []
    for index in range(num_samples):
        (text, answer), length = shrink_until_fits(generate, count, n, incremental, ttg, max_len, "cwe")
        records.append(record("common_words_extraction", index, text, answer, length))
    return records


# ---------------------------------------------------------------------------------------
# freq_words_extraction.py


def _zeta(s):
    """scipy.special.zeta(s) (Riemann); alpha is 2.0 in RULER, where it is pi**2 / 6."""
    try:
        from scipy.special import zeta
        return zeta(s)
    except ImportError:
        assert s == 2.0
        return np.float64(math.pi ** 2 / 6)


def generate_fwe(args, count, max_seq_length, num_samples, seed):
    rng = random.Random(seed)
    alpha, coded_wordlen = args["alpha"], 6
    ttg = FAMILIES["freq_words_extraction"]["tokens_to_generate"]
    max_len = max_seq_length - ttg
    vocab_size = max_len // 50
    incremental = max_len // 32
    template = full_template("freq_words_extraction")

    def generate(num_words):
        vocab = ["".join(rng.choices(string.ascii_lowercase, k=coded_wordlen)) for _ in range(vocab_size)]
        while len(set(vocab)) < vocab_size:
            vocab.append("".join(rng.choices(string.ascii_lowercase, k=coded_wordlen)))
        vocab = sorted(set(vocab))
        random.Random(seed).shuffle(vocab)
        vocab[0] = "..."  # the top rank is the noise word

        def text_of(n):
            k = np.arange(1, len(vocab) + 1)
            counts = (n * (k ** -alpha) / _zeta(alpha)).astype(int)
            # numpy's power may differ from libm's pow by an ulp (SIMD paths); the floors above
            # must not depend on that, or the expected file would depend on the machine.
            exact = (n * np.array([math.pow(int(x), -alpha) for x in k]) / _zeta(alpha)).astype(int)
            assert (counts == exact).all(), f"fwe: word counts for {n} words depend on pow's rounding"
            coded = [w for w, c in zip(vocab, counts) for _ in range(c)]
            random.Random(seed).shuffle(coded)
            return template.format(context=" ".join(coded), query=""), vocab[1:4]

        if num_words > 0:  # a sample: lower from the found size while too long
            text, answer = text_of(num_words)
            while count(text) > max_len:
                num_words -= incremental
                text, answer = text_of(num_words)
        else:  # the first call: walk up from max_len // 6 words until it reaches max_len, step back
            num_words = max_len // coded_wordlen
            text, answer = text_of(num_words)
            while count(text) < max_len:
                num_words += incremental
                text, answer = text_of(num_words)
            num_words -= incremental
        text, answer = text_of(num_words)
        return text, answer, num_words

    _, _, found = generate(-1)
    records = []
    for index in range(num_samples):
        text, answer, _ = generate(found)
        records.append(record("freq_words_extraction", index, text, answer, count(text) + ttg))
    return records


# ---------------------------------------------------------------------------------------
# qa.py


def generate_qa(args, count, max_seq_length, num_samples, seed, squad=None, hotpotqa=None):
    rng = random.Random(seed)  # np.random.seed(seed) is never drawn from
    if args["dataset"] == "squad":
        qas, docs = read_squad(squad)
    else:
        qas, docs = read_hotpotqa(hotpotqa)
    template = full_template("qa")

    def generate(index, num_docs):
        if index >= len(qas):
            raise ValueError(f"qa: sample {index} asked, the file has {len(qas)} questions")
        q = qas[index]
        curr, more = q["context"], q.get("more_context", [])
        if num_docs < len(docs):
            if num_docs - len(curr) > len(more):
                others = [i for i, _ in enumerate(docs) if i not in curr + more]
                chosen = curr + more + rng.sample(others, max(0, num_docs - len(curr) - len(more)))
            else:
                chosen = curr + rng.sample(more, num_docs - len(curr))
            all_docs = [docs[i] for i in chosen]
        else:
            repeats = (num_docs + len(docs) - 1) // len(docs)
            all_docs = (docs * repeats)[:num_docs]
        random.Random(seed).shuffle(all_docs)
        context = "\n\n".join(DOCUMENT_PROMPT.format(i=i + 1, document=d) for i, d in enumerate(all_docs))
        return template.format(context=context, query=q["query"]), q["outputs"]

    ttg = FAMILIES["qa"]["tokens_to_generate"]
    max_len, incremental = max_seq_length, 10
    n = search_size(lambda m: generate(0, m)[0], count, max_len, ttg, incremental, incremental,
                    lambda per: max(int((max_len / per) * 3), incremental * 2))
    records = []
    for index in range(num_samples):
        (text, outputs), length = shrink_until_fits(lambda m: generate(index, m), count, n, incremental, ttg,
                                                    max_len, "qa")
        records.append(record("qa", index, text, outputs, length))
    return records


# ---------------------------------------------------------------------------------------
# Entry point for the data


def generate_task(task, max_seq_length, num_samples, count, words, haystack_text=None, squad=None, hotpotqa=None,
                  seed=42):
    """The records of <task>/validation.jsonl at length max_seq_length, in file order.

    count(text) -> number of tokens (no special tokens); words: Words; haystack_text: the essay
    text (niah essay tasks); squad / hotpotqa: file paths (qa_1 / qa_2)."""
    family, args = TASKS[task]
    if family == "niah":
        return generate_niah(args, count, words, haystack_text, max_seq_length, num_samples, seed)
    if family == "variable_tracking":
        return generate_vt(args, count, max_seq_length, num_samples, seed)
    if family == "common_words_extraction":
        return generate_cwe(args, count, words, max_seq_length, num_samples, seed)
    if family == "freq_words_extraction":
        return generate_fwe(args, count, max_seq_length, num_samples, seed)
    return generate_qa(args, count, max_seq_length, num_samples, seed, squad=squad, hotpotqa=hotpotqa)


def jsonl_text(records):
    """manifest_utils.write_manifest: json.dump(record, ensure_ascii=True) + newline per record."""
    return "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in records)


# ---------------------------------------------------------------------------------------
# Scoring: scripts/eval/evaluate.py, scripts/eval/synthetic/constants.py

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess_pred(pred):
    """strip, every ASCII control character (\\x00-\\x1f) made a newline, strip again."""
    return _CONTROL.sub("\n", pred.strip()).strip()


def _add(values):
    total = 0.0
    for v in values:  # left to right, as sum() of floats before Python 3.12
        total += v
    return total


def string_match_all(preds, refs):
    """Per sample the fraction of references found (case-insensitive substring); mean x 100, round 2."""
    per = [_add([1.0 if r.lower() in p.lower() else 0.0 for r in ref]) / len(ref) for p, ref in zip(preds, refs)]
    return round(_add(per) / len(preds) * 100, 2)


def string_match_part(preds, refs):
    """Per sample 1 if any reference is found (case-insensitive substring); mean x 100, round 2."""
    per = [max([1.0 if r.lower() in p.lower() else 0.0 for r in ref]) for p, ref in zip(preds, refs)]
    return round(_add(per) / len(preds) * 100, 2)


def score_lines(task, lines):
    """(score, nulls) of one task's prediction records (dicts), as run_evaluation_per_task."""
    family = TASKS[task][0]
    preds = [postprocess_pred(line["pred"]) for line in lines]
    refs = [line.get("outputs", [line.get("output", "")]) for line in lines]
    nulls = f"{sum(len(p) == 0 for p in preds)}/{len(preds)}"
    if len(refs) > 0 and refs[0][0] is not None:
        metric = string_match_all if METRIC[family] == "string_match_all" else string_match_part
        score = metric(preds, refs)
    else:
        score = 0.0
    return score, nulls


def summary_csv_text(results):
    """write_evaluation: results is {task: (score, nulls)} in evaluation order; the csv text of
    pd.DataFrame([['Tasks', ...], ['Score', ...], ['Nulls', ...]]).to_csv(index=False)."""
    import pandas as pd
    tasks = list(results)
    rows = [["Tasks"] + tasks, ["Score"] + [results[t][0] for t in tasks], ["Nulls"] + [results[t][1] for t in tasks]]
    return pd.DataFrame(rows).to_csv(index=False, lineterminator="\n")


def summary_csv_text_plain(results):
    """The same text without pandas: the integer column header, then the rows, floats by repr()."""
    tasks = list(results)
    rows = [[str(i) for i in range(len(tasks) + 1)], ["Tasks"] + tasks,
            ["Score"] + [repr(results[t][0]) for t in tasks], ["Nulls"] + [results[t][1] for t in tasks]]
    return "".join(",".join(r) + "\n" for r in rows)


def evaluate_pred_dir(pred_dir):
    """evaluate.py on a folder of <task>.jsonl: (file name, csv text). Tasks in synthetic.yaml
    order, missing files skipped; summary.csv, or summary-<task>.csv for a single task."""
    import os
    results = {}
    for task in TASK_ORDER:
        path = os.path.join(pred_dir, f"{task}.jsonl")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        results[task] = score_lines(task, lines)
    name = "summary.csv" if len(results) > 1 else f"summary-{next(iter(results))}.csv"
    return name, summary_csv_text(results)


# ---------------------------------------------------------------------------------------
# Self-check


def _main(argv):
    """Generates every task at each length and prints the records' lengths; fails when a task
    cannot be generated or a length exceeds L. Without file arguments it makes the test's
    tokenizer and inputs (test_ruler_oracle.py) in a temporary folder."""
    import argparse
    import tempfile
    from pathlib import Path
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--lengths", default="1024,4096")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--words-dir", help="wonderwords assets (default: the installed wonderwords)")
    parser.add_argument("--tokenizer-json")
    parser.add_argument("--haystack")
    parser.add_argument("--squad")
    parser.add_argument("--hotpotqa")
    args = parser.parse_args(argv[1:])
    if args.words_dir is None:
        import wonderwords
        args.words_dir = str(Path(wonderwords.__file__).resolve().parent / "assets")
    words = Words.from_dir(args.words_dir)
    tmp = Path(tempfile.mkdtemp(prefix="ruler_reference_"))
    if not (args.tokenizer_json and args.haystack and args.squad and args.hotpotqa):
        import test_ruler_oracle as t
        t.make_ruler_tokenizer(tmp / "model", words)
        (tmp / "essay.txt").write_text(t.make_essay(), encoding="utf-8")
        (tmp / "squad.json").write_text(json.dumps(t.make_squad(), ensure_ascii=False), encoding="utf-8")
        (tmp / "hotpotqa.json").write_text(json.dumps(t.make_hotpotqa(), ensure_ascii=False), encoding="utf-8")
    tok = Tokenizer.from_file(args.tokenizer_json or str(tmp / "model" / "tokenizer.json"))

    def count(text):
        return len(tok.encode(text, add_special_tokens=False).ids)
    with open(args.haystack or tmp / "essay.txt", encoding="utf-8") as f:
        essay = f.read()
    squad, hotpotqa = args.squad or str(tmp / "squad.json"), args.hotpotqa or str(tmp / "hotpotqa.json")
    ok = True
    for length in [int(x) for x in args.lengths.split(",")]:
        for task in TASK_ORDER:
            try:
                records = generate_task(task, length, args.samples, count, words, essay, squad, hotpotqa)
            except ValueError as e:
                print(f"{length:6d} {task:16s} ERROR {e}")
                ok = False
                continue
            ttg = FAMILIES[TASKS[task][0]]["tokens_to_generate"]
            assert all(count(r["input"] + r["answer_prefix"]) + ttg == r["length"] for r in records)
            lengths = [r["length"] for r in records]
            ok &= all(x <= length for x in lengths)
            print(f"{length:6d} {task:16s} lengths {lengths}")
    return 0 if ok else 1


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv))
