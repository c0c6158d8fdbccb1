#pragma once
// Finds a package of the project's pinned Python environment from C++: data files that
// an evaluation must read exactly as the Python original does (jieba's dictionary for
// LongBench's Chinese metrics, wonderwords' word lists for RULER) come from the package
// itself rather than a copy in this repository.

#include <filesystem>
#include <functional>
#include <string>

namespace sb {

struct PythonPackageQuery {
  std::string package;       // import name, e.g. "jieba"
  std::string version;       // the pinned version, preferred among several environments
  std::string env_var;       // an environment variable naming the folder, e.g. SB_JIEBA_DIR
  std::string flag;          // the flag that names it, for messages
  std::string subdir;        // the folder inside the package to return ("" or "assets")
  std::string purpose;       // what it is needed for, for messages
  std::function<bool(const std::filesystem::path&)> usable;  // is this folder the right one
};

// In this order: `explicit_dir` when not empty; $env_var; the project's environments
// ($SB_CACHE_DIR, else ~/.cache/sparsebalance: venv-*/lib/python3*/site-packages/<package>/<subdir>),
// preferring query.version. ConfigError naming the flag (or variable) with how to
// install or point at it when the folder is unusable or none is found.
std::filesystem::path locate_python_package_dir(const PythonPackageQuery& query, const std::string& explicit_dir);

// The version of `package` installed in `site_packages` (its <package>-<version>.dist-info
// folder), or "" when there is none.
std::string installed_package_version(const std::filesystem::path& site_packages, const std::string& package);

}  // namespace sb
