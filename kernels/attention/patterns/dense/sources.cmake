# Dense causal attention (kernels/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES
  dense_causal_attention.cpp
  dense_ring_selector.cpp
  dense_pattern.cpp)
