#!/usr/bin/env python3
"""Checks docs/upstream-coverage.md: every name marked present is in the header its row names.

Run by //tools:upstream_coverage_test (and //tools:upstream_coverage_selftest, `--self-test`, which
checks on made-up rows that a missing name, a missing header and a row without a header are all
reported). By hand, from the repository root: `python3 tools/upstream_coverage.py`. Python 3
standard library only.

The rule. A table row `| `name` | group | present | spelling |` must hold, in its last column, at
least one pair `` `text` (path/to/header) ``: a backticked text followed by a parenthesized path
of the repository. For each pair the file must exist and its code (each line cut at `//`, so
comments do not count) must contain the text's last `::` component as a whole word, or the whole
text verbatim when it holds a `(` or a space (`TD_UNARY(abs`, a macro row of td/core/ops.def).
Rows with another status are not checked.
"""

import argparse
import os
import re
import sys
import tempfile

ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<group>[^|]*) \| (?P<status>[^|]*) \| (?P<rest>.*) \|$")
PAIR = re.compile(r"`(?P<text>[^`]+)`\s*(?:via\s*`(?P<via>[^`]+)`\s*)?\((?P<path>[\w./-]+\.(?:h|def))\)")


def code_of(path):
  with open(path, encoding="utf-8") as f:
    return "\n".join(line.split("//")[0] for line in f)


def check(root, doc):
  errors = []
  cache = {}
  with open(os.path.join(root, doc), encoding="utf-8") as f:
    lines = f.read().splitlines()
  present = 0
  for lineno, line in enumerate(lines, 1):
    m = ROW.match(line)
    if not m or m.group("status").strip() != "present":
      continue
    present += 1
    pairs = list(PAIR.finditer(m.group("rest")))
    if not pairs:
      errors.append("%s:%d: `%s` is present but names no `spelling` (header)" %
                    (doc, lineno, m.group("name")))
      continue
    for p in pairs:
      text = p.group("via") or p.group("text")
      path = p.group("path")
      full = os.path.join(root, path)
      if not os.path.isfile(full):
        errors.append("%s:%d: `%s`: header %s does not exist" % (doc, lineno, m.group("name"), path))
        continue
      if full not in cache:
        cache[full] = code_of(full)
      code = cache[full]
      if "(" in text or " " in text:
        found = text in code
        what = text
      else:
        what = text.split("::")[-1]
        found = re.search(r"(?<![\w])" + re.escape(what) + r"(?![\w])", code) is not None
      if not found:
        errors.append("%s:%d: `%s` is marked present, but %s is not in the code of %s" %
                      (doc, lineno, m.group("name"), what, path))
  return errors, present


def self_test():
  with tempfile.TemporaryDirectory() as root:
    os.makedirs(os.path.join(root, "td"))
    with open(os.path.join(root, "td", "a.h"), "w") as f:
      f.write("int real_fn();\n// only_in_comment()\nTD_UNARY(abs, FOREACH)\n")
    rows = [
        "| `real` | a | present | `td::real_fn` (td/a.h) |",
        "| `abs_` | a | present | `td::TensorDict::abs_` via `TD_UNARY(abs` (td/a.h) |",
        "| `gone` | a | present | `td::gone_fn` (td/a.h) |",
        "| `comment` | a | present | `only_in_comment` (td/a.h) |",
        "| `nohdr` | a | present | `x` (td/missing.h) |",
        "| `bare` | a | present | something |",
        "| `skipped` | a | no | -- |",
    ]
    with open(os.path.join(root, "doc.md"), "w") as f:
      f.write("\n".join(rows) + "\n")
    errors, present = check(root, "doc.md")
    expected = ["gone_fn is not in", "only_in_comment is not in", "td/missing.h does not exist",
                "names no `spelling`"]
    ok = present == 6 and len(errors) == 4 and all(
        any(e in err for err in errors) for e in expected)
    print("\n".join(errors))
    print("self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--root", help="the repository (default: the Bazel runfiles of the main "
                      "workspace, or the repository this script is in)")
  parser.add_argument("--self-test", action="store_true")
  args = parser.parse_args()
  if args.self_test:
    return self_test()
  root = args.root
  if root is None and os.environ.get("TEST_SRCDIR"):
    root = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "tensordict"))
  if root is None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  errors, present = check(root, os.path.join("docs", "upstream-coverage.md"))
  for e in errors:
    print(e)
  if errors:
    print("\n%d present name(s) without a match; rules: the header of tools/upstream_coverage.py" %
          len(errors))
    return 1
  print("upstream coverage: %d present names, each found in its header" % present)
  return 0


if __name__ == "__main__":
  sys.exit(main())
