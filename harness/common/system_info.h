#pragma once
// What this process runs on and was built with: the context every result carries
// (context.json) and what `sparsebalance version` prints.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace sb {

// host, cpu_model, cpu_cores, memory_gib, gpus[], driver, cuda_runtime, nccl,
// gloo, libtorch, compiler, git_sha, git_dirty, build_type, intra_op_threads.
nlohmann::json collect_system_info();

// A warning to print when the build is not optimised (timings would mislead); empty otherwise.
std::string debug_build_warning();

// The NCCL version LibTorch was built with ("2.27.5"), "none" in a CPU-only build.
std::string nccl_version_string();

// The running executable's path (/proc/self/exe).
std::string current_executable();

// The CPU cores online on this machine (at least 1).
int64_t cpu_core_count();

// This machine's memory (MemTotal), GiB; 0 when it cannot be read.
double host_memory_gib();

// This machine's host name ("unknown" when it cannot be read).
std::string this_host_name();

// The intra-op threads of one rank: `configured` when positive (train.threads), else the
// cores shared evenly among the ranks on this host (at least 1).
int64_t rank_thread_count(int64_t configured, int64_t ranks_on_host);
// What a rank sets its intra-op threads to: rank_thread_count when train.threads is set
// or ranks share the host; nullopt keeps LibTorch's default (one rank alone).
std::optional<int64_t> intra_op_threads_to_set(int64_t configured, int64_t ranks_on_host);

}  // namespace sb
