# Cross-compiling pcpu for 64-bit Arm Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, binutils-aarch64-linux-gnu;
# scripts/install-deps.sh installs them):
#
#   cmake -S . -B build-aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
#         -DCMAKE_EXE_LINKER_FLAGS=-static
#
# The binaries run on arm64 hardware, or under qemu-system-aarch64 with a
# kernel that has rseq (user-mode qemu-aarch64 answers rseq() with ENOSYS,
# so there they only run the fallback path). A C++ cross compiler is used
# where one is installed (g++-aarch64-linux-gnu): it builds the C++ tests;
# without it they are left out (CMakeLists.txt enables C++ only then).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(PCPU_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${PCPU_CROSS_TRIPLET}-gcc)
find_program(PCPU_CROSS_CXX ${PCPU_CROSS_TRIPLET}-g++)
if(PCPU_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${PCPU_CROSS_CXX})
endif()

# Libraries and headers of the target only from the cross sysroot; programs
# (python3, the build tools) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${PCPU_CROSS_TRIPLET})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
