#pragma once
// Checkpoint folders (HF model, PEFT adapter) appear all at once: their files are
// written into a temporary sibling folder, fsynced, and the folder is renamed into
// place, so a reader never sees half a checkpoint.

#include <filesystem>
#include <functional>
#include <string>

namespace sb {

// `dir` must not exist (std::runtime_error otherwise: choose a new folder or remove
// it). `fill` writes the files into the staging folder it is given; every regular file
// there is then fsynced before the rename. On any exception the staging folder is
// removed and the exception propagates.
void write_checkpoint_folder(const std::filesystem::path& dir,
                             const std::function<void(const std::filesystem::path&)>& fill);

// Writes `content` to `path` (a file inside the staging folder); std::runtime_error
// naming the file when a system call fails.
void write_checkpoint_text_file(const std::filesystem::path& path, const std::string& content);

}  // namespace sb
