#include "harness/data/tokenized_sft_dataset.h"

#include <sys/stat.h>

#include <cstring>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/data/conversation_limit.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kFormat = "sparsebalance-sft-cache-1";
const char* const kBuildHint =
    "build it: python scripts/data/tokenize_sft.py --data DATA.jsonl --tokenizer-dir MODEL_DIR --out CACHE_DIR";

template <typename T>
T read_le(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));  // the cache is little-endian, as are the hosts this runs on
  return value;
}

// Whether `path` still has the size and modification time the cache recorded for it; a
// file that is gone is not checked (the cache holds everything training needs).
bool unchanged(const fs::path& path, const json& recorded) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return true;
  const int64_t mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  return recorded.value("bytes", int64_t{-1}) == static_cast<int64_t>(info.st_size) &&
         recorded.value("mtime_ns", int64_t{-1}) == mtime_ns;
}

MappedFile map_part(const fs::path& dir, const char* name, size_t expected_bytes) {
  MappedFile file = [&] {
    try {
      return MappedFile::open(dir / name);
    } catch (const std::runtime_error& e) {
      throw ConfigError(dir.string(), "", e.what(), std::string("rebuild the cache; ") + kBuildHint);
    }
  }();
  if (file.size() != expected_bytes) {
    throw ConfigError((dir / name).string(), "",
                      "has " + std::to_string(file.size()) + " bytes, meta.json's counts need " +
                          std::to_string(expected_bytes),
                      std::string("the cache is damaged; rebuild it with --force (") + kBuildHint + ")");
  }
  return file;
}

}  // namespace

json read_tokenized_cache_meta(const fs::path& dir) {
  const fs::path meta = dir / "meta.json";
  if (!fs::exists(meta)) {
    throw ConfigError(dir.string(), "", "is not a tokenised SFT cache (no meta.json)", kBuildHint);
  }
  json j;
  try {
    j = json::parse(read_file(meta));
  } catch (const std::exception& e) {
    throw ConfigError(meta.string(), "", std::string("is not readable JSON: ") + e.what(),
                      std::string("rebuild the cache with --force (") + kBuildHint + ")");
  }
  if (!j.is_object() || j.value("format", "") != kFormat) {
    throw ConfigError(meta.string(), "$.format", "is not \"" + std::string(kFormat) + "\"",
                      std::string("rebuild the cache with this version's script (") + kBuildHint + ")");
  }
  return j;
}

TokenizedSftDataset::TokenizedSftDataset(const TokenizedDataSection& config, int64_t seed,
                                         const DatasetLimits& limits)
    : config_(config), order_(seed, config.shuffle) {
  const fs::path dir(config_.path);
  const json meta = read_tokenized_cache_meta(dir);
  const std::string meta_file = (dir / "meta.json").string();
  const std::string rebuild = "rebuild it: " + meta.value("command", std::string(kBuildHint));
  try {
    data_path_ = meta.at("data").at("path").get<std::string>();
    tokenizer_dir_ = meta.at("tokenizer").at("dir").get<std::string>();
    template_source_ = meta.at("template").value("source", "");
    if (!unchanged(data_path_, meta.at("data"))) {
      throw ConfigError(config_.path, "", "is stale: " + data_path_ + " changed since the cache was built", rebuild);
    }
    for (const auto& [name, recorded] : meta.at("tokenizer").at("files").items()) {
      if (!unchanged(tokenizer_dir_ / name, recorded)) {
        throw ConfigError(config_.path, "",
                          "is stale: " + (tokenizer_dir_ / name).string() + " changed since the cache was built",
                          rebuild);
      }
    }
    // Files the script looked for and did not find (caches written before this record
    // have none): one that appeared since may change the rendering.
    for (const json& name : meta.at("tokenizer").value("absent", json::array())) {
      const fs::path appeared = tokenizer_dir_ / name.get<std::string>();
      if (fs::exists(appeared)) {
        throw ConfigError(config_.path, "", "is stale: " + appeared.string() + " appeared since the cache was built",
                          rebuild);
      }
    }
  } catch (const json::exception& e) {
    throw ConfigError(meta_file, "", std::string("lacks a field: ") + e.what(), rebuild);
  }
  const int64_t vocab = meta.value("vocab_size", int64_t{-1});
  if (vocab < 1) throw ConfigError(meta_file, "$.vocab_size", "is missing or not positive", rebuild);
  if (vocab > limits.vocab_size) {
    throw ConfigError(meta_file, "$.vocab_size",
                      "the cache's tokenizer has " + std::to_string(vocab) + " tokens but the model's vocabulary is " +
                          std::to_string(limits.vocab_size),
                      "build the cache with the model's own tokenizer folder");
  }
  const int64_t count = meta.value("conversations", int64_t{-1});
  const int64_t total = meta.value("tokens", int64_t{-1});
  if (count < 0 || total < 0) throw ConfigError(meta_file, "$.conversations", "is missing or negative", rebuild);
  tokens_ = map_part(dir, "tokens.u32", static_cast<size_t>(total) * 4);
  targets_ = map_part(dir, "targets.u8", static_cast<size_t>(total));
  offsets_ = map_part(dir, "offsets.i64", static_cast<size_t>(count + 1) * 8);
  const MappedFile lines = map_part(dir, "lines.i64", static_cast<size_t>(count) * 8);

  const ConversationLimit limit = ConversationLimit::of(limits, "data.tokenized.too_long");
  int64_t previous = read_le<int64_t>(offsets_.data());
  if (previous != 0) throw ConfigError((dir / "offsets.i64").string(), "", "does not start at 0", rebuild);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t begin = previous;
    const int64_t end = read_le<int64_t>(offsets_.data() + 8 * (i + 1));
    if (end < begin || end > total) {
      throw ConfigError((dir / "offsets.i64").string(), "", "is not ascending within the token count", rebuild);
    }
    previous = end;
    const std::string where = data_path_ + ":" + std::to_string(read_le<int64_t>(lines.data() + 8 * i));
    int64_t length = end - begin;
    const LimitVerdict verdict = apply_conversation_limit(limit, config_.too_long, length, where);
    if (verdict == LimitVerdict::kSkip) {
      ++skipped_;
      continue;
    }
    if (verdict == LimitVerdict::kTruncate) {
      length = limit.max_tokens;
      ++truncated_;
    }
    bool trains = false;  // token 0 is never predicted
    for (int64_t t = 1; t < length && !trains; ++t) trains = targets_.data()[begin + t] != 0;
    if (!trains) {
      ++skipped_;  // nothing to learn from (possible after truncation)
      continue;
    }
    kept_.push_back({i, length, where});
    max_length_ = std::max(max_length_, length);
  }
  if (previous != total) throw ConfigError((dir / "offsets.i64").string(), "", "does not end at the token count", rebuild);
  if (kept_.empty()) throw ConfigError(config_.path, "", "no conversation fits " + limit.what, limit.fix);
  vocab_size_ = vocab;
}

Sample TokenizedSftDataset::sample(int64_t id) const {
  if (id < 0) throw std::invalid_argument("TokenizedSftDataset: negative sample id");
  const Kept& kept = kept_[static_cast<size_t>(order_.conversation_of(id, size()))];
  const int64_t begin = read_le<int64_t>(offsets_.data() + 8 * kept.conversation);
  Sample s;
  s.id = id;
  s.tokens.resize(static_cast<size_t>(kept.length));
  s.target_mask.resize(static_cast<size_t>(kept.length));
  for (int64_t t = 0; t < kept.length; ++t) {
    const uint32_t token = read_le<uint32_t>(tokens_.data() + 4 * (begin + t));
    // Checked as drawn, not all at start-up: opening a cache of a billion tokens would
    // otherwise read every page of tokens.u32 on every rank.
    if (token >= static_cast<uint64_t>(vocab_size_)) {
      throw ConfigError(kept.where, "", "holds token id " + std::to_string(token) + ", beyond the cache's vocabulary of " +
                                            std::to_string(vocab_size_),
                        std::string("the cache is damaged; rebuild it with --force (") + kBuildHint + ")");
    }
    s.tokens[static_cast<size_t>(t)] = token;
    s.target_mask[static_cast<size_t>(t)] = targets_.data()[begin + t] != 0 ? 1 : 0;
  }
  return s;
}

SampleShape TokenizedSftDataset::shape(int64_t id) const {
  if (id < 0) throw std::invalid_argument("TokenizedSftDataset: negative sample id");
  const Kept& kept = kept_[static_cast<size_t>(order_.conversation_of(id, size()))];
  const int64_t begin = read_le<int64_t>(offsets_.data() + 8 * kept.conversation);
  return SampleShape{kept.length, loss_tokens_in_mask(targets_.data() + begin, kept.length)};
}

std::string TokenizedSftDataset::describe() const {
  return "tokenized SFT cache " + config_.path + " (" + data_path_ + ", template from " + template_source_ +
         "): " + std::to_string(size()) + " conversations (" + std::to_string(skipped_) + " skipped, " +
         std::to_string(truncated_) + " truncated), longest " + std::to_string(max_length_) + " tokens";
}

}  // namespace sb
