#include "harness/parallel/object_exchange.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "harness/parallel/error_text.h"
#include "kernels/attention/core/device_completion.h"

namespace sb {
namespace {

std::vector<at::Tensor> all_gather(c10d::Backend& group, const at::Tensor& mine) {
  std::vector<at::Tensor> input{mine};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < group.getSize(); ++r) output[0].push_back(at::empty_like(mine));
  group.allgather(output, input)->wait();
  return output[0];
}

}  // namespace

std::vector<std::vector<double>> all_gather_doubles(c10d::Backend& group, const std::vector<double>& values) {
  const at::Tensor mine = at::tensor(values, at::TensorOptions().dtype(at::kDouble));
  std::vector<std::vector<double>> result;
  for (const at::Tensor& t : all_gather(group, mine)) {
    const double* data = t.data_ptr<double>();
    result.emplace_back(data, data + t.numel());
  }
  return result;
}

std::vector<std::string> all_gather_strings(c10d::Backend& group, const std::string& text) {
  const auto lengths = all_gather(group, at::full({1}, static_cast<int64_t>(text.size()), at::kLong));
  int64_t longest = 1;
  for (const at::Tensor& l : lengths) longest = std::max(longest, l.item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), text.data(), text.size());
  const auto bytes = all_gather(group, mine);
  std::vector<std::string> result;
  for (size_t r = 0; r < bytes.size(); ++r) {
    const auto* data = reinterpret_cast<const char*>(bytes[r].data_ptr<uint8_t>());
    result.emplace_back(data, static_cast<size_t>(lengths[r].item<int64_t>()));
  }
  return result;
}

std::vector<std::string> gather_strings(c10d::Backend& group, const std::string& text, int root) {
  // Each member's bytes behind its length (8 bytes), padded to the longest.
  std::vector<at::Tensor> longest{at::full({1}, static_cast<int64_t>(text.size()), at::kLong)};
  c10d::AllreduceOptions max;
  max.reduceOp = c10d::ReduceOp::MAX;
  group.allreduce(longest, max)->wait();
  const int64_t size = static_cast<int64_t>(sizeof(int64_t)) + longest[0].item<int64_t>();
  std::vector<at::Tensor> mine{at::zeros({size}, at::kByte)};
  const auto length = static_cast<int64_t>(text.size());
  std::memcpy(mine[0].data_ptr<uint8_t>(), &length, sizeof(length));
  std::memcpy(mine[0].data_ptr<uint8_t>() + sizeof(length), text.data(), text.size());
  std::vector<std::vector<at::Tensor>> received;
  if (group.getRank() == root) {
    received.emplace_back();
    for (int r = 0; r < group.getSize(); ++r) received[0].push_back(at::empty({size}, at::kByte));
  }
  c10d::GatherOptions options;
  options.rootRank = root;
  group.gather(received, mine, options)->wait();
  std::vector<std::string> result;
  if (received.empty()) return result;
  for (const at::Tensor& bytes : received[0]) {
    const auto* data = bytes.data_ptr<uint8_t>();
    int64_t n = 0;
    std::memcpy(&n, data, sizeof(n));
    result.emplace_back(reinterpret_cast<const char*>(data) + sizeof(n), static_cast<size_t>(n));
  }
  return result;
}

std::vector<double> sum_over_ranks(c10d::Backend& group, const std::vector<double>& values, const c10::Device& device,
                                   std::chrono::milliseconds timeout, const std::string& who) {
  std::vector<at::Tensor> tensors{at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(device)};
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  try {
    wait_until_usable(group.allreduce(tensors, sum), timeout, device);
  } catch (const std::exception& e) {
    throw std::runtime_error(who + ": summing " + std::to_string(values.size()) + " values over " +
                             std::to_string(group.getSize()) + " ranks failed: " + error_text(e));
  }
  const at::Tensor host = tensors[0].cpu().contiguous();
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + host.numel());
}

}  // namespace sb
