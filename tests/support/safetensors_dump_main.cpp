// Test tool for tests/python/test_safetensors_oracle.py, which checks the safetensors
// reader and writer against the reference `safetensors` package.
//
//   sb_safetensors_dump PATH                     PATH: a .safetensors file or a checkpoint
//                                                folder; one JSON line per tensor, by name:
//                                                {"name", "dtype", "shape", "sum", "sum_sq"}
//                                                (float64 sum of the values and of their
//                                                squares; NaN and infinities print as null)
//   sb_safetensors_dump --metadata FILE          FILE's "__metadata__" as one JSON object
//   sb_safetensors_dump --write-example OUT      writes the fixed example tensors below
//
// Exit 0 on success, 1 with "error: ..." on stderr when reading or writing fails, 2 on
// bad usage.

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/safetensors/safetensors_checkpoint.h"
#include "models/safetensors/safetensors_file.h"
#include "models/safetensors/safetensors_writer.h"

namespace {

void print_tensor_line(const std::string& name, const sb::SafetensorsTensorInfo& info,
                       const at::Tensor& tensor) {
  const at::Tensor values = tensor.to(at::kDouble);
  nlohmann::json line = {{"name", name},
                         {"dtype", info.dtype_name},
                         {"shape", info.shape},
                         {"sum", values.sum().item<double>()},
                         {"sum_sq", (values * values).sum().item<double>()}};
  std::cout << line.dump() << "\n";
}

// The example file. tests/python/test_safetensors_oracle.py rebuilds the same tensors
// from these formulas and compares them element by element after loading the file
// with safetensors.torch.load_file; every value is exact in its dtype.
std::vector<std::pair<std::string, at::Tensor>> example_tensors() {
  const int64_t i64_max = std::numeric_limits<int64_t>::max();
  const int32_t i32_min = std::numeric_limits<int32_t>::min();
  const int32_t i32_max = std::numeric_limits<int32_t>::max();
  return {
      // [4, 4]: -4, -3.5, ..., 3.5
      {"bf16", ((at::arange(16, at::kFloat) - 8) * 0.5).reshape({4, 4}).to(at::kBFloat16)},
      // [3, 4]: -0.75, -0.625, ..., 0.625
      {"f16", (at::arange(12, at::kFloat) * 0.125 - 0.75).reshape({3, 4}).to(at::kHalf)},
      // [2, 3, 4]: -3, -2.75, ..., 2.75
      {"f32", (at::arange(24, at::kFloat) * 0.25 - 3).reshape({2, 3, 4})},
      // [3, 2]: the transpose of arange(6).reshape(2, 3), a non-contiguous input
      {"f32_transposed", at::arange(6, at::kFloat).reshape({2, 3}).t()},
      // [10]: k / 7
      {"f64", at::arange(10, at::kDouble) / 7},
      // [6]: every byte of the 8 matters
      {"i64", at::tensor(std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, 1, (int64_t{1} << 62) + 5,
                                              i64_max})},
      // [2, 3]
      {"i32", at::tensor(std::vector<int32_t>{i32_min, -7, 0, 7, i32_max, 123456}).reshape({2, 3})},
      {"i16", at::tensor(std::vector<int16_t>{-32768, -1, 0, 1, 32767, 300})},
      {"i8", at::tensor(std::vector<int8_t>{-128, -1, 0, 1, 127})},
      {"u8", at::tensor(std::vector<uint8_t>{0, 1, 128, 254, 255})},
      {"bool", at::tensor(std::vector<uint8_t>{1, 0, 0, 1, 1}).to(at::kBool)},
      // 0-d
      {"scalar", at::scalar_tensor(3.5, at::kFloat)},
      // no elements
      {"empty_f32", at::empty({0, 3}, at::kFloat)},
      {"empty_i64", at::empty({2, 0}, at::kLong)},
  };
}

int usage() {
  std::cerr << "usage: sb_safetensors_dump PATH | --metadata FILE | --write-example OUT\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "--write-example") {
      sb::write_safetensors(args[1], example_tensors(),
                            {{"format", "pt"}, {"producer", "sb_safetensors_dump"}});
      return 0;
    }
    if (args.size() == 2 && args[0] == "--metadata") {
      const sb::SafetensorsFile file = sb::SafetensorsFile::open(args[1]);
      std::cout << nlohmann::json(file.metadata()).dump() << "\n";
      return 0;
    }
    if (args.size() != 1 || args[0].empty() || args[0][0] == '-') return usage();
    if (std::filesystem::is_directory(args[0])) {
      const sb::SafetensorsCheckpoint checkpoint = sb::SafetensorsCheckpoint::open(args[0]);
      for (const std::string& name : checkpoint.names()) {
        print_tensor_line(name, checkpoint.info(name), checkpoint.tensor(name));
      }
    } else {
      const sb::SafetensorsFile file = sb::SafetensorsFile::open(args[0]);
      for (const std::string& name : file.names()) {
        print_tensor_line(name, file.info(name), file.tensor(name));
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
