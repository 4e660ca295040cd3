#!/usr/bin/env bash
# The CUDA checks on a GPU machine (docs/cuda.md, "The device script"). Run from the repository
# root of a working tree that carries .device-deps/ (made here by tools/device/prepare.sh):
#
#   tools/device/cuda_check.sh [--step=all|configure|build|test|bench] [--cuda=ON|OFF]
#                              [--torch-prefix=DIR] [--jobs=N]
#
# Steps (each bounded by `timeout`, so a hang fails by name within the run tool's 600 s):
#   configure  CMake against the pip wheel's LibTorch (torch.utils.cmake_prefix_path, or
#              --torch-prefix) and the carried Debian libraries, TENSORDICT_CUDA and
#              TENSORDICT_CUDA_BENCHMARK as --cuda says (default ON), tests ON, Release;
#   build      only the CUDA tests (ctest label `cuda`) and the GPU benchmark, with --jobs
#              (default: every core);
#   test       ctest -L cuda, each test's gtest XML kept;
#   bench      tensordict_cuda_bench (benchmarks/cuda_bench.cc): ratios of median times.
# Everything it writes goes under $OUT (default .device-out/): logs per step, the test XML,
# environment.txt (GPU, driver, torch, compilers) and summary.txt (one line per step). The build
# tree is .device-build/ (not under $OUT: only results travel back). Exits non-zero at the
# first failed step.
#
# The carried libraries are Debian 12's: .device-deps/REQUIRES names the newest glibc and
# libstdc++ symbol versions they need, checked against this machine first. Their own shared
# dependencies (.device-deps/runtime) are used only where this machine has no library of
# that name.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${repo}"
step=all
cuda=ON
torch_prefix=""
jobs="$(nproc)"
for arg in "$@"; do
  case "${arg}" in
    --step=*) step="${arg#--step=}" ;;
    --cuda=*) cuda="${arg#--cuda=}" ;;
    --torch-prefix=*) torch_prefix="${arg#--torch-prefix=}" ;;
    --jobs=*) jobs="${arg#--jobs=}" ;;
    *) echo "cuda_check.sh: unknown argument ${arg}" >&2; exit 2 ;;
  esac
done
out="${OUT:-${repo}/.device-out}"
build="${repo}/.device-build"
deps="${repo}/.device-deps"
mkdir -p "${out}" "${build}"
summary="${out}/summary.txt"

say() { echo "$*" | tee -a "${summary}"; }
fail() { say "FAILED: $*"; exit 1; }

[[ -f "${deps}/REQUIRES" ]] || fail "no ${deps}/REQUIRES: run tools/device/prepare.sh where" \
  "the Debian packages are, and carry .device-deps"

arch="$(gcc -print-multiarch 2>/dev/null)"
arch="${arch:-x86_64-linux-gnu}"
usr="${deps}/root/usr"
libdir="${usr}/lib/${arch}"

# The carried libraries' needs against this machine's glibc and libstdc++.
check_abi() {
  local need_glibc need_cxx have_glibc libstdcxx
  need_glibc="$(awk '/^GLIBC /{print $2}' "${deps}/REQUIRES")"
  need_cxx="$(awk '/^GLIBCXX /{print $2}' "${deps}/REQUIRES")"
  have_glibc="$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
  if [[ "$(printf '%s\n%s\n' "${need_glibc}" "${have_glibc}" | sort -V | head -1)" != \
        "${need_glibc}" ]]; then
    fail "the carried Debian 12 libraries need glibc ${need_glibc}; this machine has" \
      "${have_glibc} (carry their sources instead and build them here)"
  fi
  libstdcxx="$(c++ -print-file-name=libstdc++.so.6)"
  if ! grep -qa "GLIBCXX_${need_cxx}" "$(readlink -f "${libstdcxx}")"; then
    fail "the carried libraries need GLIBCXX_${need_cxx}; ${libstdcxx} lacks it"
  fi
  say "abi: glibc ${have_glibc} >= ${need_glibc}; ${libstdcxx} has GLIBCXX_${need_cxx}"
}

# LD_LIBRARY_PATH for linking and running: the carried libraries, and their dependencies that
# this machine lacks (a link each in .device-build/runtime).
runtime_path() {
  rm -rf "${build}/runtime"
  mkdir -p "${build}/runtime"
  local lib name missing=()
  ldconfig -p >"${build}/ldconfig.txt" 2>/dev/null || true
  for lib in "${deps}"/runtime/*; do
    name="$(basename "${lib}")"
    if ! grep -qF " ${name} (" <(tr '\t' ' ' <"${build}/ldconfig.txt"); then
      ln -s "${lib}" "${build}/runtime/${name}"
      missing+=("${name}")
    fi
  done
  echo "carried runtime libraries used (absent here): ${missing[*]:-none}" \
    >>"${out}/environment.txt"
  local path="${libdir}:${libdir}/hdf5/serial:${build}/runtime"
  export LD_LIBRARY_PATH="${path}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
}

environment() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
    nvcc --version 2>&1 | tail -2
    c++ --version | head -1
    cmake --version | head -1
    ninja --version 2>&1 | sed 's/^/ninja /'
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"available", torch.cuda.is_available(), "prefix", torch.utils.cmake_prefix_path)' 2>&1
    getconf GNU_LIBC_VERSION
    echo "carried: $(tr '\n' ' ' <"${deps}/REQUIRES")"
  } >"${out}/environment.txt" 2>&1
}

configure() {
  if [[ -z "${torch_prefix}" ]]; then
    torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" ||
      fail "configure: python3 cannot import torch; pass --torch-prefix"
  fi
  local cfg
  cfg() { find "${deps}/root" -name "$1" -printf '%h\n' | head -1; }
  timeout 300 cmake -S "${repo}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="${torch_prefix};${usr}" \
    -Dabsl_DIR="$(cfg abslConfig.cmake)" -DTBB_DIR="$(cfg TBBConfig.cmake)" \
    -DGTest_DIR="$(cfg GTestConfig.cmake)" -Dbenchmark_DIR="$(cfg benchmarkConfig.cmake)" \
    -Dnlohmann_json_DIR="$(cfg nlohmann_jsonConfig.cmake)" \
    -DHDF5_ROOT="${usr}" -DHDF5_C_COMPILER_EXECUTABLE=HDF5_C_COMPILER_EXECUTABLE-NOTFOUND \
    -DHDF5_C_INCLUDE_DIR="${usr}/include/hdf5/serial" \
    -DHDF5_hdf5_LIBRARY_RELEASE="${libdir}/hdf5/serial/libhdf5.so" \
    -DTENSORDICT_BUILD_TESTS=ON -DTENSORDICT_CUDA="${cuda}" \
    -DTENSORDICT_CUDA_BENCHMARK="${cuda}" >"${out}/configure.log" 2>&1 ||
    { tail -30 "${out}/configure.log"; fail "configure (log: configure.log)"; }
  grep -E "^(absl|TBB|GTest|benchmark|nlohmann_json|Torch)_DIR|^HDF5_(C_INCLUDE_DIR|hdf5_LIB)" \
    "${build}/CMakeCache.txt" >>"${out}/configure.log"
  say "configure: ok (TENSORDICT_CUDA=${cuda}, LibTorch from ${torch_prefix})"
}

# The targets of the ctest label `cuda`, and the benchmark.
cuda_targets() {
  local t
  for t in $(ctest --test-dir "${build}" -N -L cuda 2>/dev/null | awk '/Test +#/{print $3}'); do
    echo "tensordict_${t}"
  done
  [[ "${cuda}" == ON ]] && echo tensordict_cuda_bench
}

build_step() {
  local targets
  targets="$(cuda_targets | tr '\n' ' ')"
  [[ -n "${targets}" ]] || fail "build: no target labelled cuda (configure first)"
  timeout 540 cmake --build "${build}" -j "${jobs}" --target ${targets} >"${out}/build.log" 2>&1 ||
    { grep -m20 -B2 -A8 "error" "${out}/build.log"; fail "build (log: build.log)"; }
  say "build: ok (${targets})"
}

test_step() {
  mkdir -p "${out}/xml"
  GTEST_OUTPUT="xml:${out}/xml/" timeout 300 ctest --test-dir "${build}" -L cuda \
    --output-on-failure --timeout 240 >"${out}/ctest.log" 2>&1
  local rc=$?
  say "test: $(grep -E 'tests passed|tests failed' "${out}/ctest.log" | tail -1)" \
    "(skipped cases: $(cat "${out}"/xml/*.xml 2>/dev/null | grep -o '<skipped' | wc -l))"
  [[ ${rc} == 0 ]] || fail "test (log: ctest.log)"
}

bench_step() {
  [[ "${cuda}" == ON ]] || { say "bench: skipped (TENSORDICT_CUDA=OFF)"; return; }
  timeout 300 "${build}/tensordict_cuda_bench" --benchmark_repetitions=5 \
    >"${out}/bench.log" 2>&1 || fail "bench (log: bench.log)"
  say "bench: ok; ratios:"
  sed -n '/^case (median real time)/,$p' "${out}/bench.log" | tee -a "${summary}"
}

environment
check_abi
runtime_path
case "${step}" in
  configure) configure ;;
  build) build_step ;;
  test) test_step ;;
  bench) bench_step ;;
  all) configure; build_step; test_step; bench_step ;;
  *) fail "unknown step ${step}" ;;
esac
