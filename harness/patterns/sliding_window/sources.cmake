# Sliding-window attention's harness side (harness/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES sliding_window_plugin.cpp sliding_window_simulation.cpp)
