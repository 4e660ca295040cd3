#!/usr/bin/env bash
# Installs the Debian packages tensordict's build needs. Idempotent and silent
# when everything is already installed (one dpkg-query call); otherwise runs
# `apt-get update` and installs only the missing packages.
#
# Usage: tools/install_deps.sh [--check]
#   --check   only report missing packages (exit 1 if any), install nothing.
#
# Debian 12 (bookworm): Bazel 4.2.3 (bazel-bootstrap, pulls in
# default-jdk-headless, which Bazel's server needs), LibTorch 1.13.1 (CPU),
# Abseil 20220623, oneTBB 2021.8, GoogleTest 1.12, Google Benchmark 1.7.1,
# nlohmann/json 3.11, clang 14.
# Debian 13 (trixie; tools/bazelw-debian13 runs this inside its root): the
# same packages, giving LibTorch 2.6.0, GCC 14, Abseil 20240722, oneTBB 2022.1,
# GoogleTest 1.16, Google Benchmark 1.9, clang 19.
# Debian sid (tools/bazelw-sid): LibTorch 2.14.1, GCC 16, Abseil 20260526,
# oneTBB 2023.1, GoogleTest 1.18, Bazel 7.7.1, CMake 4.3, clang 21.
#
# apt's and dpkg's progress (about 1,600 lines on a fresh machine) goes to
# $TENSORDICT_INSTALL_LOG (default ~/.cache/tensordict-install-deps.log); the
# terminal gets one line before and one after, or the log's tail on failure.
set -euo pipefail

PACKAGES=(
  # Build tooling.
  bazel-bootstrap
  default-jdk-headless
  g++
  cmake                # the CMake build (CMakeLists.txt) and tests/consumer_cmake
  ninja-build
  ccache               # .ci/run's CMake builds reuse objects across clones
  # Libraries (see tensordict_deps.bzl for the Bazel targets).
  libtorch-dev
  libgloo-dev          # gloo headers: ProcessGroupGloo.hpp (@tensordict_libtorch//:c10d)
  libabsl-dev
  libtbb-dev
  libgtest-dev
  libbenchmark-dev
  nlohmann-json3-dev
  libhdf5-dev          # td/backends/h5 (serial HDF5, @tensordict_hdf5//:hdf5)
  zlib1g-dev           # td/bytes:codec: gzip / zlib Zarr chunks, deflated .tdz entries
  libzstd-dev          # td/bytes:codec: zstd Zarr chunks (zarr-python 3's default)
  libblosc-dev         # td/bytes:codec: blosc Zarr chunks (zarr-python 2's default)
  # Reference values / fixtures from PyTorch itself.
  python3-torch
  python3-setuptools   # torch._inductor (td/nn/aoti's .pt2 fixtures) imports it on LibTorch 2.6
  python3-h5py         # td/backends/h5: HDF5 files written / checked by h5py
  python3-zarr         # td/io:zarr_compat_test: Zarr stores written / checked by zarr-python (2 on Debian 12, 3 on 13)
  # td/python: Python extensions (<Python.h>, pybind11; libtorch_python comes with python3-torch).
  python3-dev
  pybind11-dev
  # ip netns / veth / tc for the multi-host suite (td/distributed:multihost_test).
  iproute2
  # clang + its runtimes (libFuzzer, sanitizers) for fuzz targets.
  clang
)
# The sanitizer and libFuzzer runtimes of the distribution's default clang.
case "$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" in
  trixie) PACKAGES+=(libclang-rt-19-dev) ;;
  sid | forky) PACKAGES+=(libclang-rt-21-dev) ;;
  *) PACKAGES+=(libclang-rt-14-dev) ;;
esac

missing=()
# dpkg-query prints one "<package> <status>" line per known package and
# complains on stderr about unknown ones; anything not "installed" is missing.
status="$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)"
for pkg in "${PACKAGES[@]}"; do
  if ! grep -qxF "${pkg} installed" <<<"${status}"; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ "${1:-}" == "--check" ]]; then
  echo "missing packages: ${missing[*]}" >&2
  exit 1
fi

log="${TENSORDICT_INSTALL_LOG:-${HOME:-/root}/.cache/tensordict-install-deps.log}"
mkdir -p "$(dirname "${log}")"
echo "install_deps: installing ${#missing[@]} Debian packages (${missing[*]}) and what they need;" \
  "apt's output goes to ${log}" >&2
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install_deps: not root and no sudo; install these packages: ${missing[*]}" >&2
    exit 1
  fi
fi

# Wait for (rather than fail on) a concurrent apt/dpkg run, e.g. unattended
# upgrades or another session's install.
APT_OPTS=(-o DPkg::Lock::Timeout=900)
start=${SECONDS}
if ! {
  "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update &&
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get "${APT_OPTS[@]}" install -y "${missing[@]}"
} >"${log}" 2>&1; then
  echo "install_deps: apt-get failed; the end of ${log}:" >&2
  tail -n 25 "${log}" >&2
  exit 1
fi
echo "install_deps: done in $((SECONDS - start)) s," \
  "$(grep -c '^Setting up ' "${log}" || true) packages set up" >&2
