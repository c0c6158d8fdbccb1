#include "harness/runner/profile_ranks.h"

#include <stdexcept>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "kernels/attention/ring/ring_attention.h"
#include "harness/runner/job_session.h"
#include "harness/runner/local_launcher.h"

namespace sb {

int launch_profile_ranks(int64_t ranks, const std::vector<std::string>& arguments, std::ostream& log) {
  LaunchOptions launch;
  launch.world_size = static_cast<int>(ranks);
  launch.arguments = {current_executable()};
  launch.arguments.insert(launch.arguments.end(), arguments.begin(), arguments.end());
  if (ranks == 1) {
    log << "measuring in a process of its own, which exits before the run starts\n";
  } else {
    log << "starting " << ranks << " ranks on this machine to time their shares together\n";
  }
  return launch_local_ranks(launch, log);
}

int run_as_profile_rank(const ProfileRanksOptions& options, const ProfileRankBody& body, std::ostream& log) {
  const DistEnv env = DistEnv::from_environment();
  const int64_t world = options.tp * options.cp;
  if (env.world_size != world) {
    throw ConfigError(options.cp > 1 ? "--context-parallel" : "--tensor-parallel", "",
                      std::to_string(world) + " ranks, but " + env.source + " started " +
                          std::to_string(env.world_size) + " processes",
                      "start " + std::to_string(world) + " (or leave the launcher out: the command starts them)");
  }
  // One stage of one layer held by the TP or CP ranks: the layout only names their group.
  const ParallelLayout layout(1, 1, 1, {}, options.cp, options.tp);
  const auto describe = [layout](int r) { return layout.describe_rank(r); };
  const std::unique_ptr<JobSession> session = JobSession::connect(env, options.timeout, describe);
  try {
    const RankContext context = session->connect_run("profile", layout,
                                                     options.cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU),
                                                     /*tied_embeddings=*/false, options.gpu_backend);
    std::shared_ptr<TensorParallelGroup> group;
    if (options.tp > 1) {
      group = std::make_shared<TensorParallelGroup>(context.tensor_parallel, options.tp, context.tp_rank(),
                                                    context.timeout, context.describe());
    }
    std::shared_ptr<RingContext> ring;
    if (options.cp > 1) {
      // Ring peer c of this TP rank is world rank rank_of(0, 0, c, tp rank), as the trainer names it.
      const int64_t tp_rank = context.tp_rank();
      ring = std::make_shared<RingContext>(
          context.context_parallel, context.cp_rank(), options.cp, options.cp_inner, context.timeout,
          [layout, tp_rank](int64_t c) { return layout.describe_rank(layout.rank_of(0, 0, c, tp_rank)); });
    }
    body(group, ring, session->is_leader());
    session->shutdown();
  } catch (const ConfigError& e) {
    session->report_failure(e, log);
    throw;
  } catch (const std::exception& e) {
    session->report_failure(e, log);
    return 1;
  }
  return 0;
}

}  // namespace sb
