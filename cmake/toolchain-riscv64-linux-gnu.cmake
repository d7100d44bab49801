# Cross-compiling pcpu for 64-bit RISC-V Linux with Debian's cross toolchain
# (gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross, binutils-riscv64-linux-gnu;
# scripts/install-deps.sh installs them):
#
#   cmake -S . -B build-riscv64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-riscv64-linux-gnu.cmake \
#         -DCMAKE_EXE_LINKER_FLAGS=-static
#
# The binaries run on riscv64 hardware, or under qemu-system-riscv64 with a
# kernel that has rseq (user-mode qemu-riscv64 answers rseq() with ENOSYS,
# so there they only run the fallback path). A C++ cross compiler is used
# where one is installed (g++-riscv64-linux-gnu): it builds the C++ tests;
# without it they are left out (CMakeLists.txt enables C++ only then).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(PCPU_CROSS_TRIPLET riscv64-linux-gnu)
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
