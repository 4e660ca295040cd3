#!/usr/bin/env bash
# Coverage-guided fuzzing with clang's libFuzzer (+ AddressSanitizer and UBSan), for a bounded
# time per target. Builds each target straight with clang++ (Bazel's toolchain here is GCC);
# the targets only need system headers and libraries (Debian: clang, libclang-rt-14-dev, which
# tools/install_deps.sh installs).
#
#   tests/fuzz/run.sh [SECONDS]      # per target; default $FUZZ_SECONDS or 60
#
# Environment: FUZZ_OUT (build and corpus directory, default a temporary one), CXX_FUZZ (default
# clang++). Exits non-zero when a target fails to build or the fuzzer finds a crash; the crashing
# input is then kept in $FUZZ_OUT/<target>/ (crash-*) and its path printed.
#
# Targets:
#   memmap_meta   td/backends/memmap/format_fuzzer.cc: meta.json of memmap directories, keys.
#   shm_handle    td/backends/shared_memory/handle_fuzzer.cc: shared-memory handles (untrusted
#                 input from another process).
#   distributed_header  td/distributed/header_fuzzer.cc: td::distributed message headers and
#                 init_remote structures (untrusted input from a peer).
#   consolidated_meta  td/consolidate/metadata_fuzzer.cc: the metadata of consolidated files.
#   h5_walk       td/backends/h5/walk_fuzzer.cc: the walk of an HDF5 file's groups, links,
#                 dtypes and batch-size attributes (Debian: libhdf5-dev).
#   zip_directory td/bytes/zip_fuzzer.cc: the central directory of memmap archives (.tdz).
#   zarr_meta     td/io/zarr_meta_fuzzer.cc: Zarr's .zarray / .zgroup / .zattrs / zarr.json,
#                 fill values and chunk keys.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-${FUZZ_SECONDS:-60}}"
cxx="${CXX_FUZZ:-clang++}"
out="${FUZZ_OUT:-$(mktemp -d)}"
mkdir -p "${out}"

if ! command -v "${cxx}" >/dev/null 2>&1; then
  echo "run.sh: ${cxx} not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi

flags=(-std=c++17 -g -O1 -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -I"${root}")

# build_and_run NAME SOURCES... -- LIBS...
build_and_run() {
  local name="$1"
  shift
  local sources=() libs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do sources+=("${root}/$1"); shift; done
  [[ $# -gt 0 ]] && shift
  libs=("$@")
  local dir="${out}/${name}"
  mkdir -p "${dir}/corpus"
  echo "=== ${name}: building"
  "${cxx}" "${flags[@]}" "${sources[@]}" "${libs[@]}" -o "${dir}/fuzzer"
  cp -n "${root}/tests/fuzz/corpus/${name}/"* "${dir}/corpus/" 2>/dev/null || true
  echo "=== ${name}: fuzzing for ${seconds}s"
  (cd "${dir}" && ./fuzzer -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
      -max_len=16384 -print_final_stats=1 corpus)
}

absl_libs=(-labsl_status -labsl_statusor -labsl_strings -labsl_strings_internal
  -labsl_str_format_internal -labsl_cord -labsl_cordz_info -labsl_cord_internal -labsl_cordz_handle
  -labsl_cordz_functions -labsl_throw_delegate -labsl_raw_logging_internal -labsl_int128 -labsl_base
  -labsl_spinlock_wait -labsl_synchronization -labsl_time -labsl_stacktrace -labsl_symbolize
  -labsl_debugging_internal -labsl_demangle_internal -labsl_malloc_internal
  -labsl_exponential_biased -labsl_graphcycles_internal -labsl_time_zone -labsl_civil_time
  -labsl_bad_optional_access -labsl_bad_variant_access -labsl_hash -labsl_city
  -labsl_low_level_hash -labsl_raw_hash_set -lpthread)

build_and_run memmap_meta \
  td/backends/memmap/format_fuzzer.cc td/backends/memmap/format.cc td/structure/structure.cc \
  td/core/dtype.cc td/core/errors.cc td/core/nested_key.cc -- -lc10 "${absl_libs[@]}"

build_and_run shm_handle \
  td/backends/shared_memory/handle_fuzzer.cc td/backends/shared_memory/handle.cc \
  td/structure/structure.cc td/core/dtype.cc td/core/errors.cc td/core/nested_key.cc \
  -- -lc10 "${absl_libs[@]}"

build_and_run consolidated_meta \
  td/consolidate/metadata_fuzzer.cc td/consolidate/metadata.cc td/structure/structure.cc \
  td/core/dtype.cc td/core/errors.cc td/core/nested_key.cc -- -lc10 "${absl_libs[@]}"

build_and_run h5_walk \
  td/backends/h5/walk_fuzzer.cc td/backends/h5/walk.cc td/backends/h5/h5_io.cc \
  td/backends/h5/npy_opaque.cc td/structure/structure.cc \
  td/core/dtype.cc td/core/errors.cc td/core/nested_key.cc -- -I/usr/include/hdf5/serial -lhdf5_serial -ltorch_cpu -lc10 \
  "${absl_libs[@]}"

build_and_run zip_directory \
  td/bytes/zip_fuzzer.cc td/bytes/zip.cc td/bytes/codec.cc td/os/fd.cc td/os/files.cc \
  -- -lz -lzstd -lblosc "${absl_libs[@]}"

build_and_run zarr_meta \
  td/io/zarr_meta_fuzzer.cc td/io/zarr_format.cc td/io/zarr_codec.cc td/bytes/codec.cc td/os/fd.cc \
  td/os/files.cc td/structure/structure.cc td/core/dtype.cc td/core/errors.cc \
  td/core/nested_key.cc -- -ltorch_cpu -lc10 -lz -lzstd -lblosc "${absl_libs[@]}"

build_and_run distributed_header \
  td/distributed/header_fuzzer.cc td/distributed/wire.cc td/structure/structure.cc \
  td/core/dtype.cc td/core/errors.cc td/core/nested_key.cc -- -lc10 "${absl_libs[@]}"

echo "=== fuzzing done: no crash (corpus and binaries in ${out})"
