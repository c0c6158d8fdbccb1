#pragma once
// One writer per results folder. A command that writes runs into results/<manifest>/
// holds an advisory lock on results/<manifest>/.lock (flock, exclusive) for its whole
// life; a second writer is refused (ConfigError, exit 2) naming the holder's PID, host,
// start time and command line, which the holder writes into the file.
//
// The kernel releases the lock when its holder dies, however it dies, so a lock is never
// left stale in the sense of blocking. A holder that ended cleanly empties the file; a
// non-empty file found by a new holder therefore means the previous writer died while it
// held the folder (kill -9, a crash, a lost node), and is reported as such (its runs are
// resumed or moved aside by the rerun rules, docs/cli.md). On NFS, Linux emulates flock
// with byte-range locks, which the server enforces across hosts.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace sb {

class FolderLock {
 public:
  // Creates `dir` if needed and takes its lock, or throws ConfigError naming the holder.
  // `command` goes into the lock file for a second writer's message. When the previous
  // holder died holding the folder, `previous_holder` receives what it had written.
  static FolderLock acquire(const std::filesystem::path& dir, const std::string& command,
                            nlohmann::json* previous_holder = nullptr);

  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;
  ~FolderLock();  // empties the file (a clean end), then unlocks

  const std::filesystem::path& file() const { return file_; }

 private:
  FolderLock(std::filesystem::path file, int fd) : file_(std::move(file)), fd_(fd) {}
  std::filesystem::path file_;
  int fd_ = -1;
};

// The lock file inside a results folder.
std::filesystem::path folder_lock_file(const std::filesystem::path& dir);

// "PID 123 on host h (started 2026-...Z: sparsebalance run ...)" from a lock file's contents.
std::string describe_lock_holder(const nlohmann::json& holder);

}  // namespace sb
