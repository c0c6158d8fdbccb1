#include "harness/runner/local_launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <random>
#include <cstring>
#include <map>
#include <ostream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

}  // namespace

namespace {

// Whether `port` can be bound on loopback now (0: any; `bound` receives the one taken).
bool bindable(int port, int* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("launcher: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (ok) *bound = ntohs(addr.sin_port);
  return ok;
}

// The first port of the kernel's ephemeral range (what bind(0) and outgoing connections
// take), 32768 when it cannot be read. A range that starts at 1024 or below leaves no
// room under it: free_loopback_port then takes bind(0)'s port.
int ephemeral_low() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (range >> low >> high && low > 0) return low;
  return 32768;
}

}  // namespace

int free_loopback_port() {
  // Drawn below the ephemeral range: a port the kernel handed out by bind(0) and that was
  // released can be taken by any outgoing connection before rank 0 binds it again (Gloo
  // opens many; seen as EADDRINUSE under ctest -j2). Below the range only an explicit
  // bind competes, such as another launcher's draw from the same 10000 ports.
  const int low = ephemeral_low();
  const int first = std::max(1025, low - 10000);
  if (first + 100 < low) {  // else the range starts too low to leave room below it
    std::mt19937 draw(static_cast<uint32_t>(std::random_device{}()) ^ static_cast<uint32_t>(::getpid()));
    std::uniform_int_distribution<int> pick(first, low - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      int bound = 0;
      if (bindable(pick(draw), &bound)) return bound;
    }
  }
  int bound = 0;
  if (!bindable(0, &bound)) throw std::runtime_error("launcher: cannot find a free loopback port");
  return bound;
}

std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (overrides.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  return env;
}

namespace {

struct Rank {
  pid_t pid = -1;
  int output = -1;      // read end of the rank's stdout+stderr pipe; -1 once closed
  std::string pending;  // a partial line
  std::string last_line;
  bool running = true;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "ended with status " + std::to_string(status);
}

Rank spawn_rank(const LaunchOptions& options, int rank, int port, pid_t group) {
  std::vector<std::string> env = environment_with({
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(options.world_size)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.world_size)},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(port)},
      {"SB_LAUNCHER_PID", std::to_string(::getpid())}});
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.arguments;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("launcher: pipe() failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, group);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  Rank r;
  const int rc = ::posix_spawn(&r.pid, args[0].c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    throw std::runtime_error("launcher: cannot start " + args[0] + ": " + std::strerror(rc));
  }
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  r.output = pipe_fds[0];
  return r;
}

// Moves complete lines of rank `index` to the log, prefixed.
void drain(Rank& r, int index, std::ostream& log, bool flush_partial) {
  if (r.output >= 0) {
    char buffer[4096];
    while (true) {  // the pipe is non-blocking: read what is there
      const ssize_t n = ::read(r.output, buffer, sizeof(buffer));
      if (n > 0) {
        r.pending.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || errno != EAGAIN) {
        ::close(r.output);
        r.output = -1;
      }
      break;
    }
  }
  size_t newline;
  while ((newline = r.pending.find('\n')) != std::string::npos) {
    const std::string line = r.pending.substr(0, newline);
    log << "[rank " << index << "] " << line << '\n';
    if (!line.empty()) r.last_line = line;
    r.pending.erase(0, newline + 1);
  }
  if (flush_partial && !r.pending.empty()) {
    log << "[rank " << index << "] " << r.pending << '\n';
    r.last_line = r.pending;
    r.pending.clear();
  }
  log.flush();
}

}  // namespace

bool started_by_local_launcher() {
  const char* launcher = std::getenv("SB_LAUNCHER_PID");
  return launcher != nullptr && *launcher != '\0';
}

void arm_parent_death_signal() {
  if (!started_by_local_launcher()) return;
  const char* launcher = std::getenv("SB_LAUNCHER_PID");
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died before prctl took effect.
  if (::getppid() != static_cast<pid_t>(std::atoll(launcher))) std::_Exit(1);
}

int launch_local_ranks(const LaunchOptions& options, std::ostream& log) {
  if (options.world_size < 1 || options.arguments.empty()) {
    throw std::invalid_argument("launch_local_ranks: need world_size >= 1 and an executable");
  }
  struct sigaction action{}, old_int{}, old_term{};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  g_interrupted = 0;
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  const int port = free_loopback_port();
  std::vector<Rank> ranks;
  pid_t group = 0;
  int exit_code = 0;
  std::string failure;
  bool stopping = false;
  Clock::time_point kill_at;
  const auto stop_all = [&](int signal) {
    // The group reaches whatever the ranks started themselves, too.
    if (group > 0) ::kill(-group, signal);
    for (const Rank& r : ranks) {
      if (r.running) ::kill(r.pid, signal);
    }
    // A stopped rank acts on SIGTERM only once resumed.
    if (signal == SIGTERM && group > 0) ::kill(-group, SIGCONT);
  };
  try {
    for (int rank = 0; rank < options.world_size; ++rank) {
      ranks.push_back(spawn_rank(options, rank, port, group));
      if (group == 0) group = ranks.front().pid;  // the others join the first rank's group
    }
  } catch (...) {
    stop_all(SIGKILL);
    for (Rank& r : ranks) ::waitpid(r.pid, nullptr, 0);
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }

  while (true) {
    std::vector<pollfd> fds;
    std::vector<int> owners;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].output >= 0) {
        fds.push_back({ranks[i].output, POLLIN, 0});
        owners.push_back(static_cast<int>(i));
      }
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents != 0) drain(ranks[static_cast<size_t>(owners[k])], owners[k], log, false);
    }
    bool any_running = false;
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      if (!r.running) continue;
      if (::waitpid(r.pid, &r.status, WNOHANG) == r.pid) {
        r.running = false;
        const bool ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
        if (!ok && failure.empty()) {
          drain(r, static_cast<int>(i), log, true);
          failure = options.describe_rank(static_cast<int>(i)) + " " + describe_status(r.status);
          if (WIFEXITED(r.status) && !r.last_line.empty()) failure += " (last output: \"" + r.last_line + "\")";
          exit_code = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 ? 2 : 1;
        }
      } else {
        any_running = true;
      }
    }
    if (!stopping && (g_interrupted || !failure.empty()) && any_running) {
      if (failure.empty()) {
        failure = "interrupted";
        exit_code = 1;
      }
      stopping = true;
      kill_at = Clock::now() + options.grace;
      stop_all(SIGTERM);
    }
    if (stopping && any_running && Clock::now() >= kill_at) stop_all(SIGKILL);
    if (!any_running) break;
  }
  // What the ranks wrote last; a process they left behind may hold a pipe open, so
  // read what is there rather than wait for the end of the stream.
  for (size_t i = 0; i < ranks.size(); ++i) {
    drain(ranks[i], static_cast<int>(i), log, true);
    if (ranks[i].output >= 0) ::close(ranks[i].output);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (g_interrupted && failure.empty()) {
    failure = "interrupted";
    exit_code = 1;
  }
  if (!failure.empty()) {
    log << "error: " << failure << "; stopped the other ranks (" << options.world_size << " in all)\n";
  }
  return exit_code;
}

}  // namespace sb
