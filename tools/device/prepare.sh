#!/usr/bin/env bash
# Run HERE (the Debian 12 development machine), before tools/device/cuda_check.sh travels to a
# GPU machine. That machine has a CUDA LibTorch (a pip wheel), CMake, Ninja and nvcc, but none of
# the other libraries tensordict builds on, and no network. This copies Debian's headers,
# libraries and CMake package files of those libraries -- Abseil, oneTBB, GoogleTest/GoogleMock,
# Google Benchmark, nlohmann-json, HDF5 -- into one git-ignored folder, .device-deps/:
#
#   .device-deps/root/usr/...   the packages' files at their Debian paths (CMAKE_PREFIX_PATH
#                               and HDF5_ROOT point at .device-deps/root/usr)
#   .device-deps/runtime/       shared libraries those need that are not glibc's (libsz, libaec,
#                               libcurl, ...): cuda_check.sh uses each only where the GPU machine
#                               lacks a library of that name
#   .device-deps/REQUIRES       the newest GLIBC_ and GLIBCXX_ symbol versions the copies need
#                               (cuda_check.sh compares them with the GPU machine's first)
#
# The folder travels with the working tree as one carried path (the run tool's `carry`), 64 MiB
# in all with the tree: this prints both sizes and fails above the limit.
#
#   tools/device/prepare.sh            # then: run carry=[".device-deps"] tools/device/cuda_check.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${repo}/.device-deps"
arch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"
packages=(libabsl-dev libabsl20220623 libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5
          libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian nlohmann-json3-dev
          libhdf5-dev
          libhdf5-103-1 libhdf5-hl-100)

for p in "${packages[@]}"; do
  dpkg -s "${p}" >/dev/null 2>&1 || { echo "prepare.sh: Debian package ${p} is not installed" \
    "(tools/install_deps.sh installs the build's packages)" >&2; exit 1; }
done

rm -rf "${out}"
mkdir -p "${out}/root" "${out}/runtime"
# Headers, libraries and CMake files; no docs, Fortran or C++ bindings of HDF5, or tools.
for p in "${packages[@]}"; do
  dpkg -L "${p}" | while read -r f; do
    [[ -f "${f}" || -L "${f}" ]] || continue
    case "${f}" in
      /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*|/usr/bin/*) continue ;;
      *fortran*|*_cpp.so*|*hdf5/serial/*.mod|*/libhdf5*.a|*/libtbb*debug*) continue ;;
      /usr/include/*|/usr/lib/*|/usr/share/*cmake*|/usr/share/pkgconfig/*) ;;
      *) continue ;;
    esac
    mkdir -p "${out}/root$(dirname "${f}")"
    cp -P "${f}" "${out}/root${f}"
  done
done

# Shared libraries the copies need that glibc, libstdc++ and libgcc do not provide.
find "${out}/root" -name '*.so*' -type f | while read -r lib; do
  ldd "${lib}" 2>/dev/null | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  case "${name}" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|\
    libgcc_s.so.*|libresolv.so.*) continue ;;
  esac
  [[ -e "${out}/root/usr/lib/${arch}/${name}" ]] && continue
  cp -L "${path}" "${out}/runtime/${name}"
done

# Every file the CMake package files name must have come along.
missing="$(grep -ho '_IMPORT_PREFIX}/[^"]*' "${out}"/root/usr/lib/*/cmake/*/*Targets-*.cmake |
  sed "s|_IMPORT_PREFIX}|${out}/root/usr|" | sort -u | while read -r f; do
  [[ -e "${f}" ]] || echo "${f}"; done)"
if [[ -n "${missing}" ]]; then
  echo "prepare.sh: the CMake files name files no package listed here installs:" >&2
  echo "${missing}" >&2
  exit 1
fi

# The newest symbol versions of glibc and libstdc++ the copied binaries ask for.
newest() {
  find "${out}" \( -name '*.so*' -o -name '*.a' \) -type f -print0 |
    xargs -0 objdump -T 2>/dev/null | grep -o "$1[0-9.]*" | sort -uV | tail -1
}
{ echo "GLIBC $(newest 'GLIBC_2\.' | sed 's/GLIBC_//')"
  echo "GLIBCXX $(newest 'GLIBCXX_3\.' | sed 's/GLIBCXX_//')"
  echo "DEBIAN $(cat /etc/debian_version)"; } >"${out}/REQUIRES"

deps_kib="$(du -sk "${out}" | cut -f1)"
tree_kib="$(cd "${repo}" && git ls-files -z | xargs -0 du -ckL 2>/dev/null | tail -1 | cut -f1)"
echo "prepare.sh: ${out}: $((deps_kib / 1024)) MiB; tracked tree $((tree_kib / 1024)) MiB;" \
  "together $(((deps_kib + tree_kib) / 1024)) MiB of 64 MiB"
cat "${out}/REQUIRES"
if (( deps_kib + tree_kib > 64 * 1024 )); then
  echo "prepare.sh: over the 64 MiB the device run carries" >&2
  exit 1
fi
