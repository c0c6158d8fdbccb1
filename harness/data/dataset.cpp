#include "harness/data/dataset.h"

#include <stdexcept>

#include "harness/data/jsonl_sft_dataset.h"
#include "harness/data/synthetic_dataset.h"

namespace sb {

std::vector<Sample> Dataset::global_batch(int64_t iteration, int64_t global_batch_size) const {
  std::vector<Sample> batch;
  batch.reserve(static_cast<size_t>(global_batch_size));
  for (int64_t slot = 0; slot < global_batch_size; ++slot) {
    batch.push_back(sample(iteration * global_batch_size + slot));
  }
  return batch;
}

std::unique_ptr<Dataset> make_dataset(const DataSection& data, int64_t seed, int64_t model_vocab,
                                      int64_t max_tokens) {
  if (data.source == "synthetic") return std::make_unique<SyntheticDataset>(data.synthetic, seed);
  if (data.source == "jsonl") return std::make_unique<JsonlSftDataset>(data.jsonl, seed, model_vocab, max_tokens);
  throw std::invalid_argument("unknown data source \"" + data.source + "\"; known: synthetic, jsonl");
}

}  // namespace sb
