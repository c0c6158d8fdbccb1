# MoBA's harness side (harness/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES moba_plugin.cpp moba_simulation.cpp moba_coverage_fit.cpp)
