#!/usr/bin/env bash
# Runs a Python script with modules built or kept by Bazel importable:
#   run_python.sh <python3> <module file>... -- <script.py> [script args...]
# Each module file's directory (an extension .so built with //td/python, fake_tensordict.py) goes
# on PYTHONPATH. Under --config=asan an extension needs the sanitizer runtimes loaded before the
# interpreter's own libraries: they are preloaded from the paths the extension links, and leak
# detection is off (CPython does not free everything at exit).
set -euo pipefail
python="$1"
shift
path=()
preload=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  path+=("$(cd "$(dirname "$1")" && pwd)")
  if [[ "$1" == *.so ]]; then
    for runtime in libasan libubsan; do
      lib="$(ldd "$1" | awk -v r="${runtime}" '$1 ~ "^"r"\\." {print $3}')"
      if [[ -n "${lib}" ]]; then preload+=("${lib}"); fi
    done
  fi
  shift
done
[[ $# -gt 1 ]] || { echo "usage: run_python.sh <python3> <module file>... -- <script.py> [args]" >&2; exit 2; }
shift
# Nothing written next to the sources (runfiles link to them).
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$(IFS=:; echo "${path[*]}")${PYTHONPATH:+:${PYTHONPATH}}"
if [[ ${#preload[@]} -gt 0 ]]; then
  export LD_PRELOAD="$(IFS=:; echo "${preload[*]}")"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=0"
  echo "run_python.sh: sanitizer build, LD_PRELOAD=${LD_PRELOAD}" >&2
fi
exec "${python}" "$@"
