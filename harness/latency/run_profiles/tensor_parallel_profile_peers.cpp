#include "harness/latency/run_profiles/tensor_parallel_profile_peers.h"



#include "harness/parallel/pipeline/pipeline_stage.h"
#include "harness/parallel/tensor_parallel/sequence_parallel_collectives.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "harness/parallel/tensor_parallel/vocab_parallel.h"

namespace sb {

std::shared_ptr<const ProfileTensorParallelPeers> tensor_parallel_profile_peers(
    std::shared_ptr<TensorParallelGroup> group, int64_t vocab_size, c10::Device device) {
  auto peers = std::make_shared<ProfileTensorParallelPeers>();
  peers->collectives = group->collectives_name();
  peers->sequence_parallel = std::make_shared<C10dSequenceParallel>(group);
  const ShardRange vocabulary = split_range(vocab_size, group->size(), group->rank());
  peers->vocabulary_start = vocabulary.start;
  peers->vocabulary_end = vocabulary.end;
  peers->vocabulary_reduce = [group](at::Tensor& values, bool maximum) {
    group->all_reduce(values, maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM);
  };
  peers->head_shard_sum = tensor_parallel_vector_reduce(group, device);
  peers->max_over_ranks = tensor_parallel_vector_reduce(group, device, c10d::ReduceOp::MAX);
  peers->tensor_parallel_model = [group](Qwen2ForCausalLM model, std::shared_ptr<AttentionBackend> backend,
                                         c10::Device on) -> ProfileTensorParallelPeers::ModelStep {
    const int64_t layers = model->config().num_hidden_layers;
    auto stage = std::make_shared<PipelineStage>(model, 0, 1, StageLayers{0, layers}, std::move(backend));
    stage->enable_tensor_parallelism(group);
    stage->move_to(on);
    stage->set_training(true);
    return [stage](const at::Tensor& tokens, const at::Tensor& positions, const PackedSequences& sequences,
                   const at::Tensor& labels) {
      return stage->cross_entropy_sum(stage->forward(tokens, positions, sequences), labels);
    };
  };
  return peers;
}

}  // namespace sb
