#include "harness/config/simulation_spec.h"

#include <cmath>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/json_object_reader.h"
#include "harness/latency/analytic_profile.h"

namespace sb {
namespace {

using nlohmann::json;

LinkSection parse_link(const json& j, const std::string& path, const std::string& file, LinkSection link,
                       bool fittable) {
  JsonObjectReader r(j, path, file);
  link.alpha_us = r.optional<double>("alpha_us", link.alpha_us);
  link.bandwidth_gbps = r.optional<double>("bandwidth_gbps", link.bandwidth_gbps);
  // Only the intra-node link takes fit_from (measured runs share one machine); inter_node
  // rejects it by name rather than as an unknown key.
  if (!fittable && r.contains("fit_from")) {
    throw ConfigError(file, r.child_path("fit_from"), "is only for intra_node",
                      "measured runs ran on one machine: fit intra_node, give inter_node's bandwidth_gbps");
  }
  if (fittable) link.fit_from = resolve_manifest_path(file, r.optional<std::string>("fit_from", ""));
  r.finish();
  r.expect(link.alpha_us >= 0, "alpha_us", "must be >= 0 (microseconds)", "e.g. 3 for NVLink, 10 for InfiniBand");
  r.expect(link.bandwidth_gbps > 0, "bandwidth_gbps", "must be > 0 (Gbit/s)",
           "e.g. 3600 for NVLink 4 (450 GB/s per direction), 400 for InfiniBand NDR");
  return link;
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "\"" : ", \"") + n + "\"";
  return text;
}

}  // namespace

std::vector<std::string> cluster_preset_names() { return {"h200", "h20", "a100"}; }

// Nominal figures (assumptions; sustained bandwidths are lower):
//   intra-node: NVLink through NVSwitch. H200 and H20 (HGX, NVLink 4): 900 GB/s
//     bidirectional per GPU = 450 GB/s = 3600 Gbit/s per direction; A100 (HGX, NVLink 3):
//     600 GB/s bidirectional = 2400 Gbit/s per direction (NVIDIA data sheets). alpha 3 us:
//     an assumed NCCL small-message latency inside a node.
//   inter-node: one InfiniBand NIC per GPU as in DGX/HGX systems: ConnectX-7 NDR 400 Gbit/s
//     for H200 and H20, ConnectX-6 HDR 200 Gbit/s for A100. alpha 10 us: an assumed NCCL
//     latency across nodes.
//   memory: HBM bandwidth, H200 4.8 TB/s, H20 4.0 TB/s, A100 80GB SXM 2.0 TB/s (data sheets).
ClusterSection cluster_preset(const std::string& name) {
  ClusterSection c;
  c.preset = name;
  c.gpus_per_node = 8;
  c.device = name;
  if (name == "h200" || name == "h20") {
    c.intra_node = {3.0, 3600.0};
    c.inter_node = {10.0, 400.0};
    c.memory_bandwidth_gbps = name == "h200" ? 4800.0 * 8 : 4000.0 * 8;
  } else if (name == "a100") {
    c.intra_node = {3.0, 2400.0};
    c.inter_node = {10.0, 200.0};
    c.memory_bandwidth_gbps = 2000.0 * 8;
  } else {
    throw std::invalid_argument("unknown cluster preset \"" + name + "\"; known: " + join(cluster_preset_names()));
  }
  return c;
}

ClusterSection parse_cluster_section(const json& j, const std::string& path, const std::string& file) {
  JsonObjectReader r(j, path, file);
  const std::string preset = r.optional_choice("preset", "h200", cluster_preset_names());
  ClusterSection c = cluster_preset(preset);
  c.gpus_per_node = r.optional<int64_t>("gpus_per_node", c.gpus_per_node);
  if (const json* link = r.optional_value("intra_node")) {
    c.intra_node = parse_link(*link, r.child_path("intra_node"), file, c.intra_node, true);
  }
  if (const json* link = r.optional_value("inter_node")) {
    c.inter_node = parse_link(*link, r.child_path("inter_node"), file, c.inter_node, false);
  }
  c.memory_bandwidth_gbps = r.optional<double>("memory_bandwidth_gbps", c.memory_bandwidth_gbps);
  c.device = r.optional_choice("device", c.device, device_throughput_preset_names());
  r.finish();
  r.expect(c.gpus_per_node >= 1, "gpus_per_node", "must be >= 1", "e.g. 8");
  r.expect(c.memory_bandwidth_gbps > 0, "memory_bandwidth_gbps", "must be > 0 (Gbit/s)",
           "e.g. 38400 (4.8 TB/s, H200)");
  return c;
}

SimulationSection parse_simulation_section(const json& j, const std::string& path, const std::string& file,
                                           const ClusterSection* cluster) {
  JsonObjectReader r(j, path, file);
  SimulationSection s;
  if (const json* profile = r.optional_value("profile")) {
    JsonObjectReader p(*profile, r.child_path("profile"), file);
    const bool analytic = p.contains("analytic");
    const bool from_file = p.contains("file");
    p.expect(analytic != from_file, "analytic", "give exactly one of \"analytic\" and \"file\"",
             "e.g. {\"analytic\": {\"device\": \"h200\"}} or {\"file\": \"profiles/cpu.json\"}");
    if (analytic) {
      s.profile.source = SimProfileSource::kAnalytic;
      JsonObjectReader a(p.required_value("analytic"), p.child_path("analytic"), file);
      const std::string device_default = cluster != nullptr ? cluster->device : "h200";
      s.profile.analytic.device = a.optional_choice("device", device_default, device_throughput_preset_names());
      const DeviceThroughput preset = device_throughput_preset(s.profile.analytic.device);
      s.profile.analytic.matmul_efficiency = a.optional<double>("matmul_efficiency", preset.matmul_efficiency);
      s.profile.analytic.attention_efficiency =
          a.optional<double>("attention_efficiency", preset.attention_efficiency);
      a.finish();
      a.expect(s.profile.analytic.matmul_efficiency > 0 && s.profile.analytic.matmul_efficiency <= 1,
               "matmul_efficiency", "must be in (0, 1]", "e.g. 0.5");
      a.expect(s.profile.analytic.attention_efficiency > 0 && s.profile.analytic.attention_efficiency <= 1,
               "attention_efficiency", "must be in (0, 1]", "e.g. 0.3");
    } else {
      s.profile.source = SimProfileSource::kFile;
      s.profile.file = resolve_manifest_path(file, p.required<std::string>("file"));
    }
    p.finish();
  }
  if (const json* coverage = r.optional_value("coverage")) {
    JsonObjectReader c(*coverage, r.child_path("coverage"), file);
    s.coverage.model = c.optional_choice("model", s.coverage.model, {"zipf"});
    s.coverage.exponent = c.optional<double>("exponent", s.coverage.exponent);
    // With fit_from, `simulate` replaces the exponent by the fit (a resolved manifest
    // carries both: the folder and the exponent fitted from it).
    s.coverage.fit_from = resolve_manifest_path(file, c.optional<std::string>("fit_from", ""));
    s.coverage.rule_keys = c.optional<int64_t>("rule_keys", s.coverage.rule_keys);
    s.coverage.spread = c.optional<double>("spread", s.coverage.spread);
    c.finish();
    c.expect(s.coverage.exponent >= 0, "exponent", "must be >= 0", "e.g. 1.0 (0: uniform routing scores)");
    c.expect(s.coverage.rule_keys >= 0, "rule_keys", "must be >= 0",
             "e.g. 160 (keys a late query keeps under a pattern's top_k rule; 0: the default from the method's counts)");
    c.expect(s.coverage.spread >= 0 && s.coverage.spread <= 1, "spread", "must be in [0, 1]",
             "0 (every query keeps the same extra keys) .. 1 (a share of its past growing with its position)");
  }
  if (const json* noise = r.optional_value("latency_noise")) {
    JsonObjectReader n(*noise, r.child_path("latency_noise"), file);
    s.latency_noise.sigma = n.optional<double>("sigma", s.latency_noise.sigma);
    s.latency_noise.rank_sigma = n.optional<double>("rank_sigma", s.latency_noise.rank_sigma);
    // With fit_from, `simulate` replaces sigma and rank_sigma by the fit (a resolved
    // manifest carries both: the folder and the values fitted from it).
    s.latency_noise.fit_from = resolve_manifest_path(file, n.optional<std::string>("fit_from", ""));
    n.finish();
    n.expect(std::isfinite(s.latency_noise.sigma) && s.latency_noise.sigma >= 0 && s.latency_noise.sigma <= 2,
             "sigma", "must be in [0, 2]",
             "e.g. 0.08 (the standard deviation of log(measured / predicted) micro-batch time), or fit_from");
    n.expect(std::isfinite(s.latency_noise.rank_sigma) && s.latency_noise.rank_sigma >= 0 &&
                 s.latency_noise.rank_sigma <= 2,
             "rank_sigma", "must be in [0, 2]",
             "e.g. 0.05 (the standard deviation of the log factor a DP rank's micro-batches share in one "
             "iteration), or fit_from");
  }
  if (const json* overhead = r.optional_value("iteration_overhead")) {
    JsonObjectReader o(*overhead, r.child_path("iteration_overhead"), file);
    s.iteration_overhead.ms = o.optional<double>("ms", s.iteration_overhead.ms);
    // With fit_from, `simulate` replaces ms by the fit (a resolved manifest carries both).
    s.iteration_overhead.fit_from = resolve_manifest_path(file, o.optional<std::string>("fit_from", ""));
    o.finish();
    o.expect(o.optional_value("ms") == nullptr || (std::isfinite(s.iteration_overhead.ms) && s.iteration_overhead.ms >= 0),
             "ms", "must be >= 0", "e.g. 25 (ms per rank and iteration), or fit_from");
    o.expect(s.iteration_overhead.enabled(), "ms", "is missing",
             "give ms (per rank and iteration) or fit_from (a folder of measured runs)");
  }
  if (const json* ring = r.optional_value("ring_compute")) {
    JsonObjectReader c(*ring, r.child_path("ring_compute"), file);
    s.ring_compute.factor = c.optional<double>("factor", s.ring_compute.factor);
    s.ring_compute.step_ms_per_token = c.optional<double>("step_ms_per_token", s.ring_compute.step_ms_per_token);
    // With fit_from, `simulate` replaces factor by the fit (a resolved manifest carries both).
    s.ring_compute.fit_from = resolve_manifest_path(file, c.optional<std::string>("fit_from", ""));
    c.finish();
    c.expect(std::isfinite(s.ring_compute.factor) && s.ring_compute.factor > 0, "factor", "must be > 0",
             "e.g. 1.0 (the ring costs what the profile's attention term costs for the same pairs), or fit_from");
    c.expect(std::isfinite(s.ring_compute.step_ms_per_token) && s.ring_compute.step_ms_per_token >= 0,
             "step_ms_per_token", "must be >= 0", "e.g. 0 (a ring step costs only its pairs), or fit_from");
  }
  s.forward_fraction = r.optional<double>("forward_fraction", s.forward_fraction);
  s.optimizer_ms = r.optional<double>("optimizer_ms", s.optimizer_ms);
  r.finish();
  r.expect(!(s.iteration_overhead.enabled() && r.optional_value("optimizer_ms") != nullptr), "optimizer_ms",
           "cannot be given with iteration_overhead, which includes the optimizer step",
           "remove optimizer_ms, or iteration_overhead");
  r.expect(s.forward_fraction > 0 && s.forward_fraction < 1, "forward_fraction", "must be in (0, 1)",
           "e.g. 0.3333 (backward = 2 x forward)");
  return s;
}

namespace {

json link_to_json(const LinkSection& link) {
  json j{{"alpha_us", link.alpha_us}, {"bandwidth_gbps", link.bandwidth_gbps}};
  if (!link.fit_from.empty()) j["fit_from"] = link.fit_from;
  return j;
}

}  // namespace

json cluster_section_to_json(const ClusterSection& c) {
  return {{"preset", c.preset},
          {"gpus_per_node", c.gpus_per_node},
          {"intra_node", link_to_json(c.intra_node)},
          {"inter_node", link_to_json(c.inter_node)},
          {"memory_bandwidth_gbps", c.memory_bandwidth_gbps},
          {"device", c.device}};
}

json simulation_section_to_json(const SimulationSection& s) {
  json coverage{{"model", s.coverage.model}, {"exponent", s.coverage.exponent}};
  if (!s.coverage.fit_from.empty()) coverage["fit_from"] = s.coverage.fit_from;
  if (s.coverage.rule_keys > 0) coverage["rule_keys"] = s.coverage.rule_keys;
  if (s.coverage.spread > 0) coverage["spread"] = s.coverage.spread;
  json j{{"coverage", coverage},
         {"forward_fraction", s.forward_fraction},
         {"optimizer_ms", s.optimizer_ms}};
  if (s.latency_noise.enabled()) {
    j["latency_noise"] = {{"sigma", s.latency_noise.sigma}};
    // Only when set, so that resolved manifests from before the rank term read the same.
    if (s.latency_noise.rank_sigma > 0) j["latency_noise"]["rank_sigma"] = s.latency_noise.rank_sigma;
    if (!s.latency_noise.fit_from.empty()) j["latency_noise"]["fit_from"] = s.latency_noise.fit_from;
  }
  if (s.iteration_overhead.enabled()) {
    // optimizer_ms would conflict on reading back: iteration_overhead replaces it.
    j.erase("optimizer_ms");
    j["iteration_overhead"] = json::object();
    if (s.iteration_overhead.ms >= 0) j["iteration_overhead"]["ms"] = s.iteration_overhead.ms;
    if (!s.iteration_overhead.fit_from.empty()) j["iteration_overhead"]["fit_from"] = s.iteration_overhead.fit_from;
  }
  // Only when it differs from the default, so that earlier resolved manifests read the same.
  if (s.ring_compute.factor != 1.0 || s.ring_compute.step_ms_per_token != 0.0 || !s.ring_compute.fit_from.empty()) {
    j["ring_compute"] = {{"factor", s.ring_compute.factor}, {"step_ms_per_token", s.ring_compute.step_ms_per_token}};
    if (!s.ring_compute.fit_from.empty()) j["ring_compute"]["fit_from"] = s.ring_compute.fit_from;
  }
  if (s.profile.source == SimProfileSource::kAnalytic) {
    j["profile"] = {{"analytic",
                     {{"device", s.profile.analytic.device},
                      {"matmul_efficiency", s.profile.analytic.matmul_efficiency},
                      {"attention_efficiency", s.profile.analytic.attention_efficiency}}}};
  } else if (s.profile.source == SimProfileSource::kFile) {
    j["profile"] = {{"file", s.profile.file}};
  }
  return j;
}

}  // namespace sb
