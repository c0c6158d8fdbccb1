#pragma once
// A checkpoint folder in the HF layout: one `model.safetensors`, or shards listed by
// `model.safetensors.index.json` ({"metadata": {"total_size": N}, "weight_map":
// {tensor name: shard file name}}). Every file is opened (mapped) and validated up
// front; tensors are read on demand.
//
// open() throws std::runtime_error naming the folder or file when: neither file
// exists, or both do (which one is meant is ambiguous); the index is not valid JSON,
// not an object, lacks "weight_map" or holds a non-string file name or a name with a
// path separator; a listed shard does not exist or is not a valid safetensors file; a
// listed tensor is not in its shard; a shard holds a tensor the weight_map does not
// list, or two shards hold the same tensor. "metadata" is optional and not checked
// against the shards (published checkpoints disagree on what total_size counts).

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/safetensors/safetensors_file.h"

namespace sb {

class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  // Tensor names over all shards, in lexicographic order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throws std::runtime_error naming the folder when there is no such tensor.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // A CPU copy of the tensor (see SafetensorsFile::tensor).
  at::Tensor tensor(const std::string& name) const;
  // The file that holds `name` (a shard, or model.safetensors).
  const std::string& file_of(const std::string& name) const;

 private:
  const SafetensorsFile& shard_of(const std::string& name) const;

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> shards_;        // in file-name order
  std::map<std::string, size_t> shard_index_;  // tensor name -> index into shards_
};

// Compares the checkpoint's tensor names with the names a model needs. A name is
// missing when it is in `expected`, not in `optional` and not in the checkpoint; a
// checkpoint name is unexpected when it is in neither `expected` nor `optional`.
// Names in `optional` may be present or absent (e.g. lm_head.weight, absent when the
// head is tied to the embedding). Throws std::runtime_error listing the missing and
// unexpected names (the first 20 of each, with the counts).
void check_tensor_names(const SafetensorsCheckpoint& checkpoint,
                        const std::vector<std::string>& expected,
                        const std::set<std::string>& optional);

}  // namespace sb
