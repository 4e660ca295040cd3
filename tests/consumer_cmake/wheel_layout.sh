#!/usr/bin/env bash
# Arranges the system's LibTorch (Debian's libtorch-dev) as a pip wheel's torch/ folder holds it:
#   DIR/torch/include/{ATen,c10,caffe2,torch,gloo}   symlinks to /usr/include's
#   DIR/torch/lib/lib{torch,torch_cpu,c10}.so*       hard links, under their sonames too
#   DIR/torch/share/cmake/{Torch,Caffe2}/            Debian's CMake package files, with the paths
#                                                    they compute from their own place made
#                                                    relative to torch/ as a wheel's are
# so that CMAKE_PREFIX_PATH=DIR/torch/share/cmake (what `torch.utils.cmake_prefix_path` prints
# for a wheel) finds LibTorch there. Used by tests/consumer_cmake/run.sh --wheel-layout.
#   tests/consumer_cmake/wheel_layout.sh DIR
set -euo pipefail

dir="$1/torch"
multiarch="$(gcc -print-multiarch)"
cmake_dir="/usr/lib/${multiarch}/cmake"
rm -rf "${dir}"
mkdir -p "${dir}/include" "${dir}/lib" "${dir}/share/cmake"
for d in ATen c10 caffe2 torch gloo; do
  if [[ -e "/usr/include/${d}" ]]; then ln -s "/usr/include/${d}" "${dir}/include/${d}"; fi
done
for lib in libtorch.so libtorch_cpu.so libc10.so; do
  real="$(readlink -f "/usr/lib/${multiarch}/${lib}")"
  ln -f "${real}" "${dir}/lib/${lib}"
  ln -f "${real}" "${dir}/lib/$(basename "${real}")"
  soname="$(objdump -p "${real}" | awk '$1 == "SONAME" { print $2 }')"
  if [[ -n "${soname}" ]]; then ln -f "${real}" "${dir}/lib/${soname}"; fi
done
# Debian's Config files sit four levels below their prefix /usr (lib/<multiarch>/cmake/<name>), a
# wheel's three below torch/ (share/cmake/<name>). Caffe2Targets.cmake climbs four directories
# from its own file, which from share/cmake/Caffe2 ends at torch/; the ../include and
# <multiarch>/ it names below /usr/lib become include/ and lib/.
for pkg in Torch Caffe2; do
  cp -r "${cmake_dir}/${pkg}" "${dir}/share/cmake/${pkg}"
done
sed -i 's|/\.\./\.\./\.\./\.\./"|/../../../"|' \
  "${dir}/share/cmake/Torch/TorchConfig.cmake" "${dir}/share/cmake/Caffe2/Caffe2Config.cmake"
for f in "${dir}"/share/cmake/Caffe2/Caffe2Targets*.cmake; do
  sed -i -e 's|${_IMPORT_PREFIX}/\.\./include|${_IMPORT_PREFIX}/include|g' \
    -e "s|\${_IMPORT_PREFIX}/${multiarch}/|\${_IMPORT_PREFIX}/lib/|g" "${f}"
done
