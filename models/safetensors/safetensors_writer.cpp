#include "models/safetensors/safetensors_writer.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

#include "models/safetensors/safetensors_file.h"

// Tensor bytes are written as they lie in memory; the format wants little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors writer assumes a little-endian host");

namespace sb {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(err));
}

// A temporary file that is removed unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_io("cannot create temporary file", path_, errno);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }

  void write_all(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_io("cannot write", path_, errno);
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

  void sync_and_rename(const std::string& target) {
    if (::fsync(fd_) != 0) throw_io("cannot fsync", path_, errno);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) throw_io("cannot close", path_, errno);
    if (::rename(path_.c_str(), target.c_str()) != 0)
      throw_io("cannot rename into place", target, errno);
    renamed_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool renamed_ = false;
};

// Makes the rename itself durable. Some file systems cannot fsync a folder (EINVAL);
// the file's own data is already synced then, so that is not an error.
void sync_folder_of(const std::filesystem::path& path) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io("cannot open the folder to fsync it", folder.string(), errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) throw_io("cannot fsync the folder", folder.string(), err);
}

}  // namespace

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string where = path.string();
  // ordered_json keeps the entries in the caller's order, which is also the data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string at_tensor = where + ": tensor \"" + name + "\": ";
    if (name == "__metadata__") {
      throw std::invalid_argument(at_tensor + "the name __metadata__ is reserved by the format");
    }
    if (!seen.insert(name).second) throw std::invalid_argument(at_tensor + "duplicate name");
    if (!tensor.defined()) throw std::invalid_argument(at_tensor + "undefined tensor");
    if (tensor.layout() != at::kStrided) {
      throw std::invalid_argument(at_tensor + "only dense (strided) tensors can be written");
    }
    const std::string dtype = safetensors_dtype_name(tensor.scalar_type());
    const uint64_t nbytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::type_error& e) {
    throw std::invalid_argument(where + ": a tensor name or metadata string is not valid UTF-8 (" +
                                e.what() + ")");
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<uint8_t>(header_text.size() >> (8 * i));

  static std::atomic<uint64_t> temp_counter{0};
  TempFile temp(where + ".tmp." + std::to_string(::getpid()) + "." +
                std::to_string(temp_counter.fetch_add(1)));
  temp.write_all(length_bytes, sizeof(length_bytes));
  temp.write_all(header_text.data(), header_text.size());
  for (const auto& [name, tensor] : tensors) {
    // One contiguous CPU copy at a time (a no-op for contiguous CPU tensors).
    const at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    if (data.numel() > 0) {
      temp.write_all(data.data_ptr(), static_cast<size_t>(data.numel()) * data.element_size());
    }
  }
  temp.sync_and_rename(where);
  sync_folder_of(path);
}

}  // namespace sb
