#include "tests/dist/job_fixture.h"

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/run_command.h"

namespace sb::test {

namespace fs = std::filesystem;
using nlohmann::json;

json job_manifest(const std::string& name, int64_t dp, int64_t pp, int64_t iterations, double timeout_s,
                  int64_t checkpoint_every) {
  json j = json::parse(R"({
    "seed": 5,
    "model": {"preset": "qwen2-test"},
    "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
    "train": {"warmup_iterations": 1, "global_batch_size": 8, "max_tokens_per_microbatch": 64, "threads": 1},
    "methods": [{"name": "dense"}]
  })");
  j["name"] = name;
  j["train"]["iterations"] = iterations;
  j["parallelism"] = {{"dp", dp}, {"pp", pp}, {"timeout_s", timeout_s}};
  j["checkpoint"] = {{"every_iterations", checkpoint_every}};
  return j;
}

fs::path write_manifest(const fs::path& dir, const json& manifest) {
  const fs::path path = dir / (manifest.at("name").get<std::string>() + ".json");
  std::ofstream(path) << manifest.dump(2);
  return path;
}

Worker start_cli(const fs::path& manifest, const fs::path& results, const fs::path& log,
                 const std::map<std::string, std::string>& env) {
  return spawn_worker({SB_BINARY_DIR "/sparsebalance", "run", manifest.string(), "--results", results.string(),
                       "--progress-every", "1"},
                      env, log);
}

size_t line_count(const fs::path& file) {
  std::ifstream in(file);
  size_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  return lines;
}

bool wait_for_lines(const fs::path& file, size_t lines, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (line_count(file) >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::vector<pid_t> child_processes(pid_t pid) {
  std::vector<pid_t> children;
  const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(tasks, ec)) {
    std::istringstream in(slurp(task.path() / "children"));
    pid_t child;
    while (in >> child) children.push_back(child);
  }
  return children;
}

std::vector<json> read_records(const fs::path& run_dir) {
  std::vector<json> records;
  std::istringstream in(slurp(run_dir / "records.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) records.push_back(json::parse(line));
  }
  return records;
}

}  // namespace sb::test
