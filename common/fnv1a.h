#pragma once
// FNV-1a, 64 bits: a hash whose value is the same on every platform and library (file
// stamps, seeds derived from names). Feed bytes in pieces by passing the previous hash.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sb {

inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;

inline uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64Offset) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace sb
