#!/usr/bin/env bash
# Library lines of the persistence layer at a revision: every file and wire format, the
# structure codec, the format registry and the file plumbing below them (td/os, td/bytes).
# Tests, fuzzers and test helpers are left out. One line per package, then the total.
#
#   tools/persistence_lines.sh            # the working tree's HEAD
#   tools/persistence_lines.sh b15df78    # another revision, to compare
set -euo pipefail
rev="${1:-HEAD}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
git ls-tree -r --name-only "${rev}" -- \
    td/backends/memmap td/backends/shared_memory td/backends/h5 td/backends/internal \
    td/consolidate td/io td/distributed td/tensorclass/memmap.cc td/structure td/format td/os \
    td/bytes td/core/internal/structure_check.h |
  grep -E '\.(cc|h)$' |
  grep -vE '_test\.cc$|_fuzzer\.cc$|_testing\.(cc|h)$|/testing|test_util\.h' |
  grep -vE '^td/io/(tabular|utils|dict|schema)\.' |
  grep -vE '^td/distributed/(collectives|group|spawn|python_wire|distributed|internal)\.' |
  while read -r f; do
    printf '%s %s\n' "$(dirname "${f}")" "$(git show "${rev}:${f}" | wc -l)"
  done |
  awk '{n[$1] += $2; t += $2} END {for (p in n) printf "%6d %s\n", n[p], p; printf "%6d total\n", t}' |
  sort -k2
