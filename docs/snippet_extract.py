#!/usr/bin/env python3
"""Writes the ```cpp blocks of one markdown file as one C++ translation unit, for
//docs:snippets_test, which compiles and links them (they are never run).

Usage: snippet_extract.py FILE.md > OUT   (the path is also the one #line directives name)
       snippet_extract.py --self-test

The markdown conventions (written for readers first):
- A ```cpp block is C++ that compiles. A block that is not C++ (shell, Python, pseudo-code,
  expected output) takes another info string (```sh, ```python, ```text).
- A block is read as statements, as in a function body, except the parts a function body cannot
  hold, which go to namespace scope: `#include` lines (hoisted to the top of the file), and each
  declaration that starts at brace depth 0 with class / struct / enum / union / namespace / using
  / template / typedef / TORCH_MODULE / TD_REGISTER_TENSORCLASS / PYBIND11_MODULE, or a function
  definition (`Type name(args) {`). A block's `int main(` is compiled as `int snippet_main(`.
- `<!-- snippet-context ... -->` right before a block (blank lines between allowed) is hidden
  C++ that makes the block compile: the variables, helpers and includes the surrounding prose
  assumes. Its lines are read the same way and come first; the block's statements sit in a
  scope of their own below it, so a block may redeclare a context variable.
- `<!-- snippet-file-context ... -->` anywhere in the file: context for every block of the file.
- `<!-- snippet-skip: reason -->` right before a block leaves it out; the reason is required and
  shows in the markdown source. Any other `<!-- snippet...` comment is an error, as is a context
  or skip comment that no ```cpp block follows.

Each block becomes `namespace <file>_snippets::block_<line> { ... void snippet() { ... } }`, with
`#line` directives so that a compile error names the markdown file and line.
"""

import re
import sys

INFO_RE = re.compile(r"^```(\S*)\s*$")
COMMENT_OPEN_RE = re.compile(r"^<!--\s*(snippet[\w-]*)(:?)(.*)$")
TOP_LEVEL_WORDS = ("class", "struct", "enum", "union", "namespace", "using", "template", "typedef")
TOP_LEVEL_MACROS = ("TORCH_MODULE(", "TD_REGISTER_TENSORCLASS(", "PYBIND11_MODULE(")
NOT_A_TYPE = {"if", "for", "while", "switch", "return", "else", "do", "try", "catch", "case",
              "delete", "new", "throw", "co_return", "sizeof"}
# `Type name(args) {` / `Type Class::name(args) const {` (no `=` before the parameter list).
FUNCTION_DEF_RE = re.compile(r"^[A-Za-z_][\w:<>,*& ]*[\s*&]([A-Za-z_][\w:]*)\s*\([^=;]*\)\s*"
                             r"(const\s*)?(override\s*)?\{")


class SnippetError(Exception):
  pass


def strip_code(line):
  """The line without string / char literals and // comments (for brace counting)."""
  out, i, n = [], 0, len(line)
  while i < n:
    c = line[i]
    if line.startswith("//", i):
      break
    if c in "\"'":
      j = i + 1
      while j < n and line[j] != c:
        j += 2 if line[j] == "\\" else 1
      i = j + 1
      out.append(" ")
      continue
    out.append(c)
    i += 1
  return "".join(out)


def depth_change(line):
  s = strip_code(line)
  return s.count("{") + s.count("(") - s.count("}") - s.count(")")


def starts_top_level(line):
  s = line.strip()
  first = re.match(r"[A-Za-z_]\w*", s)
  if first and first.group(0) in TOP_LEVEL_WORDS:
    # `using x = y;` and `namespace a = b;` are declarations a function may hold too, but at
    # namespace scope they also serve the block's own top-level declarations.
    return True
  if s.startswith(TOP_LEVEL_MACROS):
    return True
  if first and first.group(0) in NOT_A_TYPE:
    return False
  return bool(FUNCTION_DEF_RE.match(s))


def split_code(lines):
  """(includes, top_level_runs, statement_runs); runs are (first_line_no, [lines])."""
  includes, top, body = [], [], []
  i = 0
  while i < len(lines):
    no, text = lines[i]
    s = text.strip()
    if s.startswith("#include"):
      includes.append((no, text))
      i += 1
      continue
    if s and starts_top_level(text):
      run, depth = [], 0
      while i < len(lines):
        no2, t2 = lines[i]
        run.append(t2)
        depth += depth_change(t2)
        i += 1
        stripped = strip_code(t2).rstrip()
        if depth <= 0 and (stripped.endswith(";") or stripped.endswith("}") or
                           stripped.endswith(")")):
          break
      top.append((no, run))
      continue
    # A statement run: until the next top-level item at depth 0.
    run, depth, first = [], 0, no
    while i < len(lines):
      no2, t2 = lines[i]
      s2 = t2.strip()
      if depth <= 0 and (s2.startswith("#include") or (s2 and starts_top_level(t2))):
        break
      run.append(t2)
      depth += depth_change(t2)
      i += 1
    body.append((first, run))
  return includes, top, body


def parse(text, path):
  """[(line_no, context_lines, code_lines or None, skip_reason)], file_context_lines."""
  lines = text.split("\n")
  blocks, file_context, pending, pending_skip = [], [], None, None
  i = 0

  def read_comment(start, rest):
    body, j = [], start + 1
    if "-->" in rest:
      return rest[:rest.index("-->")], [], start + 1
    while j < len(lines) and "-->" not in lines[j]:
      body.append((j + 1, lines[j]))
      j += 1
    if j == len(lines):
      raise SnippetError("%s:%d: unterminated <!-- snippet comment" % (path, start + 1))
    if lines[j].strip() != "-->":
      raise SnippetError("%s:%d: put --> on a line of its own" % (path, j + 1))
    return rest, body, j + 1

  while i < len(lines):
    line = lines[i]
    m = COMMENT_OPEN_RE.match(line.strip())
    if m:
      kind, rest = m.group(1), m.group(3)
      inline, body, i = read_comment(i, rest)
      if kind == "snippet-context":
        if pending is not None or pending_skip is not None:
          raise SnippetError("%s:%d: two snippet comments before one block" % (path, i))
        pending = body
      elif kind == "snippet-file-context":
        file_context.extend(body)
      elif kind == "snippet-skip":
        reason = inline.strip()
        if not reason:
          raise SnippetError("%s:%d: snippet-skip needs a reason: <!-- snippet-skip: why -->"
                             % (path, i))
        pending_skip = reason
      else:
        raise SnippetError("%s:%d: unknown snippet comment %r (snippet-context, "
                           "snippet-file-context, snippet-skip)" % (path, i, kind))
      continue
    fence = INFO_RE.match(line)
    if fence:
      info, start, code = fence.group(1), i + 1, []
      i += 1
      while i < len(lines) and not lines[i].startswith("```"):
        code.append((i + 1, lines[i]))
        i += 1
      i += 1
      if info == "cpp":
        blocks.append((start, pending or [], None if pending_skip else code, pending_skip))
      elif pending is not None or pending_skip is not None:
        raise SnippetError("%s:%d: a snippet comment before a ```%s block (only ```cpp blocks "
                           "are compiled)" % (path, start, info))
      pending, pending_skip = None, None
      continue
    if line.strip() and (pending is not None or pending_skip is not None):
      raise SnippetError("%s:%d: text between a snippet comment and its ```cpp block"
                         % (path, i + 1))
    i += 1
  if pending is not None or pending_skip is not None:
    raise SnippetError("%s: a snippet comment at the end with no ```cpp block" % path)
  return blocks, file_context


def emit_runs(out, runs, path, indent=""):
  for no, run in runs:
    out.append('#line %d "%s"' % (no, path))
    for t in run:
      out.append(indent + re.sub(r"\bint main\(", "int snippet_main(", t))


def generate(text, path):
  blocks, file_context = parse(text, path)
  stem = re.sub(r"\W", "_", path.rsplit("/", 1)[-1][:-3]) if path.endswith(".md") else "doc"
  includes, seen = [], set()
  parts = []
  f_inc, f_top, f_body = split_code(file_context)
  for no, t in f_inc:
    includes.append((no, t))
  for start, context, code, skip in blocks:
    if code is None:
      parts.append("// %s:%d: not compiled: %s" % (path, start, skip))
      continue
    c_inc, c_top, c_body = split_code(context)
    b_inc, b_top, b_body = split_code(code)
    includes.extend(c_inc + b_inc)
    out = ["namespace block_%d {" % start]
    emit_runs(out, c_top + b_top, path)
    out.append("void snippet() {")
    emit_runs(out, f_body + c_body, path, "  ")
    out.append("  {")
    emit_runs(out, b_body, path, "    ")
    out.append("  }")
    out.append("}")
    out.append("}  // namespace block_%d" % start)
    parts.append("\n".join(out))
  head = ["// Generated from %s by docs/snippet_extract.py for //docs:snippets_test; "
          "do not edit." % path,
          "// %d ```cpp blocks." % len(blocks),
          "#include <cstdint>", "#include <iostream>", "#include <memory>", "#include <optional>",
          "#include <string>", "#include <tuple>", "#include <utility>", "#include <vector>"]
  for no, t in includes:
    key = t.split("//")[0].strip()
    if key in seen:
      continue
    seen.add(key)
    head.append('#line %d "%s"' % (no, path))
    head.append(t)
  body = ["namespace %s_snippets {" % stem]
  emit_runs(body, f_top, path)
  body.extend(parts)
  body.append("}  // namespace %s_snippets" % stem)
  return "\n".join(head + body) + "\n"


SELF_TEST_MD = """# Title
<!-- snippet-file-context
#include "alpha.hpp"
int shared = 1;
-->
<!-- snippet-context
struct Helper { int x; };
Helper h{2};
-->

```cpp
#include "beta.hpp"
class C {
 public:
  int f() const { return 1; }
};
int g(int a) {
  return a;
}
if (h.x) { int y = g(shared); }
TORCH_MODULE(Foo);
for (int i = 0; i < 2; ++i) {
  std::string s = "}{";
}
int main() { return 0; }
```

<!-- snippet-skip: pseudo-code on purpose -->
```cpp
this is not C++
```

```sh
echo hi
```
"""


def self_test():
  out = generate(SELF_TEST_MD, "docs/x.md")
  expect = [
      '#include "alpha.hpp"', '#include "beta.hpp"', "namespace x_snippets {", "  int shared = 1;",
      "namespace block_11 {", "struct Helper { int x; };", "class C {", "int g(int a) {",
      "TORCH_MODULE(Foo);", "int snippet_main() { return 0; }", "void snippet() {",
      "  Helper h{2};", "    if (h.x) { int y = g(shared); }", '      std::string s = "}{";',
      "// docs/x.md:29: not compiled: pseudo-code on purpose", '#line 13 "docs/x.md"',
  ]
  missing = [e for e in expect if e not in out.split("\n")]
  assert not missing, "missing %r in:\n%s" % (missing, out)
  assert out.index("void snippet() {") > out.index("int g(int a) {"), out
  assert "this is not C++" not in out and "echo hi" not in out, out
  for bad, why in [("<!-- snippet-skip: -->\n```cpp\nx\n```\n", "needs a reason"),
                   ("<!-- snippet-bogus -->\n```cpp\nx\n```\n", "unknown snippet comment"),
                   ("<!-- snippet-skip: r -->\n```sh\nx\n```\n", "before a ```sh block"),
                   ("<!-- snippet-skip: r -->\ntext\n```cpp\nx\n```\n", "text between"),
                   ("<!-- snippet-context\nint a;\n-->\n", "at the end")]:
    try:
      generate(bad, "docs/bad.md")
    except SnippetError as e:
      assert why in str(e), (why, str(e))
    else:
      raise AssertionError("no error for %r" % bad)
  print("self-test ok")


def main(argv):
  if argv[1:] == ["--self-test"]:
    self_test()
    return 0
  if len(argv) != 2:
    sys.stderr.write(__doc__)
    return 2
  with open(argv[1], encoding="utf-8") as f:
    text = f.read()
  try:
    sys.stdout.write(generate(text, argv[1]))
  except SnippetError as e:
    sys.stderr.write("error: %s\n" % e)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
