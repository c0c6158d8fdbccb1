# MoBA (kernels/CMakeLists.txt reads these lists).
set(SB_PATTERN_SOURCES
  moba_routing_cpu.cpp
  moba_token_routing.cpp
  moba_token_varlen_plan.cpp
  moba_token_attention_cpu.cpp
  moba_attention_cpu.cpp
  moba_attention.cpp
  moba_attention_backend.cpp
  moba_reference.cpp
  moba_attended_pairs.cpp
  moba_varlen_attention.cpp
  moba_key_blocks.cpp
  moba_ring_selector.cpp
  moba_ring_work.cpp
  moba_coverage_model.cpp
  moba_pattern.cpp)
set(SB_PATTERN_CUDA_SOURCES
  cuda/moba_routing_cuda.cu
  cuda/moba_varlen_index_cuda.cu
  cuda/moba_key_blocks_cuda.cu
  cuda/moba_attention_cuda.cpp)
set(SB_PATTERN_OPENMP_SOURCES moba_routing_cpu.cpp moba_attention_cpu.cpp moba_token_routing.cpp moba_token_attention_cpu.cpp)
