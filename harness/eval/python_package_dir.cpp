#include "harness/eval/python_package_dir.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/errors.h"

namespace sb {

namespace fs = std::filesystem;

std::string installed_package_version(const fs::path& site_packages, const std::string& package) {
  std::error_code ec;
  const std::string prefix = package + "-";
  const std::string suffix = ".dist-info";
  for (const auto& entry : fs::directory_iterator(site_packages, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    }
  }
  return "";
}

fs::path locate_python_package_dir(const PythonPackageQuery& q, const std::string& explicit_dir) {
  const std::string where = q.subdir.empty() ? "<site-packages>/" + q.package
                                             : "<site-packages>/" + q.package + "/" + q.subdir;
  const std::string fix = "install " + q.package + " " + q.version + " (pip install " + q.package + "==" + q.version +
                          "; scripts/test.sh sets up the project's environment with it) and pass " + q.flag + " " +
                          where + " or set " + q.env_var;
  if (!explicit_dir.empty()) {
    if (!q.usable(explicit_dir)) throw ConfigError(q.flag, "", explicit_dir + " is not " + where, fix);
    return explicit_dir;
  }
  if (const char* env = std::getenv(q.env_var.c_str()); env != nullptr && *env != '\0') {
    if (!q.usable(env)) throw ConfigError(q.env_var, "", std::string(env) + " is not " + where, fix);
    return env;
  }
  fs::path cache;
  if (const char* c = std::getenv("SB_CACHE_DIR"); c != nullptr && *c != '\0') {
    cache = c;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    cache = fs::path(home) / ".cache" / "sparsebalance";
  }
  // The folder inside site-packages (no trailing separator when subdir is empty).
  const auto folder = [&q](const fs::path& site) { return q.subdir.empty() ? site / q.package : site / q.package / q.subdir; };
  std::vector<fs::path> found;  // site-packages folders holding a usable copy
  std::error_code ec;
  for (const auto& venv : fs::directory_iterator(cache, ec)) {
    if (venv.path().filename().string().rfind("venv-", 0) != 0) continue;
    for (const auto& python : fs::directory_iterator(venv.path() / "lib", ec)) {
      const fs::path site = python.path() / "site-packages";
      if (q.usable(folder(site))) found.push_back(site);
    }
  }
  std::sort(found.begin(), found.end());
  for (const fs::path& site : found) {
    if (installed_package_version(site, q.package) == q.version) return folder(site);
  }
  if (!found.empty()) return folder(found.front());
  throw ConfigError(q.flag, "", q.package + " (needed " + q.purpose + ") was not found", fix);
}

}  // namespace sb
