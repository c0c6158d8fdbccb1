#include "harness/eval/niah.h"

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/progress_eta.h"
#include "harness/data/deterministic_rng.h"
#include "harness/eval/longbench/python_json.h"
#include "harness/eval/resumable_jsonl.h"
#include "models/qwen2/qwen2_generate.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr const char* kInstruction =
    "There is an important number hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about it.\n\n";
constexpr const char* kQuestion =
    "\n\nWhat is the special magic number mentioned in the text above? Answer with the number only.";
constexpr const char* kNeedlePrefix = " The special magic number is: ";
constexpr const char* kBodyMarker = "\x01NIAH-CONTEXT\x01";

template <size_t N>
const char* pick(DeterministicRng& rng, const char* const (&words)[N]) {
  return words[rng.uniform_below(N)];
}

// Prompt ids around the context: the chat style's text before and after the user's body.
std::pair<std::vector<int64_t>, std::vector<int64_t>> prompt_frame(const Tokenizer& tokenizer, const ChatStyle& chat) {
  const std::string body = std::string(kInstruction) + kBodyMarker + kQuestion + (chat.chat ? "" : "\nAnswer:");
  const std::string framed = apply_chat_style(body, chat);
  const size_t at = framed.find(kBodyMarker);
  return {tokenizer.encode(framed.substr(0, at)), tokenizer.encode(framed.substr(at + std::string(kBodyMarker).size()))};
}

std::vector<int64_t> haystack_ids(const Tokenizer& tokenizer, const NiahOptions& options, int64_t needed) {
  std::string unit;
  if (options.haystack == "synthetic") {
    unit = niah_synthetic_haystack(options.seed, std::max<int64_t>(64, needed / 6));
  } else {
    if (!fs::is_regular_file(options.haystack)) {
      throw ConfigError(options.haystack, "", "is not a file", "pass a text file as --haystack, or synthetic");
    }
    unit = read_file(options.haystack);
  }
  std::vector<int64_t> one = tokenizer.encode(unit);
  if (one.empty()) throw ConfigError(options.haystack, "", "has no text");
  std::string text = unit;
  int64_t tokens = static_cast<int64_t>(one.size());
  while (tokens < needed) {  // repeat the text until it is long enough, then tokenize once
    text += "\n\n" + unit;
    tokens += static_cast<int64_t>(one.size()) + 1;
  }
  return tokens == static_cast<int64_t>(one.size()) ? one : tokenizer.encode(text);
}

std::string format_depth(double depth) {
  std::string s = python_float_repr(depth);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

}  // namespace

std::string niah_synthetic_haystack(uint64_t seed, int64_t sentences) {
  static const char* const kDet[] = {"The", "A", "Every", "That"};
  static const char* const kAdj[] = {"old", "quiet", "small", "busy", "bright", "patient", "distant", "careful"};
  static const char* const kNoun[] = {"farmer", "river", "city", "teacher", "garden", "library", "painter", "sailor",
                                      "village", "engineer"};
  static const char* const kVerb[] = {"walked past", "looked at", "painted", "remembered", "visited", "described",
                                      "waited near", "talked about"};
  static const char* const kObj[] = {"the bridge", "a market", "the field", "the harbor", "a forest", "the station",
                                     "an orchard", "the museum"};
  static const char* const kWhen[] = {"in the morning", "after the rain", "before winter", "at noon",
                                      "late in the evening", "during the festival", "on a cold day", "every spring"};
  DeterministicRng rng = DeterministicRng::for_stream(seed, 0x4e494148);  // "NIAH"
  std::string text;
  for (int64_t i = 0; i < sentences; ++i) {
    if (i > 0) text += (i % 8 == 0) ? "\n\n" : " ";
    text += std::string(pick(rng, kDet)) + " " + pick(rng, kAdj) + " " + pick(rng, kNoun) + " " + pick(rng, kVerb) +
            " " + pick(rng, kObj) + " " + pick(rng, kWhen) + ".";
  }
  return text;
}

double niah_score(const std::string& answer, const std::string& value) {
  size_t i = 0;
  while (i < answer.size()) {
    if (answer[i] < '0' || answer[i] > '9') {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < answer.size() && answer[i] >= '0' && answer[i] <= '9') ++i;
    if (answer.compare(start, i - start, value) == 0 && i - start == value.size()) return 1.0;
  }
  return 0.0;
}

std::vector<int64_t> niah_context_ids(const std::vector<int64_t>& haystack, const std::vector<int64_t>& needle,
                                      const std::vector<bool>& ends_sentence, int64_t length, double depth,
                                      int64_t* position) {
  const auto n = static_cast<int64_t>(needle.size());
  if (length <= n || static_cast<int64_t>(haystack.size()) < length - n) {
    throw std::invalid_argument("niah: a context of " + std::to_string(length) + " tokens cannot hold the needle");
  }
  const int64_t hay = length - n;
  auto q = static_cast<int64_t>(std::llround(depth / 100.0 * static_cast<double>(hay)));
  q = std::clamp<int64_t>(q, 0, hay);
  while (q > 0 && !ends_sentence[static_cast<size_t>(q - 1)]) --q;
  std::vector<int64_t> ids(haystack.begin(), haystack.begin() + q);
  ids.insert(ids.end(), needle.begin(), needle.end());
  ids.insert(ids.end(), haystack.begin() + q, haystack.begin() + hay);
  if (position != nullptr) *position = q;
  return ids;
}

ordered_json run_niah(ModelFolder& model, const NiahOptions& options, std::ostream& progress) {
  if (!model.tokenizer) throw ConfigError(model.dir.string(), "", "has no tokenizer.json", "needle-in-a-haystack needs it");
  if (options.lengths.empty() || options.depths.empty() || options.samples < 1) {
    throw ConfigError("--lengths", "", "needs at least one length, one depth and one sample");
  }
  for (double d : options.depths) {
    if (!(d >= 0 && d <= 100)) throw ConfigError("--depths", "", "depths are percentages in [0, 100]");
  }
  const Tokenizer& tok = *model.tokenizer;
  const auto [head, tail] = prompt_frame(tok, options.chat);
  const int64_t longest = *std::max_element(options.lengths.begin(), options.lengths.end());
  const int64_t positions = qwen2_position_limit(model.model->config());
  if (static_cast<int64_t>(head.size() + tail.size()) + longest + options.max_new_tokens > positions) {
    throw ConfigError("--lengths", "", "a context of " + std::to_string(longest) + " tokens plus the prompt and " +
                                           std::to_string(options.max_new_tokens) + " new tokens exceeds the model's " +
                                           std::to_string(positions) + " positions", "use shorter lengths");
  }
  const std::vector<int64_t> haystack = haystack_ids(tok, options, longest);
  std::vector<bool> ends_sentence(haystack.size());
  for (size_t i = 0; i < haystack.size(); ++i) {
    std::string piece = tok.decode({haystack[i]});
    while (!piece.empty() && (piece.back() == ' ' || piece.back() == '\n')) piece.pop_back();
    ends_sentence[i] = !piece.empty() && piece.back() == '.';
  }
  ResumableJsonl cells(options.out_dir / "niah_cells.jsonl");
  GreedyOptions generation;
  generation.max_new_tokens = options.max_new_tokens;
  generation.stop_ids = model.generation_eos_token_ids;
  generation.repetition_penalty = options.repetition_penalty;
  std::vector<std::vector<double>> sums(options.depths.size(), std::vector<double>(options.lengths.size(), 0.0));
  size_t index = 0;
  const auto cell_count = static_cast<int64_t>(options.lengths.size() * options.depths.size()) * options.samples;
  const ProgressEta eta(cell_count, std::min<int64_t>(cell_count, static_cast<int64_t>(cells.existing().size())));
  for (size_t li = 0; li < options.lengths.size(); ++li) {
    for (size_t di = 0; di < options.depths.size(); ++di) {
      for (int64_t s = 0; s < options.samples; ++s, ++index) {
        DeterministicRng rng = DeterministicRng::for_stream(options.seed, (li * 1000 + di) * 1000 + static_cast<uint64_t>(s));
        const std::string value = std::to_string(1000000 + rng.uniform_below(9000000));
        ordered_json cell = ordered_json::object();
        if (index < cells.existing().size()) {
          cell = cells.existing()[index];
          if (cell.value("length", int64_t{-1}) != options.lengths[li] || cell.value("depth", -1.0) != options.depths[di] ||
              cell.value("value", "") != value) {
            throw ConfigError(cells.path().string() + ":" + std::to_string(index + 1), "",
                              "was written with other settings", "use a fresh --out folder");
          }
        } else {
          int64_t position = 0;
          std::vector<int64_t> ids = head;
          const std::vector<int64_t> context = niah_context_ids(haystack, tok.encode(kNeedlePrefix + value + "."),
                                                                ends_sentence, options.lengths[li], options.depths[di], &position);
          ids.insert(ids.end(), context.begin(), context.end());
          ids.insert(ids.end(), tail.begin(), tail.end());
          const std::string answer = tok.decode(qwen2_generate_greedy(model.model, ids, generation), /*skip_special=*/true);
          cell["length"] = options.lengths[li];
          cell["depth"] = options.depths[di];
          cell["sample"] = s;
          cell["value"] = value;
          cell["needle_position"] = position;
          cell["prompt_tokens"] = ids.size();
          cell["answer"] = answer;
          cell["score"] = niah_score(answer, value);
          cells.append(cell);
          progress << "niah: length " << options.lengths[li] << ", depth " << format_depth(options.depths[di])
                   << ", sample " << s << ": " << cell["score"].get<double>() << " ("
                   << eta.line(static_cast<int64_t>(index + 1)) << ")\n";
        }
        sums[di][li] += cell["score"].get<double>();
      }
    }
  }
  ordered_json scores = ordered_json::array();
  double total = 0;
  for (const auto& row : sums) {
    ordered_json r = ordered_json::array();
    for (double v : row) {
      r.push_back(v / static_cast<double>(options.samples));
      total += v;
    }
    scores.push_back(r);
  }
  ordered_json grid = ordered_json::object();
  grid["lengths"] = options.lengths;
  grid["depths"] = options.depths;
  grid["scores"] = scores;  // [depth][length], mean over samples
  grid["mean"] = total / static_cast<double>(index);
  grid["samples"] = options.samples;
  grid["haystack"] = options.haystack;
  grid["seed"] = options.seed;
  grid["max_new_tokens"] = options.max_new_tokens;
  grid["needle"] = std::string(kNeedlePrefix).substr(1) + "<7 digits>.";
  grid["question"] = std::string(kQuestion).substr(2);
  grid["scoring"] = "1 if the needle's number appears in the answer as a whole run of digits, else 0";
  write_file_atomic(options.out_dir / "niah.json", python_json_dumps(grid, 2) + "\n");
  return grid;
}

}  // namespace sb
