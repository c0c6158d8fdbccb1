#include "harness/eval/resumable_jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"
#include "harness/eval/python_json.h"

namespace sb {
namespace {

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

ResumableJsonl::ResumableJsonl(const std::filesystem::path& path) : path_(path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::string text = std::filesystem::exists(path) ? read_file(path) : std::string();
  size_t complete = 0;  // bytes up to and including the last newline
  size_t line_start = 0;
  int64_t line_number = 0;
  for (size_t newline = text.find('\n'); newline != std::string::npos; newline = text.find('\n', line_start)) {
    ++line_number;
    const std::string line = text.substr(line_start, newline - line_start);
    line_start = newline + 1;
    complete = line_start;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(path.string() + ":" + std::to_string(line_number), "",
                        std::string("is not a JSON line: ") + e.what(),
                        "delete the file (or that line) to predict its items again");
    }
    if (!j.is_object()) {
      throw ConfigError(path.string() + ":" + std::to_string(line_number), "", "is not a JSON object",
                        "delete the file to predict its items again");
    }
    existing_.push_back(std::move(j));
  }
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
  const std::string text = python_json_dumps(line) + "\n";
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
