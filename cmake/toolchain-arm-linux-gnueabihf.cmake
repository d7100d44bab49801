# Cross-compiling pcpu for 32-bit Arm Linux (ARMv7, hard-float) with Debian's cross toolchain
# (gcc-arm-linux-gnueabihf, libc6-dev-armhf-cross, binutils-arm-linux-gnueabihf;
# scripts/install-deps.sh installs them):
#
#   cmake -S . -B build-armv7 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm-linux-gnueabihf.cmake \
#         -DCMAKE_EXE_LINKER_FLAGS=-static
#
# The binaries run on ARMv7 hardware, or under qemu-system-arm with a
# kernel that has rseq (user-mode qemu-arm answers rseq() with ENOSYS,
# so there they only run the fallback path). A C++ cross compiler is used
# where one is installed (g++-arm-linux-gnueabihf): it builds the C++ tests;
# without it they are left out (CMakeLists.txt enables C++ only then).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7l)

set(PCPU_CROSS_TRIPLET arm-linux-gnueabihf)
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
