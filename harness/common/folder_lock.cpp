#include "harness/common/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/common/utc_time.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  if (::lseek(fd, 0, SEEK_SET) < 0) return text;
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// What a holder wrote; a file cut short or edited by hand still yields what can be read.
nlohmann::json parse_holder(const std::string& text) {
  nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
  if (holder.is_discarded() || !holder.is_object()) return nlohmann::json{{"unreadable", text}};
  return holder;
}

void write_holder(int fd, const fs::path& file, const std::string& command) {
  const std::string text =
      nlohmann::json{{"pid", ::getpid()}, {"host", this_host_name()}, {"started_at_utc", utc_timestamp("%Y-%m-%dT%H:%M:%SZ")}, {"command", command}}
          .dump() +
      "\n";
  // Written over the old line, then cut to length: a reader never sees an empty file.
  if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd, static_cast<off_t>(text.size())) != 0) {
    throw std::runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
  }
}

}  // namespace

fs::path folder_lock_file(const fs::path& dir) { return dir / ".lock"; }

std::string describe_lock_holder(const nlohmann::json& holder) {
  if (holder.contains("unreadable")) return "a writer whose lock file reads \"" + holder["unreadable"].get<std::string>() + "\"";
  std::string text = "PID " + (holder.contains("pid") ? holder["pid"].dump() : std::string("?")) + " on host " +
                     holder.value("host", std::string("?"));
  if (holder.contains("started_at_utc") || holder.contains("command")) {
    text += " (started " + holder.value("started_at_utc", std::string("?")) + ": " +
            holder.value("command", std::string("?")) + ")";
  }
  return text;
}

FolderLock FolderLock::acquire(const fs::path& dir, const std::string& command, nlohmann::json* previous_holder) {
  fs::create_directories(dir);
  const fs::path file = folder_lock_file(dir);
  // O_CLOEXEC: the ranks a launcher starts do not inherit the lock; they die with it.
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw ConfigError(file.string(), "", std::string("cannot be opened to lock the results folder: ") + std::strerror(errno),
                      "check that the results folder is writable, or pass another --results");
  }
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    const std::string holder = read_all(fd);
    ::close(fd);
    if (error == EWOULDBLOCK) {
      throw ConfigError(dir.string(), "",
                        "is being written by another sparsebalance: " + describe_lock_holder(parse_holder(holder)),
                        "wait for that command to finish (or stop it), or pass another --results folder; a "
                        "results folder takes one writer at a time");
    }
    throw ConfigError(file.string(), "", std::string("cannot be locked: ") + std::strerror(error),
                      "use a results folder on a file system that supports flock");
  }
  const std::string before = read_all(fd);
  if (previous_holder != nullptr) {
    *previous_holder = before.find_first_not_of(" \n\t\r") == std::string::npos ? nlohmann::json() : parse_holder(before);
  }
  try {
    write_holder(fd, file, command);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return FolderLock(file, fd);
}

FolderLock::FolderLock(FolderLock&& other) noexcept : file_(std::move(other.file_)), fd_(other.fd_) { other.fd_ = -1; }

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  // On failure the next holder reports this writer as ended uncleanly; nothing is lost.
  [[maybe_unused]] const int emptied = ::ftruncate(fd_, 0);
  ::close(fd_);  // releases the flock
}

}  // namespace sb
