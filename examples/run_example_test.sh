#!/usr/bin/env bash
# Runs an example program; the test passes when it exits 0 and printed something.
set -euo pipefail
out=$("$1")
[ -n "$out" ] || { echo "example printed nothing" >&2; exit 1; }
printf '%s\n' "$out" | tail -n 5
