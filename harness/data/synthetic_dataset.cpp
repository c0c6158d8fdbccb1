#include "harness/data/synthetic_dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "common/errors.h"
#include "harness/data/deterministic_rng.h"
#include "harness/data/retrieval_task.h"

namespace sb {
namespace {

RetrievalTaskOptions retrieval_options(const SyntheticDataSection& c) {
  return RetrievalTaskOptions{c.vocab_size, c.key_tokens, c.answer_tokens};
}

}  // namespace

int64_t synthetic_min_length(const SyntheticDataSection& c) {
  switch (c.task) {
    case SyntheticTask::kRetrieval: return retrieval_min_length(retrieval_options(c));
    case SyntheticTask::kCopy: return c.lag + 1;
    case SyntheticTask::kArithmetic: break;
  }
  return c.prompt_tokens + 1;
}

std::vector<LengthComponent> synthetic_length_components(const SyntheticDataSection& c) {
  if (c.lengths == LengthSource::kFile) return {};
  const std::vector<LengthComponent> base =
      c.lengths == LengthSource::kMixture ? c.length_mixture : length_profile(c.length_profile);
  return scale_length_components(base, c.length_scale, synthetic_min_length(c));
}

std::vector<int64_t> synthetic_file_lengths(const SyntheticDataSection& c) {
  std::ifstream in(c.length_file);
  if (!in) {
    throw ConfigError(c.length_file, "", "cannot be opened",
                      "check data.synthetic.length_file (one integer length per line)");
  }
  std::vector<int64_t> lengths;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(line, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || line.find_first_not_of(" \t\r", used) != std::string::npos || value < 1) {
      throw ConfigError(c.length_file + ":" + std::to_string(number), "",
                        "\"" + line + "\" is not a positive integer length",
                        "write one token count per line");
    }
    lengths.push_back(std::max(synthetic_min_length(c),
                               static_cast<int64_t>(std::llround(static_cast<double>(value) * c.length_scale))));
  }
  if (lengths.empty()) {
    throw ConfigError(c.length_file, "", "holds no lengths", "write one token count per line");
  }
  return lengths;
}

int64_t synthetic_longest_length(const SyntheticDataSection& c) {
  int64_t longest = 0;
  if (c.lengths == LengthSource::kFile) {
    for (int64_t l : synthetic_file_lengths(c)) longest = std::max(longest, l);
  } else {
    for (const LengthComponent& comp : synthetic_length_components(c)) longest = std::max(longest, comp.max_tokens);
  }
  return longest;
}

SyntheticDataset::SyntheticDataset(SyntheticDataSection config, int64_t seed)
    : config_(std::move(config)), seed_(seed) {
  if (config_.lengths == LengthSource::kFile) {
    file_lengths_ = synthetic_file_lengths(config_);
  } else {
    components_ = synthetic_length_components(config_);
    if (components_.empty()) throw std::invalid_argument("SyntheticDataset: no length components");
    for (const auto& c : components_) total_weight_ += c.weight;
  }
}

int64_t SyntheticDataset::draw_length(DeterministicRng& rng) const {
  if (!file_lengths_.empty()) {
    return file_lengths_[static_cast<size_t>(rng.uniform_below(file_lengths_.size()))];
  }
  // Pick a mixture component by weight, then a length uniformly inside it.
  double u = rng.uniform_unit() * total_weight_;
  const LengthComponent* chosen = &components_.back();
  for (const auto& c : components_) {
    if (u < c.weight) {
      chosen = &c;
      break;
    }
    u -= c.weight;
  }
  return rng.uniform_int(chosen->min_tokens, chosen->max_tokens);
}

DeterministicRng SyntheticDataset::stream(int64_t id) const {
  if (id < 0) throw std::invalid_argument("SyntheticDataset: negative sample id");
  return DeterministicRng::for_stream(static_cast<uint64_t>(seed_), static_cast<uint64_t>(id));
}

int64_t SyntheticDataset::prompt_tokens(int64_t length) const {
  switch (config_.task) {
    case SyntheticTask::kRetrieval: return retrieval_prompt_tokens(retrieval_options(config_), length);
    case SyntheticTask::kCopy: return config_.lag;
    case SyntheticTask::kArithmetic: break;
  }
  return config_.prompt_tokens;
}

SampleShape SyntheticDataset::shape(int64_t id) const {
  DeterministicRng rng = stream(id);
  const int64_t length = draw_length(rng);
  return SampleShape{length, loss_tokens_after_prompt(length, prompt_tokens(length))};
}

Sample SyntheticDataset::sample(int64_t id) const {
  DeterministicRng rng = stream(id);
  Sample s;
  s.id = id;
  const int64_t length = draw_length(rng);
  s.prompt_tokens = prompt_tokens(length);
  if (config_.task == SyntheticTask::kRetrieval) {
    s.tokens = make_retrieval_sample(retrieval_options(config_), length, rng).tokens;
    return s;
  }
  if (config_.task == SyntheticTask::kCopy) {
    s.tokens.resize(static_cast<size_t>(length));
    for (int64_t t = 0; t < length; ++t) {
      s.tokens[t] = t < config_.lag ? rng.uniform_int(0, config_.vocab_size - 1) : s.tokens[t - config_.lag];
    }
    return s;
  }
  const int64_t vocab = config_.vocab_size;
  const int64_t start = rng.uniform_int(0, vocab - 1);
  const int64_t stride = rng.uniform_int(1, config_.max_stride);
  s.tokens.resize(static_cast<size_t>(length));
  for (int64_t t = 0; t < length; ++t) s.tokens[t] = (start + t * stride) % vocab;
  return s;
}

int64_t SyntheticDataset::max_length() const {
  if (!file_lengths_.empty()) return *std::max_element(file_lengths_.begin(), file_lengths_.end());
  int64_t longest = 0;
  for (const auto& c : components_) longest = std::max(longest, c.max_tokens);
  return longest;
}

std::string SyntheticDataset::describe() const {
  return "synthetic " + synthetic_task_options().name_of(config_.task) + " task, lengths " + config_.lengths_name() +
         (config_.length_scale != 1.0 ? " x " + std::to_string(config_.length_scale) : "") +
         ", vocabulary " + std::to_string(config_.vocab_size);
}

}  // namespace sb
