// The ring over a group that coalesces, as NCCL's does: NCCL holds a send on the GPU
// until its peer's receive runs, so the ring must post each send fused with its receive
// (docs/context_parallel.md, "The ring"). A Gloo group stands in for NCCL's contract
// here (CPU ranks as threads): it says it coalesces, a send or receive inside a batch
// returns no work (ProcessGroupNCCL's return none either), and the batch's end returns
// one work for the batch. The ring must equal the one-rank float64 oracle through it,
// post no transfer outside a batch, and fuse exactly one send and one receive per batch,
// for rings of two (where the two ranks send to each other), hierarchical rings whose
// groups of two do, and three groups of two.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/attention/ring/cp_sharding.h"
#include "kernels/attention/ring/ring_attention.h"
#include "tests/support/ring_attention_cases.h"
#include "tests/support/tensor_parallel_threads.h"

namespace sb {
namespace {

// One work for a batch's transfers: waits for each.
class BatchWork : public c10d::Work {
 public:
  explicit BatchWork(std::vector<c10::intrusive_ptr<c10d::Work>> works) : works_(std::move(works)) {}
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& work : works_) work->wait(timeout);
    return true;
  }
  bool isCompleted() override {
    for (auto& work : works_) {
      if (!work->isCompleted()) return false;
    }
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

class CoalescingGroup : public c10d::Backend {
 public:
  explicit CoalescingGroup(c10::intrusive_ptr<c10d::Backend> inner)
      : c10d::Backend(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

  const std::string getBackendName() const override { return "coalescing-test"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override {
    if (active_) nested_ = true;
    active_ = true;
    batch_ops_.clear();
  }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    active_ = false;
    batches.push_back(batch_ops_);
    return c10::make_intrusive<BatchWork>(std::exchange(batch_works_, {}));
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return posted(inner_->send(tensors, dst, tag), "send");
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return posted(inner_->recv(tensors, src, tag), "recv");
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& options) override {
    return inner_->allreduce(tensors, options);
  }

  std::vector<std::string> batches;  // each batch's transfers in the order posted
  int64_t outside_batches = 0;       // transfers posted outside a batch
  bool nested_ = false;

 private:
  c10::intrusive_ptr<c10d::Work> posted(c10::intrusive_ptr<c10d::Work> work, const char* what) {
    if (!active_) {
      ++outside_batches;
      return work;
    }
    batch_ops_ += batch_ops_.empty() ? what : std::string("+") + what;
    batch_works_.push_back(std::move(work));
    return {};
  }

  c10::intrusive_ptr<c10d::Backend> inner_;
  bool active_ = false;
  std::string batch_ops_;
  std::vector<c10::intrusive_ptr<c10d::Work>> batch_works_;
};

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(RingCoalescing, EverySendIsFusedWithItsReceiveAndTheRingEqualsTheOracle) {
  struct Case {
    int64_t cp, inner;
    bool moba;
  };
  // Three groups of two (6, 2): the group after and the group before are different ranks.
  for (const Case& c : {Case{2, 0, false}, Case{2, 0, true}, Case{4, 2, false}, Case{4, 0, true}, Case{6, 2, false},
                        Case{6, 2, true}}) {
    const std::string what = "cp " + std::to_string(c.cp) + " inner " + std::to_string(c.inner) +
                             (c.moba ? " moba" : " dense");
    const test::RingCase ring_case{what, {CpLayoutKind::kZigzag, 0}, c.moba, at::kDouble, c.inner};
    const test::RingInputs in = test::ring_inputs(at::kDouble, 13);
    const test::RingOracle oracle = test::ring_oracle(in, ring_case);
    const PackedSequences sequences = PackedSequences::from_lengths(in.lengths);
    const CpSharding sharding = CpSharding::build(sequences, c.cp, ring_case.layout);
    std::vector<at::Tensor> out(c.cp), lse(c.cp), dq(c.cp), dk(c.cp), dv(c.cp);
    std::vector<std::vector<std::string>> batches(c.cp);
    std::vector<int64_t> outside(c.cp, 0);
    std::vector<bool> nested(c.cp, false);
    test::run_group_ranks(c.cp, [&](c10::intrusive_ptr<c10d::Backend> gloo, int64_t rank) {
      auto group = c10::make_intrusive<CoalescingGroup>(std::move(gloo));
      auto context = std::make_shared<RingContext>(group, rank, c.cp, c.inner, std::chrono::milliseconds(30000));
      at::Tensor q = sharding.shard(in.q, rank).contiguous().requires_grad_(true);
      at::Tensor k = sharding.shard(in.k, rank).contiguous().requires_grad_(true);
      at::Tensor v = sharding.shard(in.v, rank).contiguous().requires_grad_(true);
      const std::shared_ptr<RingPatternSelector> selector = test::ring_selector(ring_case);
      const RingAttentionResult result =
          ring_attention(q, k, v, sharding, *selector, AttentionBudgetRequest{}, test::ring_scale(), context);
      result.out.backward(sharding.shard(in.grad_out, rank).contiguous());
      out[rank] = result.out.detach();
      lse[rank] = result.lse;
      dq[rank] = q.grad();
      dk[rank] = k.grad();
      dv[rank] = v.grad();
      batches[rank] = group->batches;
      outside[rank] = group->outside_batches;
      nested[rank] = group->nested_;
    });
    EXPECT_LT(max_diff(sharding.unshard(out), oracle.out), 1e-10) << what;
    EXPECT_LT(max_diff(sharding.unshard(lse), oracle.lse), 1e-10) << what;
    EXPECT_LT(max_diff(sharding.unshard(dq), oracle.dq), 1e-10) << what;
    EXPECT_LT(max_diff(sharding.unshard(dk), oracle.dk), 1e-10) << what;
    EXPECT_LT(max_diff(sharding.unshard(dv), oracle.dv), 1e-10) << what;
    for (int64_t r = 0; r < c.cp; ++r) {
      EXPECT_EQ(outside[r], 0) << what << " rank " << r;
      EXPECT_FALSE(nested[r]) << what << " rank " << r;
      EXPECT_FALSE(batches[r].empty()) << what << " rank " << r;
      for (const std::string& batch : batches[r]) EXPECT_EQ(batch, "send+recv") << what << " rank " << r;
      EXPECT_EQ(batches[r].size(), batches[0].size()) << what << ": every rank posts the same batches";
    }
  }
}

}  // namespace
}  // namespace sb
