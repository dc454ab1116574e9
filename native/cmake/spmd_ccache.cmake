# Compiles through ccache where it is installed and its cache can be written: a build again after MPI or nvcc
# was installed, a second build folder (MPICH's beside Open MPI's), or the installed package's own build then
# compile only what differs from a build made before. Paths under the package root are hashed relative to the
# build folder (base_dir), so a copy of the package elsewhere hits the same cache. -DSPMD_CCACHE=OFF compiles
# directly.
option(SPMD_CCACHE "Compile through ccache when it is installed" ON)
find_program(SPMD_CCACHE_PROGRAM ccache)
if(CMAKE_CXX_COMPILER_LAUNCHER)
  spmd_part("ccache" "not used (CMAKE_CXX_COMPILER_LAUNCHER is set)")
elseif(NOT SPMD_CCACHE)
  spmd_part("ccache" "not used (SPMD_CCACHE=OFF)")
elseif(NOT SPMD_CCACHE_PROGRAM)
  spmd_part("ccache" "not found (compiles directly)")
else()
  get_filename_component(spmd_root ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
  set(spmd_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${spmd_root} ${SPMD_CCACHE_PROGRAM})
  # A cache it cannot write (a read-only HOME) fails every compile: tried once here, on an empty source.
  set(probe ${CMAKE_BINARY_DIR}/spmd_ccache_probe)
  file(WRITE ${probe}.cc "")
  execute_process(COMMAND ${spmd_launcher} ${CMAKE_CXX_COMPILER} -c ${probe}.cc -o ${probe}.o
    RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE out)
  file(REMOVE ${probe}.cc ${probe}.o)
  if(failed)
    string(STRIP "${out}" out)
    spmd_part("ccache" "not used (${out})")
  else()
    set(CMAKE_CXX_COMPILER_LAUNCHER ${spmd_launcher})
    set(CMAKE_C_COMPILER_LAUNCHER ${spmd_launcher})
    spmd_part("ccache" "used (${SPMD_CCACHE_PROGRAM})")
  endif()
endif()
