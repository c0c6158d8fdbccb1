#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"
#include "harness/apps/commands.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "models/tokenizer/tokenizer.h"

namespace sb::cli {
namespace {

struct TokenizeFlags {
  std::string tokenizer;
  std::string text;
  std::string text_file;
  bool decode = false;
  std::string ids;
  std::string ids_file;
  std::string jsonl;
  bool skip_special = false;
};


// `where` names the input (a flag, a file, a file and line) in errors.
std::vector<int64_t> encode_input(const Tokenizer& tokenizer, const std::string& text,
                                  const std::string& where, const std::string& json_path = "") {
  try {
    return tokenizer.encode(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(where, json_path, e.what(), "pass UTF-8 text");
  }
}

std::string decode_input(const Tokenizer& tokenizer, const std::vector<int64_t>& ids,
                         bool skip_special, const std::string& where,
                         const std::string& json_path = "") {
  try {
    return tokenizer.decode(ids, skip_special);
  } catch (const std::out_of_range& e) {
    throw ConfigError(where, json_path, e.what(), "pass ids of this tokenizer");
  }
}

// "1,2,3" (spaces allowed around ids; "" is no ids).
std::vector<int64_t> parse_id_list(const std::string& list) {
  std::vector<int64_t> ids;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    const std::string id = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    size_t used = 0;
    int64_t value = -1;
    try {
      value = std::stoll(id, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (id.empty() || used != id.size()) {
      throw ConfigError("--ids", "", "\"" + id + "\" is not a token id",
                        "pass comma-separated integers, e.g. --ids 9707,11,1879");
    }
    ids.push_back(value);
  }
  return ids;
}

// {"ids": [...]} from a JSON document; `where` names it.
std::vector<int64_t> ids_from_json(const nlohmann::json& doc, const std::string& where) {
  if (!doc.is_object() || !doc.contains("ids") || !doc["ids"].is_array()) {
    throw ConfigError(where, "$.ids", "expected an object {\"ids\": [integers]}");
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i < doc["ids"].size(); ++i) {
    const nlohmann::json& id = doc["ids"][i];
    if (!id.is_number_integer()) {
      throw ConfigError(where, "$.ids[" + std::to_string(i) + "]",
                        "expected an integer, found " + id.dump());
    }
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

nlohmann::json parse_json(const std::string& content, const std::string& where) {
  try {
    return nlohmann::json::parse(content);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(where, "", std::string("not valid JSON: ") + e.what());
  }
}

// One JSON object per line: {"text": "..."} -> {"ids": [...]}, or with --decode
// {"ids": [...]} -> {"text": "..."}; the output has one line per non-blank input line.
void run_jsonl(const Tokenizer& tokenizer, const TokenizeFlags& flags) {
  for_each_jsonl_line(flags.jsonl, read_input_file(flags.jsonl, "check --jsonl"), [&](const std::string& line, const std::string& where) {
    const nlohmann::json doc = parse_json(line, where);
    if (flags.decode) {
      const std::string text =
          decode_input(tokenizer, ids_from_json(doc, where), flags.skip_special, where, "$.ids");
      std::cout << nlohmann::json{{"text", text}}.dump() << "\n";
    } else {
      if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string()) {
        throw ConfigError(where, "$.text", "expected an object {\"text\": \"...\"}");
      }
      const std::vector<int64_t> ids =
          encode_input(tokenizer, doc["text"].get<std::string>(), where, "$.text");
      std::cout << nlohmann::json{{"ids", ids}}.dump() << "\n";
    }
  });
}

}  // namespace

Command register_tokenize(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Encode text to token ids, or decode ids to text, with a tokenizer.json");
  sub->footer(
      "Encoding prints {\"ids\": [...]}; --decode prints {\"text\": \"...\"} (ill-formed UTF-8 "
      "in the decoded bytes becomes U+FFFD). --jsonl FILE handles one JSON object per line "
      "({\"text\": ...} or, with --decode, {\"ids\": [...]}) and prints one line for each.\n"
      "Supported: byte-level BPE as in Qwen2/Qwen2.5 and GPT-2 (see "
      "models/tokenizer/tokenizer_json.h); anything else in the file is an error naming its JSON "
      "path (exit 2).");
  sub->add_option("--tokenizer", flags->tokenizer, "tokenizer.json (HF tokenizers format)")
      ->required();
  CLI::Option* text = sub->add_option("--text", flags->text, "Text to encode");
  CLI::Option* text_file = sub->add_option("--text-file", flags->text_file,
                                           "File whose bytes (UTF-8) are the text to encode");
  CLI::Option* decode =
      sub->add_flag("--decode", flags->decode, "Decode ids instead of encoding text");
  CLI::Option* ids = sub->add_option("--ids", flags->ids, "Ids to decode, comma-separated: 1,2,3");
  CLI::Option* ids_file = sub->add_option("--ids-file", flags->ids_file,
                                          "JSON file {\"ids\": [...]} with the ids to decode");
  CLI::Option* jsonl =
      sub->add_option("--jsonl", flags->jsonl, "JSON Lines file: one input per line");
  CLI::Option* skip_special =
      sub->add_flag("--skip-special", flags->skip_special,
                    "With --decode: leave out special tokens (e.g. <|im_end|>)");
  text->excludes(text_file)->excludes(jsonl)->excludes(decode);
  text_file->excludes(jsonl)->excludes(decode);
  ids->needs(decode)->excludes(ids_file)->excludes(jsonl);
  ids_file->needs(decode)->excludes(jsonl);
  skip_special->needs(decode);

  return [flags, text, text_file, ids, ids_file, jsonl]() {
    const size_t inputs = flags->decode ? ids->count() + ids_file->count() + jsonl->count()
                                        : text->count() + text_file->count() + jsonl->count();
    if (inputs == 0) {
      throw ConfigError(flags->decode ? "--ids" : "--text", "", "no input given",
                        flags->decode ? "pass --ids, --ids-file or --jsonl"
                                      : "pass --text, --text-file or --jsonl");
    }
    const Tokenizer tokenizer = Tokenizer::from_file(flags->tokenizer);
    if (jsonl->count() > 0) {
      run_jsonl(tokenizer, *flags);
    } else if (flags->decode) {
      std::vector<int64_t> id_list;
      std::string where = "--ids";
      if (ids_file->count() > 0) {
        where = flags->ids_file;
        id_list = ids_from_json(parse_json(read_input_file(flags->ids_file, "check --ids-file"), where), where);
      } else {
        id_list = parse_id_list(flags->ids);
      }
      const std::string decoded = decode_input(tokenizer, id_list, flags->skip_special, where);
      std::cout << nlohmann::json{{"text", decoded}}.dump() << "\n";
    } else {
      const bool from_file = text_file->count() > 0;
      const std::string input = from_file ? read_input_file(flags->text_file, "check --text-file") : flags->text;
      const std::vector<int64_t> encoded =
          encode_input(tokenizer, input, from_file ? flags->text_file : "--text");
      std::cout << nlohmann::json{{"ids", encoded}}.dump() << "\n";
    }
    return 0;
  };
}

}  // namespace sb::cli
