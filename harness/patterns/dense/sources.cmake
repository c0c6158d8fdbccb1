# Dense attention's harness side (harness/CMakeLists.txt reads this list).
set(SB_PATTERN_SOURCES dense_plugin.cpp dense_simulation.cpp)
