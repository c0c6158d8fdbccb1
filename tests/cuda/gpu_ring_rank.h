#pragma once
// One rank of the GPU ring over processes (test_ring_attention_processes_cuda.cpp): the
// test starts this binary twice with `--gpu-ring-rank OUT_DIR` and torchrun's variables
// (cuda_test_main.cpp hands such a call here instead of to GoogleTest).

#include <string>

namespace sb::test {

// Runs every case of gpu_process_ring_cases() as this rank (RANK, WORLD_SIZE,
// MASTER_ADDR/PORT; SB_DIST_TIMEOUT_MS), its ring over Gloo through host memory as
// ranks sharing one GPU train, and writes OUT_DIR/<case>-rank<r>.safetensors: out, lse,
// dq, dk, dv (this rank's tokens) and, for vertical-slash, the index it built. Ends the
// process (std::_Exit: no teardown handshake with a rank that may be gone): 0, or 1 with
// the error on stderr.
[[noreturn]] void run_gpu_ring_rank(const std::string& out_dir);

}  // namespace sb::test
