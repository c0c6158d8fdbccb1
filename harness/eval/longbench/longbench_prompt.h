#pragma once
// Prompts as upstream LongBench builds them (pred.py of v1, and of v2):
//   template      dataset2prompt.json's per-task template, filled with Python's
//                 str.format(**item) ({context}, {input}; "{{" and "}}" escape braces);
//                 v2: v2_0shot.txt with $DOC$, $Q$, $C_A$..$C_D$ replaced one after the
//                 other (str.replace), each value .strip()ped
//   truncation    v1: ids = tokenize(prompt); if len(ids) > max_length, half =
//                 int(max_length / 2) and the prompt becomes decode(ids[:half]) +
//                 decode(ids[-half:]) (two decodes, skipping special tokens, joined as
//                 strings); it is tokenized again after the chat template.
//                 v2: ids[:L//2] + ids[-L//2:] (Python's floor division: the tail gets
//                 the extra token when L is odd), then ONE decode.
//   chat          ChatML (<|im_start|>role\n...<|im_end|>\n, then <|im_start|>assistant\n)
//                 with an optional system message; v1 skips it for trec, triviaqa,
//                 samsum, lsht, lcc and repobench-p.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "models/tokenizer/tokenizer.h"

namespace sb {

// The system prompt Qwen2.5-Instruct's own chat template inserts when the conversation
// has none (what transformers' apply_chat_template and vLLM give such a model).
inline constexpr const char* kQwenDefaultSystemPrompt =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

struct ChatStyle {
  bool chat = true;  // false: the prompt goes to the model as plain text
  std::optional<std::string> system_prompt = std::string(kQwenDefaultSystemPrompt);  // none: no system block
};

// "<|im_start|>system\n{system}<|im_end|>\n"? "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n",
// or the prompt itself when !style.chat.
std::string apply_chat_style(const std::string& prompt, const ChatStyle& style);

struct LongBenchConfig {
  std::map<std::string, std::string> prompts;       // dataset2prompt.json
  std::map<std::string, int64_t> max_new_tokens;    // dataset2maxlen.json
  std::optional<std::string> v2_template;           // v2_0shot.txt, when present
};

// Reads dataset2prompt.json and dataset2maxlen.json (required) and v2_0shot.txt
// (optional) from dir. ConfigError naming the file and JSON path when malformed.
LongBenchConfig load_longbench_config(const std::filesystem::path& dir);

// Python's template.format(**item) for templates with plain {name} fields. ConfigError
// naming `where` for a missing field, a non-string value, or an unsupported field form.
std::string python_format_fields(const std::string& tmpl, const nlohmann::ordered_json& item,
                                 const std::string& where);

// The v1 and v2 middle truncations described above; the prompt unchanged when it fits.
std::string truncate_middle_v1(const Tokenizer& tokenizer, const std::string& prompt, int64_t max_length);
std::string truncate_middle_v2(const Tokenizer& tokenizer, const std::string& prompt, int64_t max_length);

// v2's template filled from an item (context, question, choice_A..choice_D).
std::string longbench_v2_prompt(const std::string& tmpl, const nlohmann::ordered_json& item, const std::string& where);

}  // namespace sb
