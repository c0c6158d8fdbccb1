#pragma once
// A whole file mapped read-only into memory (mmap, MAP_SHARED): ranks on one host that
// map the same file share its pages in the page cache instead of each holding a copy.
// Move-only; unmapped when destroyed.

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace sb {

class MappedFile {
 public:
  // Throws std::runtime_error naming the file when it cannot be opened or mapped.
  static MappedFile open(const std::filesystem::path& path);
  MappedFile() = default;  // maps nothing

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();

  const uint8_t* data_ = nullptr;  // null for an empty file
  size_t size_ = 0;
};

}  // namespace sb
