#include "harness/data/dataset.h"

#include <stdexcept>

#include "harness/data/jsonl_sft_dataset.h"
#include "harness/data/tokenized_sft_dataset.h"
#include "harness/data/synthetic_dataset.h"

namespace sb {

const OptionNames<SyntheticTask>& synthetic_task_options() {
  static const OptionNames<SyntheticTask> names{
      "synthetic task", {{"arithmetic", SyntheticTask::kArithmetic}, {"retrieval", SyntheticTask::kRetrieval}, {"copy", SyntheticTask::kCopy}}};
  return names;
}

const OptionNames<TooLongRule>& too_long_options() {
  static const OptionNames<TooLongRule> names{
      "too_long rule",
      {{"error", TooLongRule::kError}, {"skip", TooLongRule::kSkip}, {"truncate", TooLongRule::kTruncate}}};
  return names;
}

const OptionNames<DataSource>& data_source_options() {
  static const OptionNames<DataSource> names{
      "data source", {{"synthetic", DataSource::kSynthetic}, {"jsonl", DataSource::kJsonl}, {"tokenized", DataSource::kTokenized}}};
  return names;
}

SampleShape Dataset::shape(int64_t id) const {
  const Sample s = sample(id);
  return SampleShape{s.length(), s.loss_tokens()};
}

std::vector<Sample> Dataset::global_batch(int64_t iteration, int64_t global_batch_size) const {
  std::vector<Sample> batch;
  batch.reserve(static_cast<size_t>(global_batch_size));
  for (int64_t slot = 0; slot < global_batch_size; ++slot) batch.push_back(batch_sample(iteration, global_batch_size, slot));
  return batch;
}

BatchShape Dataset::global_batch_shape(int64_t iteration, int64_t global_batch_size) const {
  BatchShape batch;
  batch.lengths.reserve(static_cast<size_t>(global_batch_size));
  for (int64_t slot = 0; slot < global_batch_size; ++slot) {
    add_to_batch_shape(batch, shape(iteration * global_batch_size + slot));
  }
  return batch;
}

std::unique_ptr<Dataset> make_dataset(const DataSection& data, int64_t seed, const DatasetLimits& limits) {
  switch (data.source) {
    case DataSource::kSynthetic:
      return std::make_unique<SyntheticDataset>(data.synthetic, seed);
    case DataSource::kJsonl:
      return std::make_unique<JsonlSftDataset>(data.jsonl, seed, limits);
    case DataSource::kTokenized:
      return std::make_unique<TokenizedSftDataset>(data.tokenized, seed, limits);
  }
  throw std::logic_error("make_dataset: unhandled DataSource");
}

}  // namespace sb
