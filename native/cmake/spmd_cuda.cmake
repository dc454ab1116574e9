# The CUDA kernels (src/kernels/cuda/*.cu), compiled by nvcc into one fatbin per file and embedded in a
# generated source, so the addon carries them and launches them through the driver API at run time
# (backends/library/cuda_kernels.h): nvcc is needed only here, at build time, and no CUDA library at link
# time. Without nvcc, or with -DSPMD_CUDA=OFF, the generated source embeds none: the build succeeds, and a
# device op that needs the kernels says the build has none.
#
# spmd_cuda_kernels(<var>) sets <var> to the generated source, and SPMD_CUDA_KERNELS to ON or OFF.
include(${CMAKE_CURRENT_LIST_DIR}/spmd_parts.cmake)
option(SPMD_CUDA "Build the CUDA kernels when nvcc is found" ON)
set(SPMD_CUDA_ARCHS "80;90" CACHE STRING "GPU architectures for the CUDA kernels: SASS for each, PTX for the newest too")

function(spmd_cuda_kernels out)
  set(src ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../src)
  set(dir ${CMAKE_BINARY_DIR}/cuda)
  set(generated ${dir}/spmd_fatbins.cc)
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_fatbins.cmake)
  file(MAKE_DIRECTORY ${dir})
  if(SPMD_CUDA)
    find_program(SPMD_NVCC nvcc HINTS ENV CUDACXX PATHS /usr/local/cuda/bin)
  endif()
  if(NOT SPMD_CUDA OR NOT SPMD_NVCC)
    if(SPMD_CUDA)
      spmd_part("CUDA kernels" "skipped (no nvcc found: on PATH, in CUDACXX or /usr/local/cuda/bin)")
    else()
      spmd_part("CUDA kernels" "skipped (SPMD_CUDA=OFF)")
    endif()
    execute_process(COMMAND ${CMAKE_COMMAND} -DOUT=${generated} -DFATBINS= -DARCHS= -P ${script})
    set(${out} ${generated} PARENT_SCOPE)
    set(SPMD_CUDA_KERNELS OFF PARENT_SCOPE)
    return()
  endif()

  set(gencode "")
  set(archs "")
  list(GET SPMD_CUDA_ARCHS -1 newest)
  foreach(arch IN LISTS SPMD_CUDA_ARCHS)
    if(arch STREQUAL newest)
      list(APPEND gencode -gencode arch=compute_${arch},code=[sm_${arch},compute_${arch}])
      string(APPEND archs "sm_${arch} compute_${arch}")
    else()
      list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
      string(APPEND archs "sm_${arch} ")
    endif()
  endforeach()
  spmd_part("CUDA kernels" "built (${SPMD_NVCC}: ${archs})")

  file(GLOB sources CONFIGURE_DEPENDS ${src}/kernels/cuda/*.cu)
  set(headers ${src}/kernels/cuda/common.cuh ${src}/kernels/cuda/kernel_args.h ${src}/base/half_bits.h)
  set(fatbins "")
  foreach(cu IN LISTS sources)
    get_filename_component(stem ${cu} NAME_WE)
    set(fatbin ${dir}/${stem}.fatbin)
    # -fmad=false: no fused multiply-add, as the host build's -ffp-contract=off, so results match the CPU's bits.
    add_custom_command(OUTPUT ${fatbin}
      COMMAND ${SPMD_NVCC} -std=c++17 -O3 -fmad=false -I${src} -fatbin ${gencode} -o ${fatbin} ${cu}
      DEPENDS ${cu} ${headers}
      COMMENT "nvcc ${stem}.cu -> ${stem}.fatbin (${archs})"
      VERBATIM)
    list(APPEND fatbins ${fatbin})
  endforeach()
  add_custom_command(OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -DOUT=${generated} "-DFATBINS=${fatbins}" "-DARCHS=${archs}" -P ${script}
    DEPENDS ${fatbins} ${script}
    COMMENT "embedding the CUDA fatbins"
    VERBATIM)
  set(${out} ${generated} PARENT_SCOPE)
  set(SPMD_CUDA_KERNELS ON PARENT_SCOPE)
endfunction()
