#include "models/safetensors/safetensors_checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace sb {
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr size_t kNamesListed = 20;

std::string json_quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json read_index(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for 1e999
    throw std::runtime_error(path.string() + ": not valid JSON: " + e.what());
  }
}

// "a", "b", ... and N more
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesListed; ++i) {
    out += (i ? ", " : "") + names[i];
  }
  if (names.size() > kNamesListed) {
    out += ", ... and " + std::to_string(names.size() - kNamesListed) + " more";
  }
  return out;
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& dir) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.dir_ = dir;
  const std::filesystem::path single = dir / kSingleFile;
  const std::filesystem::path index_path = dir / kIndexFile;
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error(dir.string() + ": not a checkpoint folder (no such directory)");
  }
  const bool has_single = std::filesystem::exists(single);
  const bool has_index = std::filesystem::exists(index_path);
  if (has_single && has_index) {
    throw std::runtime_error(dir.string() + ": holds both " + kSingleFile + " and " + kIndexFile +
                             "; which one is the checkpoint is ambiguous (remove one)");
  }
  if (!has_single && !has_index) {
    throw std::runtime_error(dir.string() + ": neither " + std::string(kSingleFile) + " nor " +
                             kIndexFile + " found (not an HF safetensors checkpoint folder)");
  }

  if (has_single) {
    checkpoint.shards_.push_back(SafetensorsFile::open(single));
    for (const std::string& name : checkpoint.shards_[0].names()) {
      checkpoint.shard_index_.emplace(name, 0);
    }
    return checkpoint;
  }

  const std::string where = index_path.string();
  const nlohmann::json index = read_index(index_path);
  if (!index.is_object()) {
    throw std::runtime_error(where + ": not a JSON object (got " + index.type_name() + ")");
  }
  if (index.contains("metadata") && !index.at("metadata").is_object()) {
    throw std::runtime_error(where + ": \"metadata\" is not a JSON object");
  }
  if (!index.contains("weight_map")) {
    throw std::runtime_error(where + ": missing key \"weight_map\"");
  }
  const nlohmann::json& weight_map = index.at("weight_map");
  if (!weight_map.is_object()) {
    throw std::runtime_error(where + ": \"weight_map\" is not a JSON object (got " +
                             weight_map.type_name() + ")");
  }

  // tensor name -> shard file name, as listed; shard file names in sorted order.
  std::map<std::string, std::string> listed;
  std::map<std::string, size_t> shard_of_file;
  for (const auto& [name, file] : weight_map.items()) {
    if (!file.is_string()) {
      throw std::runtime_error(where + ": weight_map entry " + json_quoted(name) +
                               " is not a file name string (got " + file.type_name() + ")");
    }
    const std::string file_name = file.get<std::string>();
    if (file_name.empty() || file_name == "." || file_name == ".." ||
        file_name.find('/') != std::string::npos) {
      throw std::runtime_error(where + ": weight_map entry " + json_quoted(name) + " names " +
                               json_quoted(file_name) +
                               "; shards must be plain file names inside the checkpoint folder");
    }
    listed.emplace(name, file_name);
    shard_of_file.emplace(file_name, 0);
  }
  for (auto& [file_name, slot] : shard_of_file) {
    const std::filesystem::path shard_path = dir / file_name;
    if (!std::filesystem::is_regular_file(shard_path)) {
      std::string example;
      for (const auto& [name, file] : listed) {
        if (file == file_name) {
          example = name;
          break;
        }
      }
      throw std::runtime_error(where + ": weight_map lists shard " + json_quoted(file_name) +
                               " (for tensor " + json_quoted(example) + ", ...), but " +
                               shard_path.string() + " does not exist");
    }
    slot = checkpoint.shards_.size();
    checkpoint.shards_.push_back(SafetensorsFile::open(shard_path));
  }

  // Two shards holding one name are reported before unlisted names: that is the
  // cause when the weight_map lists the name under one of them.
  for (size_t s = 0; s < checkpoint.shards_.size(); ++s) {
    for (const std::string& name : checkpoint.shards_[s].names()) {
      auto [it, inserted] = checkpoint.shard_index_.emplace(name, s);
      if (!inserted) {
        throw std::runtime_error(where + ": tensor " + json_quoted(name) + " is in two shards, " +
                                 checkpoint.shards_[it->second].source() + " and " +
                                 checkpoint.shards_[s].source());
      }
    }
  }
  for (const auto& [name, s] : checkpoint.shard_index_) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      throw std::runtime_error(where + ": shard " + checkpoint.shards_[s].source() +
                               " holds tensor " + json_quoted(name) +
                               ", which the weight_map does not list");
    }
  }
  for (const auto& [name, file_name] : listed) {
    const size_t s = shard_of_file.at(file_name);
    auto it = checkpoint.shard_index_.find(name);
    if (it == checkpoint.shard_index_.end() || it->second != s) {
      throw std::runtime_error(where + ": weight_map lists tensor " + json_quoted(name) + " in " +
                               json_quoted(file_name) + ", but " + checkpoint.shards_[s].source() +
                               " does not contain it");
    }
  }
  return checkpoint;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(shard_index_.size());
  for (const auto& [name, s] : shard_index_) out.push_back(name);
  return out;
}

bool SafetensorsCheckpoint::contains(const std::string& name) const {
  return shard_index_.count(name) > 0;
}

const SafetensorsFile& SafetensorsCheckpoint::shard_of(const std::string& name) const {
  auto it = shard_index_.find(name);
  if (it == shard_index_.end()) {
    throw std::runtime_error(dir_.string() + ": checkpoint has no tensor named " +
                             json_quoted(name));
  }
  return shards_[it->second];
}

const SafetensorsTensorInfo& SafetensorsCheckpoint::info(const std::string& name) const {
  return shard_of(name).info(name);
}

at::Tensor SafetensorsCheckpoint::tensor(const std::string& name) const {
  return shard_of(name).tensor(name);
}

const std::string& SafetensorsCheckpoint::file_of(const std::string& name) const {
  return shard_of(name).source();
}

void check_tensor_names(const SafetensorsCheckpoint& checkpoint,
                        const std::vector<std::string>& expected,
                        const std::set<std::string>& optional) {
  const std::set<std::string> expected_set(expected.begin(), expected.end());
  std::vector<std::string> missing;
  for (const std::string& name : expected_set) {
    if (optional.count(name) == 0 && !checkpoint.contains(name)) missing.push_back(name);
  }
  std::vector<std::string> unexpected;
  for (const std::string& name : checkpoint.names()) {
    if (expected_set.count(name) == 0 && optional.count(name) == 0) unexpected.push_back(name);
  }
  if (missing.empty() && unexpected.empty()) return;
  std::string message = checkpoint.dir().string() + ": missing or unexpected tensor names:";
  if (!missing.empty()) {
    message += " missing " + std::to_string(missing.size()) + " (" + name_list(missing) + ")";
  }
  if (!unexpected.empty()) {
    message += std::string(missing.empty() ? "" : ";") + " unexpected " +
               std::to_string(unexpected.size()) + " (" + name_list(unexpected) + ")";
  }
  throw std::runtime_error(message + "; is the checkpoint for this model configuration?");
}

}  // namespace sb
