#include "harness/config/run_spec_json.h"

namespace sb {

using nlohmann::json;

json run_spec_to_json(const RunSpec& run) {
  return {{"name", run.name},
          {"method", run.method},
          {"baseline_method", run.baseline_method},
          {"is_baseline", run.is_baseline},
          {"sweep_point", run.sweep_point},
          {"manifest", manifest_to_json(run.manifest)},
          {"source", run.manifest.source},
          {"file", run.manifest.file}};
}

RunSpec run_spec_from_json(const json& j) {
  RunSpec run;
  run.name = j.at("name").get<std::string>();
  run.method = j.at("method").get<std::string>();
  run.baseline_method = j.at("baseline_method").get<std::string>();
  run.is_baseline = j.at("is_baseline").get<bool>();
  run.sweep_point = j.at("sweep_point");
  run.manifest = parse_manifest(j.at("manifest"), j.at("file").get<std::string>());
  run.manifest.source = j.at("source");
  return run;
}

}  // namespace sb
