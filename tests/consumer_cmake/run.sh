#!/usr/bin/env bash
# The CMake build end to end, as a CMake user takes it (README, "Using it from CMake"):
#   1. configure and build tensordict with CMake (CMakeLists.txt, generated from Bazel by
#      tools/bazel_to_cmake.py); with --ctest, its unit tests too, run by ctest (the multi-host and
#      long ones, labelled multihost / slow, are left to Bazel's bounded CI steps);
#   2. `cmake --install` into a fresh prefix;
#   3. this folder's project against that prefix with find_package(tensordict): one program per
#      public target and one that links several, run by ctest;
#   4. the same project with add_subdirectory(<source tree>) instead: the program with several.
# With --wheel-layout, LibTorch is found as a pip wheel's is, through
# CMAKE_PREFIX_PATH=<torch>/share/cmake (what torch.utils.cmake_prefix_path prints): the
# system's LibTorch arranged that way (wheel_layout.sh).
#
#   tests/consumer_cmake/run.sh [--ctest] [--wheel-layout]
#   tools/bazelw-sid --exec tests/consumer_cmake/run.sh      # in the Debian sid root
#
# Build trees live in .cmake-build/<Debian codename>/ of the checkout. Compiles go through ccache
# (tools/install_deps.sh installs it) with the checkout as its base directory, so a fresh clone
# reuses the objects of an earlier one. Exits non-zero when a step fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
ctest_lib=0
wheel=0
for arg in "$@"; do
  case "${arg}" in
    --ctest) ctest_lib=1 ;;
    --wheel-layout) wheel=1 ;;
    *) echo "run.sh: unknown argument ${arg}" >&2; exit 2 ;;
  esac
done

"${repo}/tools/install_deps.sh"
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")"
out="${repo}/.cmake-build/${codename}"
mkdir -p "${out}"
jobs="$(nproc)"

export CCACHE_BASEDIR="${repo}"
export CCACHE_NOHASHDIR=1
common=(-G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
prefix_path=()
if [[ "${wheel}" == 1 ]]; then
  "${here}/wheel_layout.sh" "${out}/wheel"
  prefix_path=("${out}/wheel/torch/share/cmake")
fi
join() { local IFS=';'; echo "$*"; }

step() { echo "=== cmake (${codename}): $*"; }

step "build tensordict"
cmake -S "${repo}" -B "${out}/lib" "${common[@]}" -DTENSORDICT_WERROR=ON \
  -DTENSORDICT_BUILD_TESTS="$([[ ${ctest_lib} == 1 ]] && echo ON || echo OFF)" \
  -DCMAKE_PREFIX_PATH="$(join "${prefix_path[@]}")" >"${out}/lib.configure.log" ||
  { cat "${out}/lib.configure.log"; exit 1; }
cmake --build "${out}/lib" -j "${jobs}"
if [[ "${ctest_lib}" == 1 ]]; then
  step "ctest of tensordict"
  ctest --test-dir "${out}/lib" -j "${jobs}" -LE "multihost|slow" --output-on-failure
fi

step "install"
rm -rf "${out}/prefix"
cmake --install "${out}/lib" --prefix "${out}/prefix" >/dev/null

step "consumer with find_package(tensordict)"
rm -rf "${out}/consumer"
cmake -S "${here}" -B "${out}/consumer" "${common[@]}" \
  -DCMAKE_PREFIX_PATH="$(join "${out}/prefix" "${prefix_path[@]}")" >/dev/null
cmake --build "${out}/consumer" -j "${jobs}"
ctest --test-dir "${out}/consumer" -j "${jobs}" --output-on-failure

step "consumer with add_subdirectory(tensordict)"
cmake -S "${here}" -B "${out}/subdirectory" "${common[@]}" -DTENSORDICT_SOURCE_DIR="${repo}" \
  -DCMAKE_PREFIX_PATH="$(join "${prefix_path[@]}")" >/dev/null
cmake --build "${out}/subdirectory" -j "${jobs}"
ctest --test-dir "${out}/subdirectory" -j "${jobs}" --output-on-failure
