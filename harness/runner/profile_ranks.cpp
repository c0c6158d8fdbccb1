#include "harness/runner/profile_ranks.h"

#include <stdexcept>

#include "common/errors.h"
#include "harness/common/system_info.h"
#include "harness/parallel/parallel_layout.h"
#include "harness/parallel/tensor_parallel/tensor_parallel_group.h"
#include "harness/runner/job_session.h"
#include "harness/runner/local_launcher.h"

namespace sb {

int launch_profile_ranks(int64_t tp, const std::string& executable, const std::vector<std::string>& arguments,
                         std::ostream& log) {
  LaunchOptions launch;
  launch.world_size = static_cast<int>(tp);
  launch.arguments = {executable.empty() ? current_executable() : executable};
  launch.arguments.insert(launch.arguments.end(), arguments.begin(), arguments.end());
  launch.describe_rank = [](int r) { return "tp rank " + std::to_string(r); };
  log << "starting " << tp << " TP ranks on this machine to time their shares together\n";
  return launch_local_ranks(launch, log);
}

int run_as_profile_rank(const ProfileRanksOptions& options,
                        const std::function<void(std::shared_ptr<TensorParallelGroup>, bool)>& body,
                        std::ostream& log) {
  const DistEnv env = DistEnv::from_environment();
  if (env.world_size != options.tp) {
    throw ConfigError("--tensor-parallel", "",
                      std::to_string(options.tp) + " TP ranks, but " + env.source + " started " +
                          std::to_string(env.world_size) + " processes",
                      "start " + std::to_string(options.tp) + " (or leave the launcher out: the command starts them)");
  }
  const auto describe = [](int r) { return "tp rank " + std::to_string(r); };
  const std::unique_ptr<JobSession> session = JobSession::connect(env, options.timeout, describe);
  try {
    // One stage of one layer held by tp TP ranks: the layout only names the TP group.
    const ParallelLayout layout(1, 1, 1, {}, 1, options.tp);
    const RankContext context = session->connect_run("profile", layout,
                                                     options.cuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU),
                                                     /*tied_embeddings=*/false, options.gpu_backend);
    auto group = std::make_shared<TensorParallelGroup>(context.tensor_parallel, options.tp, context.tp_rank(),
                                                       context.timeout, context.describe());
    body(group, session->is_leader());
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
