# Cross-compiling pcpu for 64-bit Arm Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, binutils-aarch64-linux-gnu;
# scripts/install-deps.sh installs them):
#
#   cmake -S . -B build-aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
#         -DCMAKE_EXE_LINKER_FLAGS=-static
#
# cmake/toolchain-cross.cmake with PCPU_CROSS_TRIPLET=aarch64-linux-gnu (it
# says what the binaries need to run, and how other targets are built).
set(PCPU_CROSS_TRIPLET aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/toolchain-cross.cmake)
