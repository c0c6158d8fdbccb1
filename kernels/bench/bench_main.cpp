// Entry point of the kernel microbenchmarks: states the context every result depends
// on (LibTorch version, build type, threads), loudly when timings are not meaningful.
// The line goes to stderr so that --benchmark_format=json keeps stdout parseable; the
// same facts enter the reporters' context block.

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/headeronly/version.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
#ifdef NDEBUG
  const std::string build = "optimized (NDEBUG)";
#else
  const std::string build = "DEBUG (NDEBUG not defined)";
#endif
#ifdef SB_WITH_CUDA
  const std::string cuda = "compiled in";
#else
  const std::string cuda = "not compiled";
#endif
  const std::string threads = std::to_string(at::get_num_threads());
  std::fprintf(
      stderr,
      "sb_bench_kernels: LibTorch %s, build %s, ATen intra-op threads %s, CUDA kernels %s\n",
      TORCH_VERSION, build.c_str(), threads.c_str(), cuda.c_str());
#ifndef NDEBUG
  std::fprintf(stderr,
               "***WARNING*** sb_bench_kernels was built without NDEBUG: timings are not "
               "representative. Rebuild with -DCMAKE_BUILD_TYPE=Release.\n");
#endif

  benchmark::AddCustomContext("libtorch_version", TORCH_VERSION);
  benchmark::AddCustomContext("sb_build", build);
  benchmark::AddCustomContext("aten_threads", threads);
  benchmark::AddCustomContext("sb_cuda_kernels", cuda);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
