# Precompiled headers: most translation units include ATen, and parsing <ATen/ATen.h>
# alone takes about 5 s per unit on one core; compiled once per target set, it is read
# back in a fraction of that. SB_PCH=OFF builds without them.
#
# ccache caches units that use a precompiled header only with these sloppiness settings
# (its manual, "Precompiled headers"); compile_launcher.cmake passes them.
option(SB_PCH "Precompile the LibTorch and JSON headers most translation units include" ON)

set(SB_PCH_HEADERS
  ATen/ATen.h c10/core/GradMode.h nlohmann/json.hpp
  algorithm cstdint filesystem functional map memory optional string vector)

# The target compiles its own precompiled header, for its C++ units only (nvcc builds
# none). Each header is wrapped as "$<$<COMPILE_LANGUAGE:CXX>:<header$<ANGLE-R>>": a
# bare ">" would end the generator expression.
function(sb_precompile_headers target)
  if(SB_PCH)
    set(headers)
    foreach(header IN LISTS SB_PCH_HEADERS)
      list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:<${header}$<ANGLE-R>>")
    endforeach()
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()

# The target reuses `from`'s precompiled header: same compiler flags, one compilation.
function(sb_reuse_precompiled_headers target from)
  if(SB_PCH)
    target_precompile_headers(${target} REUSE_FROM ${from})
  endif()
endfunction()
