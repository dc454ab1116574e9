# The native floors (docs/ARCHITECTURE.md), bottom to top. Each is a static library of its folder's sources
# that links the floor below it, and each sees only its own floor and the floors below: its include root
# (build/floors/<floor>) holds links to those folders alone, so a source that includes a floor above its own
# fails to compile. Headers that no source of their floor includes are held to the same rule by
# check_floors.cmake, which runs on every build before the lowest floor compiles.
#
# spmd_floors(<with_mpi>) defines spmd_base ... spmd_backends, which the C++ tests link, and SPMD_ADDON_INCLUDE,
# the root the Node-API addon (addon/, the top floor) compiles against.
set(SPMD_FLOORS base kernels algorithms estimating runtime backends)
set(SPMD_FLOOR_DIRS
  "base"
  "kernels/cpu"
  "algorithms"
  "estimating"
  "runtime"
  "backends/shm,backends/tcp,backends/hybrid,backends/library,backends/nccl,backends/hccl")

function(spmd_floors with_mpi)
  set(src ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../src)
  add_custom_target(spmd_floor_check
    COMMAND ${CMAKE_COMMAND} -DSRC=${src} "-DFLOORS=${SPMD_FLOORS};addon" -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/check_floors.cmake
    COMMENT "checking that no native include points to a floor above its own"
    VERBATIM)
  set(below "")
  set(visible "")
  foreach(floor dirs IN ZIP_LISTS SPMD_FLOORS SPMD_FLOOR_DIRS)
    list(APPEND visible ${floor})
    set(root ${CMAKE_BINARY_DIR}/floors/${floor})
    file(REMOVE_RECURSE ${root})
    file(MAKE_DIRECTORY ${root})
    foreach(v IN LISTS visible)
      file(CREATE_LINK ${src}/${v} ${root}/${v} SYMBOLIC)
    endforeach()

    string(REPLACE "," ";" dirs "${dirs}")
    set(globs "")
    foreach(d IN LISTS dirs)
      list(APPEND globs ${src}/${d}/*.cc)
    endforeach()
    list(APPEND globs ${src}/${floor}/*.cc)
    file(GLOB sources CONFIGURE_DEPENDS ${globs})
    list(REMOVE_DUPLICATES sources)
    add_library(spmd_${floor} STATIC ${sources})
    # Hidden: the addon exports its module entry alone, so a call from one floor into another binds inside
    # the .node instead of going through the PLT (a stub and a GOT line more per call, cold after every
    # context switch where ranks share a core).
    set_target_properties(spmd_${floor} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    target_include_directories(spmd_${floor} PUBLIC ${root})
    # -ffp-contract=off: where the target has fused multiply-add (aarch64; x86-64 with -march) GCC would fuse
    # a*b + c, and the quantized allreduce's results would no longer match a reference that rounds each operation.
    target_compile_options(spmd_${floor} PRIVATE -O3 -Wall -Wextra -ffp-contract=off)
    if(below)
      target_link_libraries(spmd_${floor} PUBLIC spmd_${below})
    else()
      add_dependencies(spmd_${floor} spmd_floor_check)
    endif()
    set(below ${floor})
  endforeach()

  # The addon's root: every floor and addon/ itself (no floor links the addon).
  set(root ${CMAKE_BINARY_DIR}/floors/addon)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  foreach(v IN LISTS visible ITEMS addon)
    file(CREATE_LINK ${src}/${v} ${root}/${v} SYMBOLIC)
  endforeach()
  set(SPMD_ADDON_INCLUDE ${root} PARENT_SCOPE)

  find_package(Threads REQUIRED)
  target_link_libraries(spmd_base PUBLIC Threads::Threads)
  # dl: the nccl backend opens NCCL, the CUDA runtime and driver at run time (hccl: HCCL and ACL), so none is
  # needed to build or load.
  target_link_libraries(spmd_backends PUBLIC rt ${CMAKE_DL_LIBS})
  # The CUDA kernels, embedded as fatbins when nvcc is found (cmake/spmd_cuda.cmake); the addon never links CUDA.
  include(${CMAKE_CURRENT_FUNCTION_LIST_DIR}/spmd_cuda.cmake)
  spmd_cuda_kernels(fatbin_source)
  target_sources(spmd_backends PRIVATE ${fatbin_source})
  set(SPMD_CUDA_KERNELS ${SPMD_CUDA_KERNELS} PARENT_SCOPE)

  if(with_mpi)
    file(GLOB mpi_sources CONFIGURE_DEPENDS ${src}/backends/mpi/*.cc)
    target_sources(spmd_backends PRIVATE ${mpi_sources})
    # OMPI_SKIP_MPICXX / MPICH_SKIP_MPICXX: C++ sources must not pull in the deprecated C++ bindings.
    set(definitions SPMD_HAVE_MPI OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
    # MPI's headers and definitions reach the floor's MPI sources and what links the floor (the addon), not
    # the floor's other sources: MPI installed after a build then recompiles the MPI backend and the addon
    # alone, not every backend.
    target_compile_definitions(spmd_backends INTERFACE ${definitions})
    target_link_libraries(spmd_backends INTERFACE MPI::MPI_C)
    get_target_property(includes MPI::MPI_C INTERFACE_INCLUDE_DIRECTORIES)
    get_target_property(options MPI::MPI_C INTERFACE_COMPILE_OPTIONS)
    set_property(SOURCE ${mpi_sources} APPEND PROPERTY COMPILE_DEFINITIONS ${definitions})
    if(includes)
      set_property(SOURCE ${mpi_sources} APPEND PROPERTY INCLUDE_DIRECTORIES ${includes})
    endif()
    if(options)
      set_property(SOURCE ${mpi_sources} APPEND PROPERTY COMPILE_OPTIONS ${options})
    endif()
  endif()
endfunction()
