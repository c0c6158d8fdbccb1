#pragma once
// --attention and the attention patterns' own flags (--block, --top-k, --gate, ...), for
// the commands that take one attention: `profile` (AttentionFlagSet::kProfile) and `eval`
// and `generate` (kCommand). Each flag is registered once with the patterns that take it
// in its help; a flag given for a pattern that does not take it is an error naming it.

#include <map>
#include <string>

#include "kernels/attention/patterns/attention_pattern.h"

namespace CLI {
class App;
}

namespace sb::cli {

enum class AttentionFlagSet { kProfile, kCommand };

struct AttentionCommandFlags {
  std::string attention;                        // the pattern's name
  std::map<std::string, std::string> values;    // flag -> text as given ("": not given)
};

// Adds --attention (help `attention_help`, default flags.attention) and the set's flags.
void add_attention_flags(CLI::App* sub, AttentionCommandFlags& flags, AttentionFlagSet set,
                         const std::string& attention_help);

// The attention they give, parsed by the pattern (a value that is not a number is read
// as a name); ConfigError naming the flag at fault.
AttentionOptions attention_of(const AttentionCommandFlags& flags, AttentionFlagSet set);

}  // namespace sb::cli
