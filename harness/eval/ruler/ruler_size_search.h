#pragma once
// How RULER's generators size a prompt to a length (docs/ruler.md, "Sizes"): a binary
// search for the largest haystack (words, lines, documents) whose prompt plus the
// generation budget fits, then per sample a retry loop that shrinks the haystack when a
// freshly drawn prompt does not fit. Every probe draws new random content, as RULER's do,
// so the random streams stay in step with RULER's.

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sb {

// Where RULER's Python raises inside its retry loop (a sample larger than its
// population, a variable chain short of names): the sample is drawn again.
class RulerRetry : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A length too short for a task's smallest prompt: the run names --lengths.
class RulerTooShort : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The largest n in [lower, upper] for which fits(n), probing as RULER's loop does
// (mid = (lower + upper) / 2, up on success, down on failure); `fallback` when none fits.
int64_t ruler_binary_search(int64_t lower, int64_t upper, int64_t fallback, const std::function<bool(int64_t)>& fits);

// An upper bound for the search: 3 x the units that would fill max_length at the token
// rate of one draw of `incremental` units, at least 2 x incremental (int(L / rate * 3)).
int64_t ruler_search_upper(int64_t max_length, int64_t tokens_at_incremental, int64_t incremental);

// A drawn prompt (answer prefix included) and its references.
struct RulerDraw {
  std::string prompt;
  std::vector<std::string> outputs;
  int64_t length = 0;  // prompt tokens + generation budget
};

// RULER's per-sample loop, for num_samples samples: draw(index, n) draws sample `index`
// at size n; while its length exceeds max_length or draw throws RulerRetry, n shrinks by
// `incremental` when above it, and the sample is drawn again from `size`'s next sample
// on. RULER retries forever at the smallest size; this gives up after 1000 failures
// there with RulerTooShort naming `what`.
std::vector<RulerDraw> ruler_draw_samples(int64_t num_samples, int64_t size, int64_t incremental, int64_t max_length,
                                          const std::string& what,
                                          const std::function<RulerDraw(int64_t index, int64_t n)>& draw);

}  // namespace sb
