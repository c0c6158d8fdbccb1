#pragma once
// The error for a tokenizer.json this library cannot use as written: it names the file,
// the JSON path and the problem, like the harness' ConfigError, so that the CLI can turn
// it into one (exit 2) without this library depending on the harness (which links
// LibTorch).

#include <stdexcept>
#include <string>

namespace sb {

class TokenizerFileError : public std::runtime_error {
 public:
  // json_path: "$.model.merges[3]", or "" when the problem is the whole file.
  // fix: one sentence telling the user what to do, or "".
  TokenizerFileError(std::string file, std::string json_path, std::string problem,
                     std::string fix = "");

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& problem() const { return problem_; }
  const std::string& fix() const { return fix_; }

 private:
  std::string file_, json_path_, problem_, fix_;
};

}  // namespace sb
