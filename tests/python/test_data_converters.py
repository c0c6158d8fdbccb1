"""scripts/data/convert_longalign.py and convert_chatqa2.py (on scripts/data/sft_jsonl.py)
on small files in each published layout: the exact messages written, bad records named
by file:line and field (or skipped and counted with --skip-bad), output written
atomically (no partial OUT, no temporary file left), no overwrite without --force, JSON
arrays streamed across chunk boundaries, folders of shards, and parquet (through
pyarrow when it is installed; a clear error when it is not)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA_SCRIPTS = REPO / "scripts" / "data"
sys.path.insert(0, str(DATA_SCRIPTS))
import convert_chatqa2  # noqa: E402
import convert_longalign  # noqa: E402
import sft_jsonl  # noqa: E402
from sft_jsonl import ConversionError  # noqa: E402

LONGALIGN = "THUDM/LongAlign-10k"
CHATQA2 = "nvidia/ChatQA2-Long-SFT-data"


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def system(text):
    return {"role": "system", "content": text}


def write_jsonl(path, rows):
    """`rows`: records, or raw strings written as they are (malformed lines)."""
    lines = [row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run_script(script, *args):
    return subprocess.run([sys.executable, str(DATA_SCRIPTS / script), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)


def names_in(folder):
    return sorted(path.name for path in folder.iterdir())


# ----------------------------------------------------------------------------- LongAlign

LA_PAPER = {"messages": [user("Read this paper.\n\nAbstract: sparse attention lowers cost.\n\nSummarize it."),
                         assistant("It shows that sparse attention lowers cost.")],
            "dataset": "arxiv", "id": "la-1", "length": 5321}
LA_MULTI_TURN_UNICODE = {"messages": [user("阅读下面的小说，回答问题。第一章 東京の夜 🌙 主角是谁？"),
                                      assistant("主角是李雷。"),
                                      user("Und auf Deutsch? „Zitate“ — bitte."),
                                      assistant("Der Held heißt Li Lei.")],
                         "dataset": "books", "id": 7, "length": 40000}
LA_EMPTY_ANSWER = {"messages": [user("Question?"), assistant("   ")], "dataset": "arxiv", "id": "la-3"}
LA_CUT_OFF_LINE = '{"messages": [{"role": "user", "content": "cut off'
LA_WITH_SYSTEM = {"messages": [system("Be brief."), user("Q"), assistant("A")]}


def longalign_output(record, at):
    source = {"dataset": LONGALIGN, "at": at}
    source.update({key: value for key, value in (("id", record.get("id")), ("subset", record.get("dataset")))
                   if value is not None})
    return {"messages": record["messages"], "source": source}


@pytest.fixture()
def longalign_mixed(tmp_path):
    return write_jsonl(tmp_path / "long.jsonl",
                       [LA_PAPER, LA_MULTI_TURN_UNICODE, LA_EMPTY_ANSWER, LA_CUT_OFF_LINE, LA_WITH_SYSTEM])


def test_longalign_skip_bad_writes_the_good_records_exactly(longalign_mixed, tmp_path):
    out = tmp_path / "out" / "sft.jsonl"
    summary = convert_longalign.convert(longalign_mixed, out, skip_bad=True)
    assert read_jsonl(out) == [longalign_output(LA_PAPER, "long.jsonl:1"),
                               longalign_output(LA_MULTI_TURN_UNICODE, "long.jsonl:2"),
                               longalign_output(LA_WITH_SYSTEM, "long.jsonl:5")]
    assert (summary.read, summary.written, dict(summary.skipped)) == (5, 3, {"empty content": 1, "invalid JSON": 1})
    assert summary.line() == (f"convert_longalign: wrote 3 conversations to {out} from 5 records in 1 file(s); "
                              "skipped 2 (empty content: 1, invalid JSON: 1)")
    assert "東京の夜 🌙" in out.read_text(encoding="utf-8")  # UTF-8 text, not \u escapes
    assert names_in(out.parent) == ["sft.jsonl"]


def test_longalign_bad_record_names_file_line_and_field_and_writes_nothing(longalign_mixed, tmp_path):
    out = tmp_path / "sft.jsonl"
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(longalign_mixed, out)
    assert str(error.value) == (f"{longalign_mixed}:3: $.messages[1].content: is empty "
                                "(skip such records with --skip-bad)")
    assert names_in(tmp_path) == ["long.jsonl"]  # neither OUT nor a temporary file


def test_longalign_invalid_json_line_names_its_line(tmp_path):
    source = write_jsonl(tmp_path / "long.jsonl", [LA_PAPER, LA_CUT_OFF_LINE])
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(source, tmp_path / "sft.jsonl")
    assert str(error.value).startswith(f"{source}:2: $: invalid JSON: Unterminated string")


@pytest.mark.parametrize("record, message", [
    ({"messages": [{"role": "human", "content": "Hi"}, assistant("Hello")]},
     '$.messages[0].role: must be one of system, user, assistant, got "human"'),
    ({"messages": [user("Hi"), {"role": "assistant", "content": ["Hello"]}]},
     "$.messages[1].content: must be a string, got a list"),
    ({"messages": [user("Hi"), {"role": "assistant"}]}, "$.messages[1].content: is missing"),
    ({"messages": [user("Only a question")]}, "$.messages: has no assistant message, so nothing would be trained"),
    ({"messages": [user("Hi"), system("Late"), assistant("Hello")]},
     "$.messages[1].role: a system message may only come first"),
    ({"messages": []}, "$.messages: is an empty list"),
    ({"dataset": "arxiv", "id": "x"}, "$.messages: is missing"),
    ('{"messages": [{"role": "user", "content": "\\ud800"}, {"role": "assistant", "content": "A"}]}',
     "$.messages[0].content: holds an unpaired UTF-16 surrogate, which UTF-8 cannot encode"),
    (["not", "an", "object"], "$: expected a JSON object, got a list"),
])
def test_longalign_rejects_malformed_records(tmp_path, record, message):
    source = write_jsonl(tmp_path / "long.jsonl", [LA_PAPER, record])
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(source, tmp_path / "sft.jsonl")
    assert str(error.value) == f"{source}:2: {message} (skip such records with --skip-bad)"
    assert names_in(tmp_path) == ["long.jsonl"]


def test_longalign_cli_writes_then_refuses_to_overwrite_without_force(tmp_path):
    source = write_jsonl(tmp_path / "long.jsonl", [LA_PAPER, LA_MULTI_TURN_UNICODE])
    out = tmp_path / "sft.jsonl"
    first = run_script("convert_longalign.py", source, out)
    assert (first.returncode, first.stdout) == (0, "")
    assert first.stderr == f"convert_longalign: wrote 2 conversations to {out} from 2 records in 1 file(s)\n"
    written = out.read_bytes()
    assert read_jsonl(out) == [longalign_output(LA_PAPER, "long.jsonl:1"),
                               longalign_output(LA_MULTI_TURN_UNICODE, "long.jsonl:2")]

    again = run_script("convert_longalign.py", source, out)
    assert again.returncode == 1
    assert again.stderr == f"convert_longalign.py: error: {out}: already exists; pass --force to replace it\n"
    assert out.read_bytes() == written

    write_jsonl(source, [LA_WITH_SYSTEM])
    forced = run_script("convert_longalign.py", source, out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert read_jsonl(out) == [longalign_output(LA_WITH_SYSTEM, "long.jsonl:1")]
    assert names_in(tmp_path) == ["long.jsonl", "sft.jsonl"]


def test_longalign_cli_error_keeps_the_old_output_whole(longalign_mixed, tmp_path):
    out = tmp_path / "sft.jsonl"
    out.write_text("previous contents\n")
    result = run_script("convert_longalign.py", longalign_mixed, out, "--force")
    assert result.returncode == 1
    assert result.stderr == (f"convert_longalign.py: error: {longalign_mixed}:3: $.messages[1].content: is empty "
                             "(skip such records with --skip-bad)\n")
    assert out.read_text() == "previous contents\n"
    assert names_in(tmp_path) == ["long.jsonl", "sft.jsonl"]


def test_longalign_cli_skip_bad_and_limit(longalign_mixed, tmp_path):
    out = tmp_path / "sft.jsonl"
    result = run_script("convert_longalign.py", longalign_mixed, out, "--skip-bad")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"convert_longalign: wrote 3 conversations to {out} from 5 records in 1 file(s); "
                             "skipped 2 (empty content: 1, invalid JSON: 1)\n")
    limited = tmp_path / "limited.jsonl"
    result = run_script("convert_longalign.py", longalign_mixed, limited, "--limit", "2")
    assert result.returncode == 0, result.stderr
    assert read_jsonl(limited) == [longalign_output(LA_PAPER, "long.jsonl:1"),
                                   longalign_output(LA_MULTI_TURN_UNICODE, "long.jsonl:2")]
    assert run_script("convert_longalign.py", longalign_mixed, tmp_path / "x.jsonl", "--limit", "0").returncode == 2


def test_folder_of_shards_is_read_in_name_order(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    write_jsonl(shards / "part-00001.jsonl", [LA_WITH_SYSTEM])
    write_jsonl(shards / "part-00000.jsonl", [LA_PAPER, LA_MULTI_TURN_UNICODE])
    (shards / "README.md").write_text("not data\n")
    out = tmp_path / "sft.jsonl"
    summary = convert_longalign.convert(shards, out)
    assert read_jsonl(out) == [longalign_output(LA_PAPER, "part-00000.jsonl:1"),
                               longalign_output(LA_MULTI_TURN_UNICODE, "part-00000.jsonl:2"),
                               longalign_output(LA_WITH_SYSTEM, "part-00001.jsonl:1")]
    assert (summary.files, summary.written) == (2, 3)


def test_json_file_may_be_json_lines(tmp_path):
    # Hugging Face's Dataset.to_json writes JSON Lines, whatever the file is called.
    source = write_jsonl(tmp_path / "long.json", [LA_PAPER])
    convert_longalign.convert(source, tmp_path / "sft.jsonl")
    assert read_jsonl(tmp_path / "sft.jsonl") == [longalign_output(LA_PAPER, "long.json:1")]


def test_inputs_that_hold_nothing_are_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConversionError, match="holds no .jsonl, .json or .parquet file"):
        convert_longalign.convert(empty, tmp_path / "a.jsonl")
    with pytest.raises(ConversionError, match="no such file or folder"):
        convert_longalign.convert(tmp_path / "missing.jsonl", tmp_path / "a.jsonl")
    with pytest.raises(ConversionError, match="unknown input kind"):
        convert_longalign.convert(write_jsonl(tmp_path / "long.txt", [LA_PAPER]), tmp_path / "a.jsonl")
    only_bad = write_jsonl(tmp_path / "bad.jsonl", [LA_EMPTY_ANSWER])
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(only_bad, tmp_path / "a.jsonl", skip_bad=True)
    assert str(error.value) == f"{only_bad}: no conversation was converted (1 records read, skipped: empty content: 1)"
    assert not (tmp_path / "a.jsonl").exists()


def test_an_exception_mid_write_leaves_no_partial_output(tmp_path):
    source = write_jsonl(tmp_path / "long.jsonl", [LA_PAPER, LA_MULTI_TURN_UNICODE, LA_WITH_SYSTEM])
    calls = []

    def convert_then_crash(record):
        calls.append(record)
        if len(calls) == 3:
            raise RuntimeError("crash after two lines were written")
        return convert_longalign.convert_record(record)

    with pytest.raises(RuntimeError):
        sft_jsonl.convert_dataset(source, tmp_path / "sft.jsonl", convert_then_crash, dataset=LONGALIGN, name="t")
    assert names_in(tmp_path) == ["long.jsonl"]


# ----------------------------------------------------------------------------- ChatQA2, its files' layout

CQ_LONG_SFT = {"paragraph_id": "ls-1",
               "question": ("User: Below is a paper. Memorize it and answer my question after the paper.\n"
                            "Article: Sparse attention lowers cost.\n\nQuestion: What does sparse attention "
                            "lower?\n\nAssistant:"),
               "answer": "The cost of attention.", "sub-paragraphs": "", "word count": 17, "Date": ""}
CQ_LONG_SFT_MESSAGES = [
    user("Below is a paper. Memorize it and answer my question after the paper.\nArticle: Sparse attention lowers "
         "cost.\n\nQuestion: What does sparse attention lower?"),
    assistant("The cost of attention.")]
CQ_NARRATIVE = {"paragraph_id": "nqa-7", "question": "Who is Miss Delmer?",
                "answer": ["An elderly woman who lives alone in Zürich.", "An old woman"],
                "sub-paragraphs": "<|begin_of_text|>Chapitre 1 — Mlle Delmer vécut seule à Zürich. 東京\n",
                "word count": 12}
CQ_NARRATIVE_MESSAGES = [
    user("Chapitre 1 — Mlle Delmer vécut seule à Zürich. 東京\n\nWho is Miss Delmer?"),
    assistant("An elderly woman who lives alone in Zürich.")]
CQ_EMPTY_ANSWER = {"paragraph_id": "ls-3", "question": "User: Summarize.\n\nAssistant:", "answer": "",
                   "sub-paragraphs": ""}
CQ_QUESTION_NOT_TEXT = {"paragraph_id": "ls-4", "question": ["not", "a", "string"], "answer": "x"}


def write_json_array(path, records):
    # Indented, as json.dump(indent=...) writes it: elements span several lines.
    path.write_text(json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def element_lines(path):
    """The line each top-level element of an indent=2 array starts on."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.startswith("  {")]


def chatqa2_output(messages, at, record_id=None):
    source = {"dataset": CHATQA2, "at": at}
    if record_id is not None:
        source["id"] = record_id
    return {"messages": messages, "source": source}


@pytest.fixture()
def chatqa2_array(tmp_path):
    return write_json_array(tmp_path / "long_sft_QA_train.json",
                            [CQ_LONG_SFT, CQ_NARRATIVE, CQ_EMPTY_ANSWER, CQ_QUESTION_NOT_TEXT])


def test_chatqa2_json_array_is_converted_exactly(chatqa2_array, tmp_path):
    out = tmp_path / "sft.jsonl"
    summary = convert_chatqa2.convert(chatqa2_array, out, skip_bad=True)
    first, second, _, _ = element_lines(chatqa2_array)
    assert read_jsonl(out) == [
        chatqa2_output(CQ_LONG_SFT_MESSAGES, f"long_sft_QA_train.json:{first}", "ls-1"),
        chatqa2_output(CQ_NARRATIVE_MESSAGES, f"long_sft_QA_train.json:{second}", "nqa-7")]
    assert summary.line() == (f"convert_chatqa2: wrote 2 conversations to {out} from 4 records in 1 file(s); "
                              "skipped 2 (empty content: 1, wrong type: 1); removed <|begin_of_text|>: 1")


def test_chatqa2_bad_record_in_an_array_names_its_line_and_field(chatqa2_array, tmp_path):
    with pytest.raises(ConversionError) as error:
        convert_chatqa2.convert(chatqa2_array, tmp_path / "sft.jsonl")
    third = element_lines(chatqa2_array)[2]
    assert str(error.value) == f"{chatqa2_array}:{third}: $.answer: is empty (skip such records with --skip-bad)"
    assert names_in(tmp_path) == ["long_sft_QA_train.json"]


@pytest.mark.parametrize("record, message", [
    ({"paragraph_id": "a", "question": "User: Q?\n\nAssistant:"},
     "$.answer: is missing, so the conversation would have no assistant turn"),
    ({"question": "Q?", "answer": []}, "$.answer: is an empty list"),
    ({"question": "Q?", "answer": 3}, "$.answer: must be a string or a list of strings, got a number"),
    ({"question": "Q?", "answers": [{"text": "  "}]}, "$.answers[0].text: is empty"),
    ({"question": "User: \n\nAssistant:", "answer": "A"}, "$.question: is empty"),
    ({"question": "Q?", "answer": "A", "sub-paragraphs": {"title": "t"}},
     '$["sub-paragraphs"]: must be a string, got an object'),
    ({"paragraph_id": "p", "answer": "A"}, '$: has neither "question" (ChatQA2 files) nor "messages" (ChatQA 1.x layout)'),
])
def test_chatqa2_rejects_malformed_question_records(tmp_path, record, message):
    source = write_jsonl(tmp_path / "rows.jsonl", [record])
    with pytest.raises(ConversionError) as error:
        convert_chatqa2.convert(source, tmp_path / "sft.jsonl")
    assert str(error.value) == f"{source}:1: {message} (skip such records with --skip-bad)"


def test_chatqa2_answer_variants_take_the_first_answer(tmp_path):
    source = write_jsonl(tmp_path / "rows.jsonl", [
        {"question": "Q1", "answers": ["first", "second"]},
        {"question": "Q2", "answers": [{"text": "span", "answer_start": 3}]},
        {"question": "Q3", "answer": "plain", "sub-paragraphs": ["Title", "Body text."]}])
    convert_chatqa2.convert(source, tmp_path / "sft.jsonl")
    assert [row["messages"] for row in read_jsonl(tmp_path / "sft.jsonl")] == [
        [user("Q1"), assistant("first")],
        [user("Q2"), assistant("span")],
        [user("Title\n\nBody text.\n\nQ3"), assistant("plain")]]


def test_chatqa2_invalid_json_in_an_array_stops_even_with_skip_bad(tmp_path):
    source = tmp_path / "long_sft_QA_train.json"
    source.write_text('[\n  {"question": "User: a\\n\\nAssistant:", "answer": "b"},\n  {"question": oops}\n]\n')
    with pytest.raises(ConversionError) as error:
        convert_chatqa2.convert(source, tmp_path / "sft.jsonl", skip_bad=True)
    assert str(error.value).startswith(f"{source}:3: invalid JSON in the array: Expecting value (a JSON array "
                                       "cannot be resynchronised")
    assert names_in(tmp_path) == ["long_sft_QA_train.json"]


@pytest.mark.parametrize("text, message", [
    ('[{"question": "q", "answer": "a"} {"question": "r"}]', '1: invalid JSON array: expected "," or "]"'),
    ('[{"question": "q", "answer": "a"}] trailing', "1: unexpected text after the JSON array"),
    ('[{"question": "q", "answer": "a"},\n', "2: invalid JSON in the array: Expecting value"),
])
def test_json_array_structure_errors(tmp_path, text, message):
    source = tmp_path / "a.json"
    source.write_text(text)
    with pytest.raises(ConversionError) as error:
        convert_chatqa2.convert(source, tmp_path / "sft.jsonl", skip_bad=True)
    assert str(error.value).startswith(f"{source}:{message}")
    assert names_in(tmp_path) == ["a.json"]
    not_an_array = tmp_path / "b.json"
    not_an_array.write_text('\n{"question": "q"}\n')
    with pytest.raises(ConversionError) as error:
        list(sft_jsonl.iter_json_array_rows(not_an_array))
    assert str(error.value) == f'{not_an_array}:2: expected a JSON array ("[") or JSON Lines'


@pytest.mark.parametrize("chunk_chars", [1, 2, 3, 5, 7, 11, 64])
def test_json_array_reader_is_exact_across_chunk_boundaries(tmp_path, monkeypatch, chunk_chars):
    records = [CQ_LONG_SFT, {"n": 1234567890123, "f": -0.5e-7, "t": True, "z": None, "s": "a\\\"\u00e9🌙"},
               CQ_NARRATIVE, {}, {"nested": [[1, 2], {"k": "v"}]}]
    source = write_json_array(tmp_path / "a.json", records)
    monkeypatch.setattr(sft_jsonl, "JSON_ARRAY_CHUNK_CHARS", chunk_chars)
    rows = list(sft_jsonl.iter_json_array_rows(source))
    assert [row.record for row in rows] == records
    assert [int(row.position) for row in rows] == element_lines(source)
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(records) + "\n")
    assert [(row.position, row.record) for row in sft_jsonl.iter_json_array_rows(compact)] == [("1", r) for r in records]
    empty = tmp_path / "empty.json"
    empty.write_text(" [ ]\n")
    assert list(sft_jsonl.iter_json_array_rows(empty)) == []


# ----------------------------------------------------------------------------- ChatQA2, messages layout and options

CM_MULTI_TURN = {"messages": [user("What is the budget?"), assistant("$2M."), user("And for 2025?")],
                 "document": "title: Plan, source: The 2024 budget is $2M; 2025 is $3M.",
                 "answers": ["$3M.", "3 million"], "system": "You answer from the document.", "id": "cm-1"}
CM_DOCUMENT = "title: Plan, source: The 2024 budget is $2M; 2025 is $3M."
CM_COMPLETE = {"messages": [user("Résumé ?"), assistant("Oui — c'est ça.")], "document": "",
               "answers": ["not used: the messages end with an answer"]}
CM_NO_ANSWER = {"messages": [user("Q?")], "document": "D"}


@pytest.fixture()
def chatqa_messages(tmp_path):
    return write_jsonl(tmp_path / "chatqa.jsonl", [CM_MULTI_TURN, CM_COMPLETE])


def test_chatqa_messages_layout_default_rules(chatqa_messages, tmp_path):
    convert_chatqa2.convert(chatqa_messages, tmp_path / "sft.jsonl")
    assert read_jsonl(tmp_path / "sft.jsonl") == [
        chatqa2_output([system("You answer from the document."), user(f"{CM_DOCUMENT}\n\nWhat is the budget?"),
                        assistant("$2M."), user("And for 2025?"), assistant("$3M.")], "chatqa.jsonl:1", "cm-1"),
        chatqa2_output(CM_COMPLETE["messages"], "chatqa.jsonl:2")]


def test_chatqa_system_option_and_document_in_system(chatqa_messages, tmp_path):
    convert_chatqa2.convert(chatqa_messages, tmp_path / "a.jsonl", system="Use the context.", document_rule="system")
    assert [row["messages"] for row in read_jsonl(tmp_path / "a.jsonl")] == [
        [system(f"Use the context.\n\n{CM_DOCUMENT}"), user("What is the budget?"), assistant("$2M."),
         user("And for 2025?"), assistant("$3M.")],
        [system("Use the context."), *CM_COMPLETE["messages"]]]
    convert_chatqa2.convert(chatqa_messages, tmp_path / "b.jsonl", system="")
    assert read_jsonl(tmp_path / "b.jsonl")[0]["messages"] == [
        user(f"{CM_DOCUMENT}\n\nWhat is the budget?"), assistant("$2M."), user("And for 2025?"), assistant("$3M.")]
    convert_chatqa2.convert(chatqa_messages, tmp_path / "c.jsonl", document_rule="system")
    assert read_jsonl(tmp_path / "c.jsonl")[0]["messages"][0] == system(f"You answer from the document.\n\n{CM_DOCUMENT}")


def test_chatqa_messages_without_any_answer_is_named(tmp_path):
    source = write_jsonl(tmp_path / "chatqa.jsonl", [CM_MULTI_TURN, CM_NO_ANSWER])
    with pytest.raises(ConversionError) as error:
        convert_chatqa2.convert(source, tmp_path / "sft.jsonl")
    assert str(error.value) == (f"{source}:2: $.answers: is missing, so the conversation would have no assistant "
                                "turn (skip such records with --skip-bad)")


def test_chatqa_split_turns_cuts_a_transcript(tmp_path):
    record = {"question": "User: Hi there\n\nAssistant: Hello!\n\nUser: What is 2+2?\n\nAssistant:",
              "answer": "4", "sub-paragraphs": "Math notes."}
    source = write_jsonl(tmp_path / "rows.jsonl", [record])
    convert_chatqa2.convert(source, tmp_path / "split.jsonl", split_turns=True)
    assert read_jsonl(tmp_path / "split.jsonl")[0]["messages"] == [
        user("Math notes.\n\nHi there"), assistant("Hello!"), user("What is 2+2?"), assistant("4")]
    convert_chatqa2.convert(source, tmp_path / "whole.jsonl")
    assert read_jsonl(tmp_path / "whole.jsonl")[0]["messages"] == [
        user("Math notes.\n\nHi there\n\nAssistant: Hello!\n\nUser: What is 2+2?"), assistant("4")]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "User: a\n\nUser: b\n\nAssistant:", "answer": "c"}])
    with pytest.raises(ConversionError, match=r":1: \$\.question: turn 2 is a second user turn in a row"):
        convert_chatqa2.convert(bad, tmp_path / "bad_out.jsonl", split_turns=True)


def test_chatqa2_cli_with_options_and_summary(chatqa2_array, tmp_path):
    out = tmp_path / "sft.jsonl"
    result = run_script("convert_chatqa2.py", chatqa2_array, out, "--skip-bad", "--system", "Be exact.",
                        "--document", "system")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"convert_chatqa2: wrote 2 conversations to {out} from 4 records in 1 file(s); "
                             "skipped 2 (empty content: 1, wrong type: 1); removed <|begin_of_text|>: 1\n")
    first, second, _, _ = element_lines(chatqa2_array)
    assert read_jsonl(out) == [
        chatqa2_output([system("Be exact."), *CQ_LONG_SFT_MESSAGES], f"long_sft_QA_train.json:{first}", "ls-1"),
        chatqa2_output([system("Be exact.\n\nChapitre 1 — Mlle Delmer vécut seule à Zürich. 東京"),
                        user("Who is Miss Delmer?"), assistant("An elderly woman who lives alone in Zürich.")],
                       f"long_sft_QA_train.json:{second}", "nqa-7")]
    refused = run_script("convert_chatqa2.py", chatqa2_array, out, "--skip-bad")
    assert refused.returncode == 1
    assert refused.stderr == f"convert_chatqa2.py: error: {out}: already exists; pass --force to replace it\n"
    failed = run_script("convert_chatqa2.py", chatqa2_array, out, "--force")
    assert failed.returncode == 1
    third = element_lines(chatqa2_array)[2]
    assert f"{chatqa2_array}:{third}: $.answer: is empty" in failed.stderr
    assert read_jsonl(out)[0]["messages"][0] == system("Be exact.")  # the earlier OUT, untouched


@pytest.mark.parametrize("script, words", [
    ("convert_chatqa2.py", ['"sub-paragraphs"', '"question"', '"messages"', "--document", "--system",
                            "--split-turns", "<|begin_of_text|>"]),
    ("convert_longalign.py", ['"messages"', "long.jsonl", '"length"']),
])
def test_help_explains_layouts_and_output(script, words):
    result = run_script(script, "--help")
    assert result.returncode == 0
    for word in [*words, "IN", "OUT", "--force", "--skip-bad", "--limit", "output (one conversation per line",
                 '"role": "system"|"user"|"assistant"', "pip install pyarrow"]:
        assert word in result.stdout, word


# ----------------------------------------------------------------------------- parquet


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    shard = tmp_path / "train-00000-of-00001.parquet"
    shard.write_bytes(b"PAR1")
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(shard, tmp_path / "sft.jsonl")
    assert str(error.value).startswith("reading .parquet files needs the pyarrow package, which is not installed")
    assert "python -m pip install pyarrow" in str(error.value)
    assert names_in(tmp_path) == ["train-00000-of-00001.parquet"]


@pytest.fixture()
def parquet():
    return pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (requirements.txt does not pin it)")


def write_parquet(parquet_module, path, records):
    import pyarrow
    parquet_module.write_table(pyarrow.Table.from_pylist(records), path)
    return path


def test_longalign_parquet_shard(parquet, tmp_path):
    shard = write_parquet(parquet, tmp_path / "train-00000-of-00001.parquet",
                          [LA_PAPER, LA_MULTI_TURN_UNICODE | {"id": "7"}, LA_EMPTY_ANSWER])
    out = tmp_path / "sft.jsonl"
    with pytest.raises(ConversionError) as error:
        convert_longalign.convert(shard, out)
    assert str(error.value) == (f"{shard}:row 3: $.messages[1].content: is empty "
                                "(skip such records with --skip-bad)")
    summary = convert_longalign.convert(shard, out, skip_bad=True)
    assert read_jsonl(out) == [longalign_output(LA_PAPER, "train-00000-of-00001.parquet:row 1"),
                               longalign_output(LA_MULTI_TURN_UNICODE | {"id": "7"},
                                                "train-00000-of-00001.parquet:row 2")]
    assert dict(summary.skipped) == {"empty content": 1}


def test_chatqa2_parquet_shard(parquet, tmp_path):
    narrative = CQ_NARRATIVE
    long_sft = CQ_LONG_SFT | {"answer": [CQ_LONG_SFT["answer"]]}  # one parquet column, one type
    shard = write_parquet(parquet, tmp_path / "0000.parquet", [long_sft, narrative])
    convert_chatqa2.convert(shard, tmp_path / "sft.jsonl")
    assert read_jsonl(tmp_path / "sft.jsonl") == [
        chatqa2_output(CQ_LONG_SFT_MESSAGES, "0000.parquet:row 1", "ls-1"),
        chatqa2_output(CQ_NARRATIVE_MESSAGES, "0000.parquet:row 2", "nqa-7")]
