#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "harness/apps/commands.h"
#include "harness/common/errors.h"
#include "harness/report/run_summary.h"

namespace sb::cli {

Command register_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("report", "Rebuild the report tables of a results folder");
  sub->footer(
      "Rebuilds report.{json,csv,md} of results/<manifest>/ from the records.jsonl of its runs "
      "and prints the Markdown table.");
  sub->add_option("dir", *dir, "Results folder of one manifest, e.g. results/quickstart")
      ->required();
  return [dir]() {
    if (!std::filesystem::is_directory(*dir)) {
      throw ConfigError(*dir, "", "is not a folder", "pass results/<manifest name>");
    }
    const std::vector<RunSummary> runs = write_report(*dir);
    std::cout << report_to_markdown(std::filesystem::path(*dir).filename().string(), runs);
    return 0;
  };
}

}  // namespace sb::cli
