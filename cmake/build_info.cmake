# Generates build_info.cpp with the git SHA (and whether the tree was dirty) at every
# build, rewriting the file only when the text changes so nothing else recompiles.
set(SB_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(sb_build_info_gen
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${SB_BUILD_INFO_CPP}
          -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -DSB_VERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${SB_BUILD_INFO_CPP}
  COMMENT "Recording git SHA"
  VERBATIM)
