// libFuzzer target: arbitrary bytes through the safetensors header parser and, when a
// header is accepted, through every tensor copy. The only exception allowed out of the
// reader is std::runtime_error; anything else escapes and libFuzzer reports a crash, as
// do the sanitizers on any out-of-bounds read.
// Build (clang only, never part of the default build) and run:
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSB_BUILD_FUZZERS=ON
//   ninja -C build-fuzz sb_fuzz_safetensors
//   build-fuzz/tests/sb_fuzz_safetensors -max_len=4096 tests/fuzz/corpus/safetensors
// (libFuzzer adds the inputs it finds interesting to the first corpus folder; pass a
// scratch folder first to keep the committed corpus small.)

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/safetensors/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sb::SafetensorsFile file = sb::SafetensorsFile::open_bytes(
        "fuzz-input", std::string(reinterpret_cast<const char*>(data), size));
    for (const std::string& name : file.names()) {
      const at::Tensor tensor = file.tensor(name);
      if (tensor.numel() != file.info(name).numel) __builtin_trap();
    }
  } catch (const std::runtime_error&) {
    // A rejected input: the expected outcome for most of them.
  }
  return 0;
}
