#include "common/errors.h"

namespace sb {
namespace {

std::string format_config_error(const std::string& file, const std::string& json_path,
                                const std::string& problem, const std::string& fix) {
  std::string text;
  if (!file.empty()) text += file + ": ";
  if (!json_path.empty()) text += json_path + ": ";
  text += problem;
  if (!fix.empty()) text += " (fix: " + fix + ")";
  return text;
}

}  // namespace

ConfigError::ConfigError(std::string file, std::string json_path, std::string problem,
                         std::string fix)
    : std::runtime_error(format_config_error(file, json_path, problem, fix)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      problem_(std::move(problem)),
      fix_(std::move(fix)) {}

}  // namespace sb
