#pragma once
// Reader of one .safetensors file (the format of HF checkpoints).
//
// Layout: 8-byte little-endian header length N; N bytes of JSON mapping each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" map of strings; then the data area, raw little-endian C-order bytes,
// offsets relative to its start (byte 8 + N of the file).
//
// open() validates the whole header before anything is read, as strictly as the
// reference implementation (the `safetensors` Python/Rust package), and throws
// std::runtime_error naming the file, the tensor and the problem:
//   - file shorter than 8 bytes; header length 0, over 100 MiB (104857600 bytes; the
//     reference uses 100,000,000, a limit no real header comes near), or longer than
//     the rest of the file;
//   - header not valid JSON (UTF-8 included), not an object, or with a duplicate key;
//   - an entry that is not an object or lacks a well-typed "dtype" (string), "shape"
//     (array of integers) or "data_offsets" (two non-negative integers); other keys
//     are ignored, as the reference does;
//   - a dtype outside BF16 F16 F32 F64 I64 I32 I16 I8 U8 BOOL (the format's F8, F4,
//     U16-U64 and C64 types included); a negative dimension; a shape whose byte size
//     overflows 64 bits;
//   - begin > end; end beyond the data area; end - begin != numel * element size;
//   - ranges that overlap, leave a gap, or leave bytes after the last tensor (the
//     format requires the tensors to tile the data area exactly, sorted by offset);
//   - "__metadata__" that is neither null nor an object of strings.
// Stricter than the reference: a key repeated in one JSON object (the reference keeps
// the last one silently), and BOOL bytes other than 0 and 1 (when read).
// After that every tensor's bytes lie inside the file: nothing reads out of bounds.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;  // as stored: "BF16", "F32", ...
  at::ScalarType dtype = at::ScalarType::Undefined;
  std::vector<int64_t> shape;  // [] for a 0-d tensor
  int64_t numel = 0;
  // Byte range [begin, end) relative to the start of the data area.
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Maps a safetensors dtype name to its ATen type; returns false for any other name.
bool safetensors_dtype_from_name(const std::string& name, at::ScalarType* dtype);
// The safetensors name of an ATen type; throws std::invalid_argument for types the
// format (as supported here) cannot hold.
std::string safetensors_dtype_name(at::ScalarType dtype);
// "BF16, F16, F32, F64, I64, I32, I16, I8, U8, BOOL": for error messages.
std::string safetensors_supported_dtypes();

class SafetensorsFile {
 public:
  // Maps `path` read-only (MAP_PRIVATE) and validates its header. As with any mapping,
  // another process truncating the file while it is open makes reads fault (SIGBUS).
  static SafetensorsFile open(const std::filesystem::path& path);
  // Validates bytes already in memory (a copy is kept); `source_name` stands in for the
  // file name in error messages. The fuzz target uses it; open() runs the same parser.
  static SafetensorsFile open_bytes(const std::string& source_name, const std::string& bytes);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();  // unmaps the file

  // The path given to open(), or open_bytes()'s source_name.
  const std::string& source() const { return source_; }
  // Tensor names in lexicographic order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throws std::runtime_error naming the file when there is no such tensor.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // A new contiguous CPU tensor holding a COPY of the stored bytes: it stays valid
  // after this object (and its mapping) is gone. BOOL data must hold bytes 0 or 1;
  // anything else throws std::runtime_error.
  at::Tensor tensor(const std::string& name) const;
  // The "__metadata__" map; empty when the header has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_header();
  void release() noexcept;
  const uint8_t* bytes() const;

  std::string source_;
  void* mapping_ = nullptr;     // from mmap, or nullptr for open_bytes()
  size_t size_ = 0;             // bytes of the whole file
  std::vector<uint8_t> owned_;  // open_bytes()'s copy
  uint64_t data_start_ = 0;     // 8 + header length
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sb
