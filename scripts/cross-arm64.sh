#!/usr/bin/env bash
# Cross-compiles minfer for arm64 (Debian's aarch64-linux-gnu toolchain) and runs the C tests under
# qemu-user, so the NEON kernels are checked against the scalar references on an x86 machine.
#   scripts/cross-arm64.sh                 # every C test
#   scripts/cross-arm64.sh -R 'simd|quant'  # extra arguments go to ctest
# Tests that start other programs (the minfer binary, or themselves) run them through
# MINFER_TEST_WRAPPER, the same qemu command line, since containers rarely have binfmt_misc.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
# The arm64 libraries the build links (the engine: jansson; the programs: libmicrohttpd, libcurl,
# libcrypto, libxxhash, libedit), each by its pkg-config file.
arm_pc=(jansson:libjansson-dev libmicrohttpd:libmicrohttpd-dev libcurl:libcurl4-openssl-dev
        libcrypto:libssl-dev libxxhash:libxxhash-dev libedit:libedit-dev)
for e in "${arm_pc[@]}"; do
  if [ ! -e "/usr/lib/aarch64-linux-gnu/pkgconfig/${e%%:*}.pc" ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || ${SUDO:-} dpkg --add-architecture arm64
    need+=("${e#*:}:arm64")
  fi
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  ${SUDO:-} apt-get update -qq
  DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq "${need[@]}" >/dev/null
fi

sysroot=/usr/aarch64-linux-gnu
emu="qemu-aarch64 -L $sysroot"
echo "== arm64 cross build"
# -fno-tree-vectorize: Debian's aarch64 GCC 12 crashes (internal compiler error in
# vect_transform_reduction) on some float reduction loops at -O2/-O3; the NEON kernels use
# intrinsics and do not depend on the auto-vectorizer.
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
cmake -S . -B build-arm64 -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc \
  -DCMAKE_C_FLAGS=-fno-tree-vectorize \
  -DCMAKE_FIND_ROOT_PATH=$sysroot -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER \
  -DCMAKE_CROSSCOMPILING_EMULATOR="qemu-aarch64;-L;$sysroot" >/dev/null
# keep going past a target that fails to build: its tests then fail in ctest, the others still run
cmake --build build-arm64 -j"$(nproc)" -- -k || echo "cross-arm64: some targets failed to build (see above)"

isa=$($emu build-arm64/minfer --version 2>/dev/null | sed -n 's/^cpu kernels: //p' || true)
echo "== C tests (arm64 under qemu-aarch64, ISA ${isa:-unknown}; CPU: emulated on $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1))"
export MINFER_TEST_WRAPPER="$emu"
(cd build-arm64 && ctest --output-on-failure "$@")
