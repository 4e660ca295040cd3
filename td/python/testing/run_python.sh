#!/usr/bin/env bash
# Runs a Python script against an extension built with //td/python:
#   run_python.sh <python3> <extension.so> <script.py> [script args...]
# The script gets the extension's directory on sys.path (PYTHONPATH) and fake_tensordict.py's
# (next to this script). Under --config=asan the extension needs the sanitizer runtimes loaded
# first, before the interpreter's own libraries: they are preloaded from the paths the
# extension links, and leak detection is off (CPython does not free everything at exit).
set -euo pipefail
python="$1"
ext="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ext_dir="$(cd "$(dirname "${ext}")" && pwd)"
export PYTHONPATH="${ext_dir}:${here}${PYTHONPATH:+:${PYTHONPATH}}"
preload=()
for runtime in libasan libubsan; do
  path="$(ldd "${ext}" | awk -v r="${runtime}" '$1 ~ "^"r"\\." {print $3}')"
  if [[ -n "${path}" ]]; then preload+=("${path}"); fi
done
if [[ ${#preload[@]} -gt 0 ]]; then
  export LD_PRELOAD="$(IFS=:; echo "${preload[*]}")"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=0"
  echo "run_python.sh: sanitizer build, LD_PRELOAD=${LD_PRELOAD}" >&2
fi
exec "${python}" "$@"
