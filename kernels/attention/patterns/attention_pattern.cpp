#include "kernels/attention/patterns/attention_pattern.h"

#include <stdexcept>

#include "kernels/attention/ring/ring_attention_backend.h"

namespace sb {

int64_t AttentionPattern::profile_block_size() const {
  for (const auto& [field, value] : profile_fields()) {
    if (field == "block_size") return value;
  }
  return 0;
}

std::string AttentionPattern::profile_field_mismatch(const std::string& field, int64_t measured, int64_t wanted) const {
  if (field == "block_size") {
    return title() + " blocks of " + std::to_string(measured) + " tokens, not " + std::to_string(wanted);
  }
  return title() + " " + field + " " + std::to_string(measured) + ", not " + std::to_string(wanted) +
         " ($.methods[].attention." + field + ")";
}

AttentionOptions::AttentionOptions(std::shared_ptr<const AttentionPattern> pattern) : pattern_(std::move(pattern)) {}

const AttentionPattern& AttentionOptions::pattern() const {
  if (!pattern_) throw std::logic_error("attention options: no attention pattern set");
  return *pattern_;
}

bool operator==(const AttentionOptions& a, const AttentionOptions& b) {
  if (a.pattern_ == nullptr || b.pattern_ == nullptr) return a.pattern_ == b.pattern_;
  return a.pattern_->same(*b.pattern_);
}

std::shared_ptr<RingAttentionBackend> make_context_parallel_backend(const AttentionOptions& options,
                                                                    std::shared_ptr<RingContext> context) {
  std::shared_ptr<RingPatternSelector> selector = options.pattern().make_ring_selector();
  if (!selector) {
    throw std::invalid_argument(options.pattern().title() +
                                " attention has no context-parallel path; use parallelism.cp 1");
  }
  return std::make_shared<RingAttentionBackend>(std::move(selector), std::move(context));
}

}  // namespace sb
