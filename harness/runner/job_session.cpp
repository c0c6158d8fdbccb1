#include "harness/runner/job_session.h"

#include "harness/parallel/error_text.h"

#include <cstdlib>

#include "common/errors.h"

namespace sb {
namespace {

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

}  // namespace

std::unique_ptr<JobSession> JobSession::single_process() {
  return std::unique_ptr<JobSession>(new JobSession());
}

std::unique_ptr<JobSession> JobSession::connect(const DistEnv& env, std::chrono::milliseconds timeout,
                                                std::function<std::string(int)> describe) {
  std::unique_ptr<JobSession> s(new JobSession());
  s->env_ = env;
  s->timeout_ = timeout;
  s->describe_ = std::move(describe);
  // torchrun's agent store outlives restarted workers: keys are per restart.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  s->prefix_ = std::string("sb/") + (restart && *restart ? restart : "0") + "/";
  try {
    s->store_ = create_rendezvous_store(env, timeout);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + " could not meet the other " +
                             std::to_string(env.world_size - 1) + " ranks at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " within " +
                             std::to_string(timeout.count() / 1000) + " s: " + error_text(e));
  }
  RankWatchdogOptions options;
  options.timeout = timeout;
  options.interval = std::min(std::chrono::milliseconds(500), timeout / 4);
  options.key_prefix = s->prefix_ + "watchdog/";
  options.store_address = env.master_addr + ":" + std::to_string(env.master_port);
  options.describe_rank = s->describe_;
  s->watchdog_ = std::make_unique<RankWatchdog>(s->store_, env.rank, env.world_size, options);
  s->world_ = create_group(s->store_, s->prefix_ + "session/", env.rank, env.world_size,
                           CollectiveBackend::kGloo, timeout, env.master_addr);
  return s;
}

JobSession::~JobSession() = default;

std::string JobSession::agree(const std::string& name, const std::function<std::string()>& compute) {
  if (!store_) return compute();
  const std::string k = key("agree/" + name);
  if (is_leader()) {
    try {
      const std::string value = compute();
      store_->set(k, bytes_of("ok\n" + value));
      return value;
    } catch (const ConfigError& e) {
      store_->set(k, bytes_of(std::string("config\n") + error_text(e)));
      throw;
    } catch (const std::exception& e) {
      store_->set(k, bytes_of(std::string("error\n") + error_text(e)));
      throw;
    }
  }
  const std::string reply = text_of(store_->get(k));
  const size_t newline = reply.find('\n');
  const std::string kind = reply.substr(0, newline), value = reply.substr(newline + 1);
  if (kind == "ok") return value;
  if (kind == "config") throw ConfigError("", "", "rank 0 stopped the command: " + value);
  throw std::runtime_error("rank 0 stopped the command: " + value);
}

RankContext JobSession::connect_run(const std::string& run, ParallelLayout layout, c10::Device device,
                                    bool tied_embeddings, CollectiveBackend gpu_backend) const {
  if (!store_) return RankContext::single_process(std::move(layout), device);
  return RankContext::connect(env_, std::move(layout), store_, prefix_ + "run/" + run + "/", device,
                              tied_embeddings, timeout_, gpu_backend);
}

std::string JobSession::report_failure(const std::exception& error, std::ostream& log) {
  if (reported_) return *reported_;
  std::string message = error_text(error);
  if (!watchdog_) return message;
  const bool config = dynamic_cast<const ConfigError*>(&error) != nullptr;
  watchdog_->begin_report(message, config ? 2 : 1);
  if (std::optional<std::string> first = watchdog_->failure_of_another_rank()) {
    // This rank's error is a consequence (e.g. a connection the failed rank closed).
    message = "stopping: " + *first;
    log << "error: " << message << std::endl;
    reported_ = message;
    return message;
  }
  if (!config) {
    // A peer that died by a signal said nothing; a moment of watching names it.
    const std::vector<int> silent = watchdog_->silent_peers(std::chrono::milliseconds(1500));
    for (int peer : silent) message += "; " + describe_(peer) + " has stopped sending heartbeats";
    const std::string me = describe_(env_.rank);
    log << "error: " << (message.rfind(me, 0) == 0 ? "" : me + ": ") << message << std::endl;
  }
  watchdog_->report_failure(message, config ? 2 : 1);
  reported_ = message;
  return message;
}

void JobSession::shutdown() {
  if (!world_) return;
  world_->barrier()->wait(timeout_);
  watchdog_->stop();
  world_->barrier()->wait(timeout_);
}

}  // namespace sb
