# Cross-compiling pcpu for another Linux architecture with Debian's cross
# toolchain for it (gcc-<triplet>, libc6-dev-<arch>-cross, binutils-<triplet>;
# scripts/install-deps.sh installs those the emulated machines use), the
# triplet given as PCPU_CROSS_TRIPLET:
#
#   cmake -S . -B build-armhf -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-cross.cmake \
#         -DPCPU_CROSS_TRIPLET=arm-linux-gnueabihf -DCMAKE_EXE_LINKER_FLAGS=-static
#
# (aarch64-linux-gnu, arm-linux-gnueabihf, riscv64-linux-gnu: the machines of
# scripts/vm/; cmake/toolchain-aarch64-linux-gnu.cmake is this file for the
# first.) The binaries run on that hardware, or under qemu-system-<arch>
# with a kernel that has rseq (user-mode QEMU answers rseq() with ENOSYS, so
# there they only run the fallback path). A C++ cross compiler is used where
# one is installed (g++-<triplet>): it builds the C++ tests; without it they
# are left out (CMakeLists.txt enables C++ only then).
if(NOT PCPU_CROSS_TRIPLET)
  message(FATAL_ERROR "cmake/toolchain-cross.cmake: set PCPU_CROSS_TRIPLET (e.g. riscv64-linux-gnu)")
endif()
# try_compile() projects read this file again: pass the triplet on.
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PCPU_CROSS_TRIPLET)
set(CMAKE_SYSTEM_NAME Linux)
string(REGEX REPLACE "-.*" "" PCPU_CROSS_PROCESSOR "${PCPU_CROSS_TRIPLET}")
set(CMAKE_SYSTEM_PROCESSOR ${PCPU_CROSS_PROCESSOR})

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
