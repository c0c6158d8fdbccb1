#include "harness/runner/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <limits>
#include <regex>
#include <stdexcept>
#include <thread>

#include "common/errors.h"
#include "harness/train/trainer.h"

namespace sb {

std::optional<FaultInjection> FaultInjection::from_environment() {
  const char* text = std::getenv("SB_FAULT_INJECT");
  if (text == nullptr || *text == '\0') return std::nullopt;
  static const std::regex pattern("(crash|hang|error|slow|nan):rank=([0-9]+):iteration=([0-9]+)(:ms=([0-9]+))?");
  std::cmatch match;
  const bool matched = std::regex_match(text, match, pattern);
  if (!matched || (match[1].str() == "slow") != match[5].matched) {
    throw ConfigError("environment", "SB_FAULT_INJECT", std::string("\"") + text + "\" is malformed",
                      "use <crash|hang|error|nan>:rank=<r>:iteration=<i> or slow:rank=<r>:iteration=<i>:ms=<n>, or "
                      "unset it");
  }
  return FaultInjection{match[1].str(), std::stoll(match[2].str()), std::stoll(match[3].str()),
                        match[5].matched ? std::stoll(match[5].str()) : 0};
}

void FaultInjection::fire_if_due(int64_t current_rank, int64_t current_iteration, Trainer* trainer) const {
  if (current_rank != rank || current_iteration != iteration) return;
  if (kind == "crash") std::raise(SIGKILL);
  if (kind == "hang") std::raise(SIGSTOP);
  if (kind == "error") throw std::runtime_error("injected failure (SB_FAULT_INJECT)");
  if (kind == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (kind == "nan") {
    if (trainer == nullptr) throw std::logic_error("SB_FAULT_INJECT nan: no trainer to poison");
    if (trainer->stage().parameters().empty()) return;
    c10::NoGradGuard no_grad;
    trainer->stage().parameters().front().tensor.fill_(std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace sb
