#pragma once
// The two kinds of failure the CLI distinguishes by exit code:
//   ConfigError  (exit 2) something the user wrote is wrong: a manifest field, a flag,
//                a results folder that conflicts with the request; says where and how to fix it.
//   anything else derived from std::exception (exit 1): a runtime failure.

#include <stdexcept>
#include <string>

namespace sb {

class ConfigError : public std::runtime_error {
 public:
  // where: a file, optionally with a JSON path ("experiments/q.json", "$.train.lr"),
  // or a flag ("--only"). fix: one sentence telling the user what to do.
  ConfigError(std::string file, std::string json_path, std::string problem, std::string fix = "");

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& problem() const { return problem_; }
  const std::string& fix() const { return fix_; }

 private:
  std::string file_, json_path_, problem_, fix_;
};

}  // namespace sb
