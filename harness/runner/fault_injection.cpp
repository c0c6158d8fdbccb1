#include "harness/runner/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <regex>
#include <stdexcept>

#include "common/errors.h"

namespace sb {

std::optional<FaultInjection> FaultInjection::from_environment() {
  const char* text = std::getenv("SB_FAULT_INJECT");
  if (text == nullptr || *text == '\0') return std::nullopt;
  static const std::regex pattern("(crash|hang|error):rank=([0-9]+):iteration=([0-9]+)");
  std::cmatch match;
  if (!std::regex_match(text, match, pattern)) {
    throw ConfigError("environment", "SB_FAULT_INJECT", std::string("\"") + text + "\" is malformed",
                      "use <crash|hang|error>:rank=<r>:iteration=<i>, or unset it");
  }
  return FaultInjection{match[1].str(), std::stoll(match[2].str()), std::stoll(match[3].str())};
}

void FaultInjection::fire_if_due(int64_t current_rank, int64_t current_iteration) const {
  if (current_rank != rank || current_iteration != iteration) return;
  if (kind == "crash") std::raise(SIGKILL);
  if (kind == "hang") std::raise(SIGSTOP);
  if (kind == "error") throw std::runtime_error("injected failure (SB_FAULT_INJECT)");
}

}  // namespace sb
