#pragma once
// Small control messages between ranks: strings and doubles over a Gloo group (CPU
// tensors), gathered on every rank or on one; and a sum of doubles over a group of any
// backend, on its device.

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <c10/core/Device.h>

#include <chrono>
#include <string>
#include <vector>

namespace sb {

// Every member's `text`, indexed by group rank. Two all-gathers: the lengths, then
// the bytes padded to the longest.
std::vector<std::string> all_gather_strings(c10d::Backend& group, const std::string& text);

// Every member's `text` on `root` (indexed by group rank), an empty list on the others:
// the longest length by an all-reduce, then one gather of the bytes padded to it. What a
// member receives grows with the group only on the root.
std::vector<std::string> gather_strings(c10d::Backend& group, const std::string& text, int root = 0);

// The element-wise sum of every member's `values` (the same count on every member), on
// every member, in float64. The tensor lives on `device` (a NCCL group's GPU; the CPU for
// Gloo); the call returns when the sum is on the host, and throws std::runtime_error
// naming `who` when the collective fails or takes longer than `timeout`.
std::vector<double> sum_over_ranks(c10d::Backend& group, const std::vector<double>& values, const c10::Device& device,
                                   std::chrono::milliseconds timeout, const std::string& who);

// Every member's values (the same count on every member), indexed by group rank.
std::vector<std::vector<double>> all_gather_doubles(c10d::Backend& group, const std::vector<double>& values);

}  // namespace sb
