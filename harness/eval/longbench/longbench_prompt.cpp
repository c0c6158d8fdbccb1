#include "harness/eval/longbench/longbench_prompt.h"

#include <fstream>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/python_text.h"
#include "models/tokenizer/chat_template.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json_object(const fs::path& path) {
  if (!fs::exists(path)) {
    throw ConfigError(path.string(), "", "is missing",
                      "pass --config with upstream's config folder (dataset2prompt.json, dataset2maxlen.json)");
  }
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path));
    if (!j.is_object()) throw ConfigError(path.string(), "$", "expected a JSON object");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path.string(), "", std::string("invalid JSON: ") + e.what());
  }
}

// ids[-k:] with Python's slicing: k == 0 gives the whole list.
std::vector<int64_t> python_tail(const std::vector<int64_t>& ids, size_t k) {
  if (k == 0 || k >= ids.size()) return ids;
  return std::vector<int64_t>(ids.end() - static_cast<std::ptrdiff_t>(k), ids.end());
}

std::vector<int64_t> python_head(const std::vector<int64_t>& ids, size_t k) {
  return std::vector<int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(k, ids.size())));
}

// str.replace(old, new): every non-overlapping occurrence, left to right.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  size_t at = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

}  // namespace

std::string apply_chat_style(const std::string& prompt, const ChatStyle& style) {
  if (!style.chat) return prompt;
  std::vector<ChatMessage> messages;
  if (style.system_prompt) messages.push_back({"system", *style.system_prompt});
  messages.push_back({"user", prompt});
  return render_chatml(messages) + "<|im_start|>assistant\n";
}

LongBenchConfig load_longbench_config(const fs::path& dir) {
  LongBenchConfig config;
  const fs::path prompts = dir / "dataset2prompt.json";
  const nlohmann::json prompt_json = read_json_object(prompts);
  for (const auto& [task, value] : prompt_json.items()) {
    if (!value.is_string()) throw ConfigError(prompts.string(), "$." + task, "expected a string template");
    config.prompts[task] = value.get<std::string>();
  }
  const fs::path maxlen = dir / "dataset2maxlen.json";
  const nlohmann::json maxlen_json = read_json_object(maxlen);
  for (const auto& [task, value] : maxlen_json.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 1) {
      throw ConfigError(maxlen.string(), "$." + task, "expected a positive integer (max new tokens)");
    }
    config.max_new_tokens[task] = value.get<int64_t>();
  }
  if (fs::exists(dir / "v2_0shot.txt")) config.v2_template = read_file(dir / "v2_0shot.txt");
  return config;
}

std::string python_format_fields(const std::string& tmpl, const nlohmann::ordered_json& item,
                                 const std::string& where) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (c == '}') {
      if (i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw ConfigError(where, "", "the prompt template has a single '}'", "write }} for a literal brace");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = tmpl.find('}', i);
    if (close == std::string::npos) throw ConfigError(where, "", "the prompt template has an unclosed '{'");
    const std::string field = tmpl.substr(i + 1, close - i - 1);
    if (field.empty() || field.find_first_of(":!.[{") != std::string::npos) {
      throw ConfigError(where, "", "unsupported template field {" + field + "}", "use plain {name} fields");
    }
    if (!item.contains(field)) throw ConfigError(where, "$." + field, "missing (the prompt template uses it)");
    const auto& value = item[field];
    if (value.is_string()) {
      out += value.get<std::string>();
    } else if (value.is_number_integer()) {
      out += value.dump();
    } else {
      throw ConfigError(where, "$." + field, "expected a string for the prompt template");
    }
    i = close;
  }
  return out;
}

std::string truncate_middle_v1(const Tokenizer& tokenizer, const std::string& prompt, int64_t max_length) {
  const std::vector<int64_t> ids = tokenizer.encode(prompt);
  if (static_cast<int64_t>(ids.size()) <= max_length) return prompt;
  const auto half = static_cast<size_t>(max_length / 2);
  return tokenizer.decode(python_head(ids, half), /*skip_special=*/true) +
         tokenizer.decode(python_tail(ids, half), /*skip_special=*/true);
}

std::string truncate_middle_v2(const Tokenizer& tokenizer, const std::string& prompt, int64_t max_length) {
  const std::vector<int64_t> ids = tokenizer.encode(prompt);
  if (static_cast<int64_t>(ids.size()) <= max_length) return prompt;
  // ids[:L//2] + ids[-L//2:]: -L//2 is floor(-L/2), so the tail keeps ceil(L/2) ids.
  std::vector<int64_t> kept = python_head(ids, static_cast<size_t>(max_length / 2));
  const std::vector<int64_t> tail = python_tail(ids, static_cast<size_t>((max_length + 1) / 2));
  kept.insert(kept.end(), tail.begin(), tail.end());
  return tokenizer.decode(kept, /*skip_special=*/true);
}

std::string longbench_v2_prompt(const std::string& tmpl, const nlohmann::ordered_json& item, const std::string& where) {
  auto field = [&](const char* key) {
    if (!item.contains(key) || !item[key].is_string()) throw ConfigError(where, std::string("$.") + key, "expected a string");
    return u32_to_utf8(python_strip(utf8_to_u32(item[key].get<std::string>(), where)));
  };
  std::string prompt = replace_all(tmpl, "$DOC$", field("context"));
  prompt = replace_all(prompt, "$Q$", field("question"));
  prompt = replace_all(prompt, "$C_A$", field("choice_A"));
  prompt = replace_all(prompt, "$C_B$", field("choice_B"));
  prompt = replace_all(prompt, "$C_C$", field("choice_C"));
  return replace_all(prompt, "$C_D$", field("choice_D"));
}

}  // namespace sb
