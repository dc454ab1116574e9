# The optional parts of a build (MPI backend, CUDA kernels) and why each was built or skipped, printed
# together at the end of the configure, and so by every build (`spmd-runner build`, `npm ci`), where nobody
# has to search CMake's output for them.
include_guard(GLOBAL)

function(spmd_part name what)
  set_property(GLOBAL APPEND PROPERTY SPMD_PARTS "${name}: ${what}")
endfunction()

function(spmd_print_parts)
  get_property(parts GLOBAL PROPERTY SPMD_PARTS)
  message(STATUS "spmd: optional parts of this build")
  foreach(part IN LISTS parts)
    message(STATUS "spmd:   ${part}")
  endforeach()
endfunction()
