#pragma once
// The names of one option's values (a manifest choice such as methods[].batching), in the
// order the docs list them: the one table that both the parser (name -> value) and the
// writers (value -> name) read, so a choice is typed from the moment it is parsed.

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sb {

template <class Value>
struct OptionNames {
  const char* what;  // the option, in errors ("batching policy")
  std::vector<std::pair<std::string, Value>> entries;

  // std::invalid_argument listing the known names for an unknown one.
  Value from_name(const std::string& name) const {
    for (const auto& [n, v] : entries) {
      if (n == name) return v;
    }
    std::string known;
    for (const auto& entry : entries) known += (known.empty() ? "" : ", ") + entry.first;
    throw std::invalid_argument(std::string("unknown ") + what + " \"" + name + "\"; known: " + known);
  }
  std::string name_of(Value value) const {
    for (const auto& [n, v] : entries) {
      if (v == value) return n;
    }
    throw std::logic_error(std::string(what) + ": a value without a name");
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries) out.push_back(entry.first);
    return out;
  }
};

}  // namespace sb
