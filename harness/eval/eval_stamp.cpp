#include "harness/eval/eval_stamp.h"

#include <c10/core/ScalarType.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "common/fnv1a.h"
#include "harness/common/atomic_file.h"
#include "harness/eval/longbench/python_json.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {

namespace fs = std::filesystem;

namespace {

// FNV-1a (64-bit) of a file's bytes as 16 hex digits; "absent" when there is no file.
std::string file_fnv1a64(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "absent";
  uint64_t hash = kFnv1a64Offset;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    hash = fnv1a64(std::string_view(buffer, static_cast<size_t>(in.gcount())), hash);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace

nlohmann::ordered_json eval_model_identity(ModelFolder& model) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["model"] = fs::absolute(model.dir).lexically_normal().string();
  j["config_fnv1a64"] = file_fnv1a64(model.dir / "config.json");
  j["tokenizer_fnv1a64"] = file_fnv1a64(model.dir / "tokenizer.json");
  j["attention"] = model.model->attention_backend().name();
  j["dtype"] = std::string(c10::toString(model.model->parameters().front().scalar_type()));
  j["precision"] = qwen2_precision_name(model.model->precision());
  return j;
}

void check_or_write_eval_stamp(const fs::path& file, const nlohmann::ordered_json& stamp) {
  if (!fs::exists(file)) {
    write_file_atomic(file, python_json_dumps(stamp, 2) + "\n");
    return;
  }
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::ordered_json kept = nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (kept != stamp) {
    throw ConfigError(file.string(), "", "records another model or other settings than this run's (" + stamp.dump() + ")",
                      "use a fresh output folder");
  }
}

}  // namespace sb
