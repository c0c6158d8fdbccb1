#include "models/tokenizer/tokenizer_error.h"

namespace sb {
namespace {

// Same layout as ConfigError's message: "file: $.path: problem (fix: ...)".
std::string format_tokenizer_error(const std::string& file, const std::string& json_path,
                                   const std::string& problem, const std::string& fix) {
  std::string text;
  if (!file.empty()) text += file + ": ";
  if (!json_path.empty()) text += json_path + ": ";
  text += problem;
  if (!fix.empty()) text += " (fix: " + fix + ")";
  return text;
}

}  // namespace

TokenizerFileError::TokenizerFileError(std::string file, std::string json_path, std::string problem,
                                       std::string fix)
    : std::runtime_error(format_tokenizer_error(file, json_path, problem, fix)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      problem_(std::move(problem)),
      fix_(std::move(fix)) {}

}  // namespace sb
