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

// An upper bound for the search: 3 x the units that would fill max_length at the token
// rate of one draw of `incremental` units, at least 2 x incremental (int(L / rate * 3)).
int64_t ruler_search_upper(int64_t max_length, int64_t tokens_at_incremental, int64_t incremental);

// A drawn prompt (answer prefix included) and its references.
struct RulerDraw {
  std::string prompt;
  std::vector<std::string> outputs;
  int64_t length = 0;  // prompt tokens + generation budget
};

// How a family sizes its prompts.
struct RulerSizing {
  int64_t incremental = 0;   // the search's lower bound and the per-sample shrink step
  int64_t upper = 0;         // the search's upper bound (ruler_search_upper, or cwe's own)
  int64_t max_length = 0;    // L: prompt tokens + extra_tokens + budget must fit
  int64_t budget = 0;        // the family's tokens_to_generate
  int64_t extra_tokens = 0;  // counted in the search besides the probe (vt's example)
  std::string what;          // the task, for messages
};

// RULER's sizing around a family's draws. The search: the largest n in [incremental,
// upper] whose probe(n) prompt fits, probing as RULER's loop does (mid = (lower + upper)
// / 2, up on success, down on failure; incremental when none fits). Then per sample:
// draw(index, n) at that n; while its length (prompt tokens + budget, filled in here)
// exceeds max_length or draw throws RulerRetry, n shrinks by `incremental` when above it
// and the sample is drawn again. RULER retries forever at the smallest size; this gives
// up after 1000 failures there with RulerTooShort.
std::vector<RulerDraw> ruler_sized_samples(int64_t num_samples, const RulerSizing& sizing,
                                           const std::function<int64_t(const std::string&)>& count_tokens,
                                           const std::function<std::string(int64_t n)>& probe,
                                           const std::function<RulerDraw(int64_t index, int64_t n)>& draw);

}  // namespace sb
