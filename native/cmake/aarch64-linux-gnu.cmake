# Cross-compiling native/ for aarch64 Linux with Debian's g++-aarch64-linux-gnu; the binaries run under
# qemu-user (qemu-aarch64-static), which CMAKE_CROSSCOMPILING_EMULATOR lets ctest use directly:
#   cmake -S native/tests -B /tmp/spmd-arm64 --toolchain native/cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The target's libraries live in Debian's multiarch sysroot; the host's must not be picked up.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(SPMD_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(SPMD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SPMD_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
