#pragma once
// `sparsebalance simulate --validate-against results/<m>`: how far the simulation is
// from a measured results folder of the same manifest.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace sb {

// Per run present in both folders: simulated vs measured median iter_ms and mean bubble
// fraction (measured iterations only, as the report defines them), relative error
// (sim - measured) / measured; and per method ("methods"), the median over its runs (e.g.
// its seeds) of those values, simulated and measured, and their relative error. Runs with
// context parallelism also compare the median worker imbalance over the CP ranks, by
// time and by work (median_cp_worker_imbalance, median_cp_work_imbalance). Writes
// <simulated_dir>/validation.json and returns it.
//
// The iteration time also at the measured run's compute speed: compute_ratio = the
// measured run's micro-batch time per measured iteration over the simulated run's (the
// same data, so the same work per iteration), and at_measured_speed = simulated median iter_ms x
// compute_ratio. A profile timed at another moment than the run (this shared CPU drifts
// by 15-25 % within an invocation) moves every simulated time by the same factor; what
// at_measured_speed still misses is the simulator's own error (waits, bubbles,
// communication). The plain relative_error stays the validation's figure: the
// simulator cannot know the ratio in advance.
nlohmann::json validate_simulation(const std::filesystem::path& simulated_dir,
                                   const std::filesystem::path& measured_dir);
std::string validation_to_text(const nlohmann::json& validation);

}  // namespace sb
