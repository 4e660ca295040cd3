#!/usr/bin/env bash
# Arranges the system's LibTorch (Debian's libtorch-dev) as the official zip unpacks, at
# /opt/tensordict-zip-layout/libtorch: include/{ATen,c10,caffe2,torch} (symlinks) and
# lib/{libtorch,libtorch_cpu,libc10}.so (hard links, under their sonames too, so that the loader
# finds them through the rpath and /proc/self/maps names this folder), then runs `bazelw test //...` in this workspace, which
# points tensordict_deps(libtorch_path = ...) there. Meant for the Debian 13 root:
#   tools/bazelw-debian13 --exec tests/zip_layout/run.sh [BAZEL FLAGS...]
# Refuses to run outside a root made by tools/bazelw-debian13 (it writes under /opt).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" != trixie ]]; then
  echo "zip_layout/run.sh: run it in the Debian 13 root: tools/bazelw-debian13 --exec $0" >&2
  exit 2
fi
"${here}/../../tools/install_deps.sh"

zip=/opt/tensordict-zip-layout/libtorch
multiarch="$(gcc -print-multiarch)"
rm -rf "${zip}"
mkdir -p "${zip}/include" "${zip}/lib"
for d in ATen c10 caffe2 torch; do
  if [[ -e "/usr/include/${d}" ]]; then ln -s "/usr/include/${d}" "${zip}/include/${d}"; fi
done
for lib in libtorch.so libtorch_cpu.so libc10.so; do
  real="$(readlink -f "/usr/lib/${multiarch}/${lib}")"
  ln "${real}" "${zip}/lib/${lib}"
  soname="$(objdump -p "${real}" | awk '$1 == "SONAME" { print $2 }')"
  if [[ -n "${soname}" && "${soname}" != "${lib}" ]]; then ln "${real}" "${zip}/lib/${soname}"; fi
done

cd "${here}"
exec "${here}/../../tools/bazelw" test "$@" //...
