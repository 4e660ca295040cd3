#!/usr/bin/env bash
# memmap_inspect accepts a valid directory (the Python-written fixture), names the problem in a
# broken one, and opens a sub-TensorDict.
set -euo pipefail
tool="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
cp -rL tests/fixtures/python/checkpoint "${tmp}/ckpt"

out=$("${tool}" "${tmp}/ckpt")
grep -q "valid: 124 bytes" <<<"${out}" || { echo "unexpected output: ${out}" >&2; exit 1; }
grep -q "('0', 'weight')" <<<"${out}" || { echo "no ('0', 'weight') in: ${out}" >&2; exit 1; }

out=$("${tool}" "${tmp}/ckpt" 1)
grep -q "valid: 60 bytes" <<<"${out}" || { echo "sub path: ${out}" >&2; exit 1; }

# A killed writer's temporaries are ignored by loading and listed.
mkdir "${tmp}/.td-tmp-999999-0-ab-ckpt" "${tmp}/ckpt/.td-tmp-999999-1-cd-0"
out=$("${tool}" "${tmp}/ckpt")
grep -q "valid: 124 bytes" <<<"${out}" || { echo "temporaries: ${out}" >&2; exit 1; }
grep -q "leftover temporary (ignored): ${tmp}/.td-tmp-999999-0-ab-ckpt" <<<"${out}" ||
  { echo "sibling temporary not listed: ${out}" >&2; exit 1; }
grep -q "leftover temporary (ignored): ${tmp}/ckpt/.td-tmp-999999-1-cd-0" <<<"${out}" ||
  { echo "inner temporary not listed: ${out}" >&2; exit 1; }

truncate -s 7 "${tmp}/ckpt/0/bias.memmap"
if err=$("${tool}" "${tmp}/ckpt" 2>&1); then
  echo "a truncated file was accepted" >&2
  exit 1
fi
grep -q "bias.memmap has 7 bytes" <<<"${err}" || { echo "unexpected error: ${err}" >&2; exit 1; }
echo "memmap_inspect OK"
