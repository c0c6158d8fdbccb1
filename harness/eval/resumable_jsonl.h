#pragma once
// An append-only JSON-lines file that a later run resumes: prediction files of LongBench
// and needle-in-a-haystack runs. Each line is written with one write(2) and fsync'ed, so
// an interrupted run leaves complete lines and at most one unfinished last line. On
// opening, the complete lines are read back and an unfinished last line (no newline at
// its end) is cut off, to be predicted again. Lines are written as Python's json.dumps
// writes them (ensure_ascii off unless asked for).

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

namespace sb {

class ResumableJsonl {
 public:
  // Creates the file (and its folder) when missing. ConfigError naming path:line when a
  // complete line is not a JSON object (the file is not one this program wrote).
  // ensure_ascii: lines as json.dumps writes them by default (non-ASCII escaped), as
  // RULER's prediction files; otherwise ensure_ascii=False, as LongBench's pred.py.
  explicit ResumableJsonl(const std::filesystem::path& path, bool ensure_ascii = false);
  ~ResumableJsonl();
  ResumableJsonl(const ResumableJsonl&) = delete;
  ResumableJsonl& operator=(const ResumableJsonl&) = delete;

  const std::vector<nlohmann::ordered_json>& existing() const { return existing_; }
  // Bytes of an unfinished last line that opening removed (0 when there was none).
  size_t cut_bytes() const { return cut_bytes_; }
  const std::filesystem::path& path() const { return path_; }

  void append(const nlohmann::ordered_json& line);

 private:
  std::filesystem::path path_;
  bool ensure_ascii_ = false;
  int fd_ = -1;
  std::vector<nlohmann::ordered_json> existing_;
  size_t cut_bytes_ = 0;
};

}  // namespace sb
