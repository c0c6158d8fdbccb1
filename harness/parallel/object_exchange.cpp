#include "harness/parallel/object_exchange.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

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

}  // namespace sb
