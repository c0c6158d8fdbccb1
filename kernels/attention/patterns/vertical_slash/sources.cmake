# MTraining's vertical-slash pattern (kernels/CMakeLists.txt reads these lists).
set(SB_PATTERN_SOURCES
  vertical_slash_index.cpp
  vertical_slash_index_on_device.cpp
  vertical_slash_blocks.cpp
  vertical_slash_budget.cpp
  vertical_slash_sharded_budget.cpp
  vertical_slash_reference.cpp
  vertical_slash_attention_cpu.cpp
  vertical_slash_backend.cpp
  vertical_slash_block_sparse_plan.cpp
  vertical_slash_ring_sums.cpp
  vertical_slash_ring_index.cpp
  vertical_slash_ring_budget.cpp
  vertical_slash_ring_pattern.cpp
  vertical_slash_ring_selector.cpp
  vertical_slash_ring_work.cpp
  vertical_slash_pattern_model.cpp
  vertical_slash_pattern.cpp)
set(SB_PATTERN_CUDA_SOURCES cuda/vertical_slash_attention_cuda.cpp)
set(SB_PATTERN_OPENMP_SOURCES vertical_slash_attention_cpu.cpp vertical_slash_budget.cpp)
