#include "harness/eval/resumable_jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/common/jsonl_file.h"
#include "harness/eval/longbench/python_json.h"

namespace sb {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

ResumableJsonl::ResumableJsonl(const std::filesystem::path& path, bool ensure_ascii)
    : path_(path), ensure_ascii_(ensure_ascii) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::string text = std::filesystem::exists(path) ? read_file(path) : std::string();
  // The unfinished last line (no newline: the process was killed while writing it) is cut.
  const size_t complete = for_each_jsonl_line(
      path, text,
      [&](const std::string& line, const std::string& where) {
        existing_.push_back(parse_ordered_jsonl_line(line, where,
                                                     "delete the file (or that line) to predict its items again",
                                                     /*require_object=*/true));
      },
      /*unterminated_last_line=*/false);
  cut_bytes_ = text.size() - complete;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io("cannot open", path);
  if (::ftruncate(fd_, static_cast<off_t>(complete)) != 0 || ::lseek(fd_, 0, SEEK_END) < 0) {
    ::close(fd_);
    throw_io("cannot cut the unfinished last line of", path);
  }
}

ResumableJsonl::~ResumableJsonl() {
  if (fd_ >= 0) ::close(fd_);
}

void ResumableJsonl::append(const nlohmann::ordered_json& line) {
  const std::string text = (ensure_ascii_ ? python_json_dumps_ascii(line) : python_json_dumps(line)) + "\n";
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot append to", path_);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0) throw_io("cannot flush", path_);
}

}  // namespace sb
