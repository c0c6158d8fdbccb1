#pragma once
// Sliding-window attention with attention sinks ("sliding_window"; docs/sliding_window.md):
// the local-attention baseline dynamic sparsity is compared against. [our rule] Query
// position p of a sequence keeps key position j when
//     j <= p  and  (p - j < W  or  j < S):
// its last W tokens (itself included) and the first S tokens of its sequence (the
// "attention sinks" of StreamingLLM). W is the pattern's budget (tokens per query);
// W >= L keeps every causal key of a sequence of L tokens.

#include <cstdint>
#include <optional>
#include <string>

namespace sb {

struct SlidingWindowOptions {
  int64_t window = 512;     // W: the default budget (tokens per query, itself included)
  int64_t sink_tokens = 4;  // S: StreamingLLM's 4 sinks
  int64_t block_size = 64;  // the ring's tiles under context parallelism (the result does not depend on it)

  bool operator==(const SlidingWindowOptions& o) const {
    return window == o.window && sink_tokens == o.sink_tokens && block_size == o.block_size;
  }
};

// The queries at a sequence's end whose attention mass measures a window's coverage
// ([our rule], as vertical-slash's index reads its last queries): C(W) is the mass they
// keep under (W, S), over their number.
inline constexpr int64_t kSlidingWindowCoverageQueries = 64;

inline bool sliding_window_keeps(int64_t query, int64_t key, int64_t window, int64_t sinks) {
  return key <= query && (query - key < window || key < sinks);
}

// The field that breaks the rules (window >= 1, sink_tokens >= 0, block_size >= 1), with
// its problem and a fix; nullopt when none does.
struct SlidingWindowProblem {
  std::string field, problem, fix;
};
inline std::optional<SlidingWindowProblem> sliding_window_first_problem(const SlidingWindowOptions& o) {
  if (o.window < 1) return SlidingWindowProblem{"window", "must be >= 1 (a query keeps itself)", "e.g. 512"};
  if (o.sink_tokens < 0) return SlidingWindowProblem{"sink_tokens", "must be >= 0", "e.g. 4 (StreamingLLM)"};
  if (o.block_size < 1) return SlidingWindowProblem{"block_size", "must be >= 1", "e.g. 64"};
  return std::nullopt;
}

// (query, key) pairs one sequence of `length` tokens keeps at window W with S sinks:
// sum over p of min(p + 1, W) + min(S, max(0, p - W + 1)).
double sliding_window_pairs(int64_t length, int64_t window, int64_t sinks);

}  // namespace sb
