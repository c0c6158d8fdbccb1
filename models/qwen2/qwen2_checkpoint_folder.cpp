#include "models/qwen2/qwen2_checkpoint_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sb {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void throw_io(const std::string& what, const fs::path& path, int error) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(error));
}

// fsync of a file or folder; folders on file systems that cannot sync them (EINVAL)
// are accepted.
void fsync_path(const fs::path& path, bool folder) {
  const int fd = ::open(path.c_str(), folder ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw_io("cannot open to fsync", path, errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0 && !(folder && error == EINVAL)) throw_io("cannot fsync", path, error);
}

}  // namespace

void write_checkpoint_text_file(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("cannot create", path, errno);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw_io("cannot write", path, error);
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw_io("cannot close", path, errno);
}

void write_checkpoint_folder(const fs::path& dir, const std::function<void(const fs::path&)>& fill) {
  if (fs::exists(dir)) {
    throw std::runtime_error(dir.string() + " already exists; choose a new folder or remove it");
  }
  fs::path staging = dir;
  staging += ".partial." + std::to_string(::getpid());
  fs::remove_all(staging);
  fs::create_directories(staging);
  try {
    fill(staging);
    for (const auto& entry : fs::directory_iterator(staging)) {
      if (entry.is_regular_file()) fsync_path(entry.path(), /*folder=*/false);
    }
    fsync_path(staging, /*folder=*/true);
    fs::rename(staging, dir);
  } catch (...) {
    fs::remove_all(staging);
    throw;
  }
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fsync_path(parent, /*folder=*/true);
}

}  // namespace sb
