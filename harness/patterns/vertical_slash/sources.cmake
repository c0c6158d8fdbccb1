# Vertical-slash's harness side (harness/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES vertical_slash_plugin.cpp vertical_slash_simulation.cpp vertical_slash_pattern_fit.cpp)
