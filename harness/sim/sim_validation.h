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
// its seeds) of those values, simulated and measured, and their relative error. Writes
// <simulated_dir>/validation.json and returns it.
nlohmann::json validate_simulation(const std::filesystem::path& simulated_dir,
                                   const std::filesystem::path& measured_dir);
std::string validation_to_text(const nlohmann::json& validation);

}  // namespace sb
