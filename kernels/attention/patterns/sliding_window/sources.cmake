# Sliding-window attention with sinks (kernels/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES
  sliding_window_reference.cpp
  sliding_window_attention.cpp
  sliding_window_coverage.cpp
  sliding_window_backend.cpp
  sliding_window_ring_selector.cpp
  sliding_window_work_model.cpp
  sliding_window_pattern.cpp)
