#pragma once
// Files that must never be seen half-written (results, manifests, reports,
// checkpoints) are written to a temporary sibling, flushed to disk, then renamed
// over the target: a reader sees the old file or the new one, never a mix.

#include <filesystem>
#include <string>

namespace sb {

void write_file_atomic(const std::filesystem::path& path, const std::string& content);
std::string read_file(const std::filesystem::path& path);
// The same for a file the user named: ConfigError naming it ("cannot be opened", then
// `fix`) when it cannot be read.
std::string read_input_file(const std::filesystem::path& path, const std::string& fix);

}  // namespace sb
