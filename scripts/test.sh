#!/usr/bin/env bash
# Builds minfer and runs every test: the C tests (ctest) in a release build (on AVX-512 machines
# also with the AVX2 kernels), the end-to-end tests (pytest; the server's with the openai client and
# nginx), the C tests and the server tests again in an AddressSanitizer + UndefinedBehaviorSanitizer
# build, the C tests in a clang release build, every libFuzzer
# target for FUZZ_SECONDS (default 60) each, and on x86-64 an arm64 cross build whose kernel and
# format tests run under qemu (MINFER_SKIP_ARM64=1 skips that stage).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)

# "== C tests (WHAT, ISA avx512-vnni; CPU: ...)": the kernel level the program BIN picks here (under
# the caller's MINFER_ISA) and the processor, so the log says what the tests ran on.
ctest_banner() {
  local isa cpu
  isa=$("$2" --version | sed -n 's/^cpu kernels: //p')
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n1)
  echo "== C tests ($1, ISA ${isa:-unknown}; CPU: ${cpu:-$(uname -m)})"
}

echo "== release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest_banner release build/minfer
(cd build && ctest --output-on-failure -j"$jobs")
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
  # The AVX-512 kernels serve by default here; the AVX2 ones (and the portable attention) too.
  MINFER_ISA=avx2 ctest_banner "release, MINFER_ISA=avx2" build/minfer
  (cd build && MINFER_ISA=avx2 ctest --output-on-failure -j"$jobs")
fi

if compgen -G "tests/py/test_*.py" >/dev/null; then
  echo "== end-to-end tests"
  MINFER_BIN="$PWD/build/minfer" MINFER_FIXTURES="$(cd .. && pwd)/shared/fixtures" \
    python3 -m pytest -q tests/py
fi

echo "== ASan + UBSan build"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINFER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ctest_banner "ASan + UBSan" build-asan/minfer
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 MINFER_SANITIZED=1 ctest --output-on-failure -j"$jobs")
# The server under the sanitizers: every hostile-client and OpenAI-client test on the fixture
# model; a leak or a sanitizer report makes the server's exit status non-zero, which fails the test.
echo "== server tests, ASan + UBSan build"
ASAN_OPTIONS=detect_leaks=1 MINFER_SANITIZED=1 MINFER_BIN="$PWD/build-asan/minfer" \
  MINFER_FIXTURES="$(cd .. && pwd)/shared/fixtures" \
  python3 -m pytest -q tests/py/test_serve.py tests/py/test_serve_robust.py tests/py/test_serve_contract.py -k "not smollm2"

# The downloader under the sanitizers: pull, resume, faults and references against the hub mocks.
echo "== hub tests, ASan + UBSan build"
ASAN_OPTIONS=detect_leaks=1 MINFER_SANITIZED=1 MINFER_BIN="$PWD/build-asan/minfer" \
  MINFER_FIXTURES="$(cd .. && pwd)/shared/fixtures" python3 -m pytest -q tests/py/test_hub.py

echo "== clang release build"
cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build build-clang -j"$jobs"
ctest_banner "clang release" build-clang/minfer
# On AVX-512 the float weights take the other kernels here than by default (the AVX2 ones where
# 512-bit operations run whole, the AVX-512 ones on Zen 4: mf_simd_avx512_narrow), so that both
# serve whole models in the tests on any AVX-512 machine.
float_kernels=
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
  if [ "$(grep -m1 '^cpu family' /proc/cpuinfo | tr -dc 0-9)" = 25 ] && grep -qw AuthenticAMD /proc/cpuinfo; then
    float_kernels=avx512
  else
    float_kernels=avx2
  fi
  echo "   (float weights on the $float_kernels kernels: MINFER_AVX512_FLOAT=$float_kernels)"
fi
(cd build-clang && MINFER_AVX512_FLOAT=$float_kernels ctest --output-on-failure -j"$jobs")

# Every fuzz target (CMakeLists.txt, mf_fuzz) in turn; a crash, leak, sanitizer report or hang fails the
# run. The per-input progress lines (NEW, REDUCE, the suggested dictionary) are left out of the log.
echo "== fuzzing (libFuzzer, ASan + UBSan, ${FUZZ_SECONDS:-60} s per target)"
cmake -S . -B build-fuzz -DMINFER_FUZZ=ON -DCMAKE_C_COMPILER=clang >/dev/null
FUZZ_SECONDS=${FUZZ_SECONDS:-60} cmake --build build-fuzz -j"$jobs" --target fuzz-all 2>&1 |
  grep -v -E '^(#[0-9]+[[:space:]]+(NEW|REDUCE|pulse) |[[:space:]]+NEW_FUNC|"|###### )'

if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== CUDA build (compile and link only; runs where a GPU is present)"
  PATH="$PATH:/usr/local/cuda/bin" cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DMINFER_CUDA=ON >/dev/null
  PATH="$PATH:/usr/local/cuda/bin" cmake --build build-cuda -j"$jobs" --target minfer_cli
  build-cuda/minfer --version
fi

if [ "$(uname -m)" = x86_64 ] && [ "${MINFER_SKIP_ARM64:-0}" != 1 ]; then
  echo "== arm64 build, kernel and format tests under qemu (NEON)"
  bash scripts/cross-arm64.sh -R 'test_(core|simd|simd_models|quant|gguf|gguf_hostile|tok|sample|sample_stop|jinja|model_order)$'
fi
echo "all tests passed"
