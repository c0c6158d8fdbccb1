#pragma once
// Writer of one .safetensors file, readable by SafetensorsFile and by the reference
// `safetensors` package.

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sb {

// Writes `tensors`, their data in the given order, and `metadata` (as "__metadata__",
// omitted when empty) to `path`. Tensors may live on any device and have any strides:
// each is copied to a contiguous CPU tensor in turn and streamed out, so at most one
// tensor is copied at a time. The header JSON is padded with spaces to a multiple of
// 8 bytes so that the data area starts 8-byte aligned.
//
// The file appears atomically: the bytes go to a temporary sibling
// (`<path>.tmp.<pid>.<n>`), which is fsynced and renamed over `path`; on any failure
// the temporary file is removed and `path` is untouched. The folder must exist.
//
// Throws std::invalid_argument for an undefined or non-strided tensor, an unsupported
// dtype (see safetensors_supported_dtypes()), a duplicate name, the reserved name
// "__metadata__", or a name or metadata string that is not valid UTF-8;
// std::runtime_error (naming the file) when a system call fails.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sb
