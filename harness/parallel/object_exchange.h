#pragma once
// Small control messages between ranks over a Gloo group (CPU tensors): every rank's
// string (e.g. its iteration report as JSON) gathered on every rank.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace sb {

// Every member's `text`, indexed by group rank. Two all-gathers: the lengths, then
// the bytes padded to the longest.
std::vector<std::string> all_gather_strings(c10d::Backend& group, const std::string& text);

// Every member's values (the same count on every member), indexed by group rank.
std::vector<std::vector<double>> all_gather_doubles(c10d::Backend& group, const std::vector<double>& values);

}  // namespace sb
