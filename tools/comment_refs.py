#!/usr/bin/env python3
"""Checks that the repository's comments cite only NOTEs, Bazel targets and files that exist.

Run by //tools:comment_refs_test over the files of every package: each BUILD.bazel has an
`all_files` filegroup that tools/BUILD.bazel lists, so Bazel reruns the test when any of them
changes. The directories .bazelignore lists (tests/consumer/, tests/zip_layout/) and the
WORKSPACE's local_repository paths (third_party/offline/*) are separate workspaces that no
filegroup can hold: the test reads them from the source tree its runfiles link to, and Bazel does
not rerun it when only they change. //tools:comment_refs_selftest (`--self-test`) checks on a
made-up tree that each kind of dangling citation below is reported and that valid ones are not.
By hand, from the repository root: `python3 tools/comment_refs.py` (walks the tree, skipping
bazel-*, .cmake-build and .git). Python 3 standard library only, no network.

What is read. Every C++ file (.cc, .h, .def): its // and /* */ comments, plus NOTE citations in
string literals (error messages cite NOTEs too). Every Bazel/shell/Python file (BUILD, BUILD.bazel,
WORKSPACE, .bzl, .tpl, .sh, .py, .bazelrc, .bazelignore, an extensionless script with a #!
line): its # comments and triple-quoted docstrings. Every .md file: all of its text. The checker's
own source is not read (its header shows the forms it looks for).

The rules. A finding is printed as `file:line: message` and fails the test.

1. NOTEs. A note is defined by a comment line that holds its heading and nothing else,
   `// NOTE [ Name ]` (or `# NOTE [ Name ]`), with the note's text on the comment lines below.
   Every other `NOTE [ Name ]`, in a comment (it may wrap over comment lines), a string literal or
   a doc, cites it, and some file must define a note of exactly that name (whitespace aside).
   A name defined twice is reported too. `NOTE [ Name ]: text` starts no note: it cites one.
   A citation that names the note's file, `NOTE [ Name ] in path/file.h` or `NOTE [ Name ]
   (file.h)`, must name the file that defines it (the path, or its last parts).

2. Bazel labels: `//pkg`, `//pkg:target`, `//pkg/...`, `@tensordict//pkg:target`. The package
   must be a directory with a BUILD.bazel (or BUILD) in the workspace of the citing file (the
   nearest directory above it with a WORKSPACE: tests/consumer/ is its own; `@tensordict` is the
   main one); `//pkg` alone cites that package. The target of `//pkg:target` must be declared
   there: a `name = ...` of any rule or macro call (tools/cc.bzl's td_cc_* included, list
   comprehensions over names included: the BUILD file is evaluated with every call recorded), or
   a file of the package. `//pkg/...` and `//pkg:__subpackages__` need the directory only.
   `:all`, `:*`, `:__pkg__`, patterns (`//benchmarks:<name>`), `//visibility:...`,
   `//conditions:default` and other repositories (`@rules_cc//...`) are not checked further.

3. Files. A token `a/b/c` whose first part names a directory of the repository, looked up from the
   citing file's directory and from each directory above it up to the root (so `internal/x.h` in
   td/core/ means td/core/internal/x.h, `td/core/storage.h` is read from the root), must name a
   file or directory that exists there. A path whose first part names no directory of ours
   (`torch/nn.h`, `ATen/ops/xxx.h`, `tensordict/_td.py`) and anything in `<...>`, after `//`,
   `@` or `:`, or in a URL is not ours and is not checked. A bare file name with a C++ or Bazel
   extension (.h, .cc, .def, .bzl, .bazel, .sh) not followed by `(` (a call such as pybind11's
   m.def(...)) must be the name of some file of the repository,
   except in a .md file's ``` blocks (the reader's own app.cc). Paths are not checked under
   third_party/, whose comments cite the dependencies' own headers (absl/base/options.h).

4. Line numbers. `file.ext:123` (a file name with an extension, then a colon and a number) is
   rejected whether or not the file exists: line numbers rot; cite a NOTE, a function or a file.
"""

import argparse
import ast
import keyword
import os
import re
import sys
import tempfile

CPP_EXTS = {".cc", ".h", ".def"}
HASH_EXTS = {".bzl", ".tpl", ".sh", ".py"}
HASH_NAMES = {"BUILD", "BUILD.bazel", "WORKSPACE", ".bazelrc", ".bazelignore", ".gitignore"}
MD_EXTS = {".md"}
# Bare names with these extensions must be files of the repository.
BARE_EXTS = ("h", "cc", "def", "bzl", "bazel", "sh")
# A file name with an extension followed by :<number>.
LINE_CITATION_EXTS = ("h", "cc", "def", "bzl", "bazel", "sh", "py", "md", "tpl", "json")

NOTE_RE = re.compile(r"NOTE \[\s*([^\[\]]{1,200}?)\s*\]")
# The file a citation names for its note: `NOTE [ Name ] in file.h`, `NOTE [ Name ] (file.h)`.
NOTE_WHERE_RE = re.compile(r"\s*(?:in\s+|\(\s*)([\w./+-]+\.(?:h|cc|def|md|bzl|py|sh))\b")
NOTE_DEF_RE = re.compile(r"^\s*(?://|#)\s*NOTE \[\s*([^\[\]]+?)\s*\]\s*$")
LABEL_RE = re.compile(
    r"(?<![\w:/.@<-])(@[A-Za-z0-9_.-]*)?//([A-Za-z0-9_./-]*)(?::([A-Za-z0-9_./+=~*-]+))?")
PATH_RE = re.compile(r"(?<![\w./:@<$~-])([A-Za-z0-9_][\w.+-]*(?:/[\w.+-]+)+)")
BARE_RE = re.compile(r"(?<![\w./:@<$~-])([\w+-][\w.+-]*\.(?:%s))(?![\w/(])" % "|".join(BARE_EXTS))
LINE_RE = re.compile(r"(?<![\w.-])([\w./+-]*\.(?:%s)):(\d+)" % "|".join(LINE_CITATION_EXTS))
URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")


def norm(name):
  return " ".join(name.split())


def kind_of(path):
  base = os.path.basename(path)
  ext = os.path.splitext(base)[1]
  if ext in CPP_EXTS:
    return "cpp"
  if ext in MD_EXTS:
    return "md"
  if ext in HASH_EXTS or base in HASH_NAMES:
    return "hash"
  if ext == "":
    try:
      with open(path, "rb") as f:
        first = f.readline(200)
    except OSError:
      return None
    if first.startswith(b"#!") and (b"sh" in first or b"python" in first):
      return "hash"
  return None


# ---- comment extraction -------------------------------------------------------------------------
# Each extractor returns (comments, strings): lists of (line number, text) pieces. A comment that
# spans lines gives one piece per line.


def cpp_comments(text):
  comments, strings = [], []
  i, n, line = 0, len(text), 1
  while i < n:
    c = text[i]
    if c == "\n":
      line += 1
      i += 1
    elif text.startswith("//", i):
      j = text.find("\n", i)
      j = n if j < 0 else j
      comments.append((line, text[i + 2:j]))
      i = j
    elif text.startswith("/*", i):
      j = text.find("*/", i + 2)
      j = n if j < 0 else j
      for k, part in enumerate(text[i + 2:j].split("\n")):
        comments.append((line + k, re.sub(r"^\s*\*(?!/)", "", part)))
      line += text.count("\n", i, j)
      i = j + 2
    elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
      m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
      if not m:
        i += 1
        continue
      end = text.find(")" + m.group(1) + '"', i)
      end = n if end < 0 else end
      for k, part in enumerate(text[i:end].split("\n")):
        strings.append((line + k, part))
      line += text.count("\n", i, end)
      i = end + len(m.group(1)) + 2
    elif c in "\"'":
      if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
        i += 1
        continue
      j = i + 1
      while j < n and text[j] != c and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
      if c == '"':
        strings.append((line, text[i + 1:j]))
      i = j + 1
    else:
      i += 1
  return comments, strings


def hash_comments(text, docstrings):
  """# comments (not inside a quoted string of that line), and triple-quoted strings."""
  comments, lines = [], text.split("\n")
  in_triple = None
  for no, raw in enumerate(lines, 1):
    i, quote = 0, None
    while i < len(raw):
      if in_triple:
        end = raw.find(in_triple, i)
        piece = raw[i:] if end < 0 else raw[i:end]
        comments.append((no, piece))
        if end < 0:
          i = len(raw)
        else:
          i = end + 3
          in_triple = None
        continue
      c = raw[i]
      if quote:
        if c == "\\":
          i += 2
          continue
        if c == quote:
          quote = None
      elif docstrings and raw.startswith(('"""', "'''"), i):
        in_triple = raw[i:i + 3]
        i += 3
        continue
      elif c in "\"'":
        quote = c
      elif c == "#" and (i == 0 or raw[i - 1] in " \t;(") and not raw[:i].endswith("$"):
        comments.append((no, raw[i + 1:]))
        break
      i += 1
  return comments, []


def extract(path, kind, text):
  if kind == "cpp":
    return cpp_comments(text)
  if kind == "md":
    return [(no, l) for no, l in enumerate(text.split("\n"), 1)], []
  base = os.path.basename(path)
  docstrings = base.endswith((".py", ".bzl")) or base in ("BUILD", "BUILD.bazel", "WORKSPACE")
  return hash_comments(text, docstrings)


def joined_notes(pieces):
  """NOTE citations in runs of consecutive comment lines, which may wrap: (line, name, the file
  the citation says the note is in, or None)."""
  out = []
  run = []

  def flush():
    if not run:
      return
    buf, starts = "", []
    for no, t in run:
      t = t.strip()
      if buf:
        buf += " "
      starts.append((len(buf), no))
      buf += t
    for m in NOTE_RE.finditer(buf):
      no = [ln for off, ln in starts if off <= m.start()][-1]
      where = NOTE_WHERE_RE.match(buf, m.end())
      out.append((no, norm(m.group(1)), where.group(1) if where else None))
    run.clear()

  prev = None
  for no, t in pieces:
    if prev is not None and no > prev + 1:
      flush()
    if prev == no and run:  # two comments on one line: join
      run[-1] = (no, run[-1][1] + " " + t)
    else:
      run.append((no, t))
    prev = no
  flush()
  return out


# ---- the repository -----------------------------------------------------------------------------


# Never read: build outputs and tool droppings (.cmake-build holds links into LibTorch's headers).
SKIPPED_DIRS = (".git", ".cmake-build", "__pycache__")


class Repo:
  def __init__(self, root):
    self.root = os.path.abspath(root)
    self.files = {}  # relative path -> absolute path
    self.dirs = {""}
    self.basenames = set()
    self._walk(self.root, "")
    # Under Bazel, `root` is the test's runfiles: the directories .bazelignore lists and the
    # WORKSPACE's local_repository paths (separate workspaces) cannot be in them, so those are
    # read from the source tree the runfiles link to.
    source = os.path.dirname(os.path.realpath(os.path.join(self.root, "BUILD.bazel")))
    if source != os.path.realpath(self.root):
      entries = []
      for name, pattern in ((".bazelignore", r"^([^#\s][^#]*?)\s*$"),
                            ("WORKSPACE", r"^\s*path\s*=\s*\"([^\"/][^\"]*)\"")):
        if name in self.files:
          with open(self.files[name], encoding="utf-8") as f:
            entries += re.findall(pattern, f.read(), re.M)
      for entry in entries:
        entry = os.path.normpath(entry.strip("/"))
        if (entry not in self.dirs and entry.split("/")[0] not in SKIPPED_DIRS
            and os.path.isdir(os.path.join(source, entry))):
          self._walk(os.path.join(source, entry), entry)

  def _walk(self, top, prefix):
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
      rel = os.path.relpath(dirpath, top)
      rel = prefix if rel == "." else os.path.join(prefix, rel) if prefix else rel
      dirnames[:] = sorted(d for d in dirnames
                           if not d.startswith("bazel-") and d not in SKIPPED_DIRS
                           and not (rel == "" and d == "external"))
      parts = rel.split("/") if rel else []
      for i in range(len(parts)):
        self.dirs.add("/".join(parts[:i + 1]))
      for d in dirnames:
        self.dirs.add(os.path.join(rel, d))
      for f in filenames:
        self.files[os.path.join(rel, f)] = os.path.join(dirpath, f)
        self.basenames.add(f)
    self.workspaces = {os.path.dirname(p) for p in self.files
                       if os.path.basename(p) in ("WORKSPACE", "WORKSPACE.bazel")}
    self.workspaces.add("")
    self._targets = {}

  def exists(self, rel):
    rel = os.path.normpath(rel)
    rel = "" if rel == "." else rel
    return rel in self.files or rel in self.dirs

  def workspace_of(self, rel):
    d = os.path.dirname(rel)
    while True:
      if d in self.workspaces:
        return d
      if d == "":
        return ""
      d = os.path.dirname(d)

  def build_file(self, pkg_dir):
    for b in ("BUILD.bazel", "BUILD"):
      p = os.path.join(pkg_dir, b) if pkg_dir else b
      if p in self.files:
        return p
    return None

  def targets(self, build):
    if build not in self._targets:
      with open(self.files[build], encoding="utf-8", errors="replace") as f:
        self._targets[build] = build_names(f.read())
    return self._targets[build]


def build_names(text):
  """The names declared by a BUILD file: it is evaluated as Python with every call recorded."""
  names = set(re.findall(r"\bname\s*=\s*\"([^\"]+)\"", text))

  class Any(list):
    def __call__(self, *args, **kwargs):
      return record(*args, **kwargs)

    def __getattr__(self, _):
      return Any()

  def record(*args, **kwargs):
    n = kwargs.get("name")
    if isinstance(n, str):
      names.add(n)
    return Any()

  env = {"__builtins__": {"len": len, "sorted": sorted, "str": str, "list": list, "dict": dict,
                          "range": range, "enumerate": enumerate, "zip": zip, "True": True,
                          "False": False, "None": None}}
  for ident in set(re.findall(r"\b[A-Za-z_]\w*\b", text)):
    if not keyword.iskeyword(ident) and ident not in env["__builtins__"]:
      env[ident] = Any()
  env["load"] = lambda *a, **k: None
  try:
    exec(compile(ast.parse(text), "<BUILD>", "exec"), env)  # noqa: S102 (our own BUILD files)
  except Exception:  # pylint: disable=broad-except
    pass  # the `name = "..."` literals above still count
  return names


# ---- the checks ---------------------------------------------------------------------------------

SKIP_LABEL_PKGS = {"visibility", "conditions"}
ANY_TARGET = {"all", "*", "all-targets", "__pkg__"}


def check_label(repo, rel, repo_name, pkg, target):
  """An error message for a dangling label, or None."""
  if repo_name not in (None, "@", "@tensordict"):
    return None
  wildcard = False
  if pkg.endswith("/...") or pkg == "...":
    wildcard, pkg = True, pkg[:-3].rstrip("/")
  if target is None:
    pkg = pkg.rstrip("./")
  else:
    target = target.rstrip(".")
  if pkg in SKIP_LABEL_PKGS or (pkg == "" and target is None and not wildcard):
    return None
  ws = "" if repo_name == "@tensordict" else repo.workspace_of(rel)
  pkg_dir = os.path.join(ws, pkg) if ws else pkg
  pkg_dir = pkg_dir.rstrip("/")
  label = (repo_name or "") + "//" + pkg + (("/..." if pkg else "...") if wildcard else "") + \
      (":" + target if target is not None else "")
  if wildcard or target == "__subpackages__":
    return None if pkg_dir in repo.dirs else "label %s: no directory %s" % (label, pkg_dir or ".")
  build = repo.build_file(pkg_dir)
  if build is None:
    return "label %s: no package (no BUILD.bazel in %s)" % (label, pkg_dir or ".")
  if target is None:
    return None  # //pkg: the package (or its default target), which exists
  name = target
  if name in ANY_TARGET or name in repo.targets(build):
    return None
  if os.path.join(pkg_dir, name) in repo.files:
    return None
  return "label %s: %s declares no target %r" % (label, build, name)


def resolve_path(repo, rel, token):
  """None if `token` is not one of ours or exists; else an error message."""
  token = token.rstrip(".")
  first = token.split("/")[0]
  d = os.path.dirname(rel)
  bases = []
  while True:
    bases.append(d)
    if d == "":
      break
    d = os.path.dirname(d)
  ours = [b for b in bases if os.path.join(b, first) in repo.dirs]
  if not ours:
    return None
  if any(repo.exists(os.path.join(b, token)) for b in ours):
    return None
  return "file %s does not exist (looked in %s)" % (
      token, ", ".join((b or ".") + "/" for b in ours))


def md_code_lines(lines):
  """The line numbers inside ``` fenced blocks of a .md file."""
  out, fenced = set(), False
  for no, line in enumerate(lines, 1):
    if line.lstrip().startswith("```"):
      fenced = not fenced
    elif fenced:
      out.add(no)
  return out


def check_file(repo, rel, kind, text, notes_cited, notes_defined, errors):
  comments, strings = extract(rel, kind, text)
  lines = text.split("\n")
  # The reader's own files in examples (cc_binary(srcs = ["app.cc"])) are not ours.
  no_bare = md_code_lines(lines) if kind == "md" else set()
  # third_party/ cites the dependencies' own header paths (absl/base/options.h).
  check_paths = not rel.startswith("third_party/")
  if kind in ("cpp", "hash"):
    for no, line in enumerate(lines, 1):
      m = NOTE_DEF_RE.match(line)
      if m:
        notes_defined.setdefault(norm(m.group(1)), []).append("%s:%d" % (rel, no))
  for no, name, where in joined_notes(comments) + joined_notes(strings):
    if NOTE_DEF_RE.match(lines[no - 1]) and norm(NOTE_DEF_RE.match(lines[no - 1]).group(1)) == name:
      continue
    notes_cited.append((rel, no, name, where))
  for no, t in comments:
    t = URL_RE.sub(" ", t)
    for m in LABEL_RE.finditer(t):
      if t[m.end():m.end() + 2] in (":<", "/<") or t[m.end():m.end() + 1] == "<":
        continue  # a pattern: //benchmarks:<name>, //td/backends/<name>
      err = check_label(repo, rel, m.group(1), m.group(2), m.group(3))
      if err:
        errors.append((rel, no, err))
    t = LABEL_RE.sub(" ", t)
    for m in LINE_RE.finditer(t):
      errors.append((rel, no, "line-number citation %s:%s: line numbers rot; cite a NOTE, a "
                     "function or the file" % (m.group(1), m.group(2))))
    t = LINE_RE.sub(lambda m: m.group(1), t)
    if not check_paths:
      continue
    t = re.sub(r"\S*<[^<>\s]+>\S*", " ", t)  # <torch/torch.h>, <backend>_conformance_test.cc
    for m in PATH_RE.finditer(t):
      err = resolve_path(repo, rel, m.group(1))
      if err:
        errors.append((rel, no, err))
    if no in no_bare:
      continue
    for m in BARE_RE.finditer(PATH_RE.sub(" ", t)):
      if m.group(1) not in repo.basenames:
        errors.append((rel, no, "file %s: no file of that name in the repository" % m.group(1)))


def run(root, out=sys.stdout):
  """Checks the tree at `root`; returns the findings as (file, line, message), sorted."""
  repo = Repo(root)
  errors, cited, defined = [], [], {}
  me = os.path.realpath(__file__)
  scanned = 0
  for rel in sorted(repo.files):
    path = repo.files[rel]
    kind = kind_of(path)
    if kind is None or os.path.realpath(path) == me:
      continue
    try:
      with open(path, encoding="utf-8") as f:
        text = f.read()
    except (UnicodeDecodeError, OSError):
      continue
    check_file(repo, rel, kind, text, cited, defined, errors)
    scanned += 1
  for name, where in defined.items():
    if len(where) > 1:
      for w in where[1:]:
        f, no = w.rsplit(":", 1)
        errors.append((f, int(no), "NOTE [ %s ] defined again (first at %s)" % (name, where[0])))
  for f, no, name, where in cited:
    if name not in defined:
      errors.append((f, no, "NOTE [ %s ] is defined nowhere (a definition is a comment line "
                     "holding `NOTE [ %s ]` alone)" % (name, name)))
    elif where is not None:
      files = [d.rsplit(":", 1)[0] for d in defined[name]]
      if not any(d == where or d.endswith("/" + where.lstrip("./")) for d in files):
        errors.append((f, no, "NOTE [ %s ] is defined in %s, not in %s" %
                       (name, ", ".join(files), where)))
  errors.sort()
  print("%d files read, %d NOTEs defined, %d cited" % (scanned, len(defined), len(cited)), file=out)
  for f, no, msg in errors:
    print("%s:%d: %s" % (f, no, msg), file=out)
  return errors


# ---- self-test ----------------------------------------------------------------------------------

SELF_TEST_TREE = {
    "WORKSPACE": 'workspace(name = "tensordict")\n',
    "BUILD.bazel": 'exports_files(["README.md"])\n',
    "README.md": ("See NOTE [ Good\nnote ] and `//lib:good`, `//lib`, `//lib/...`, "
                  "lib/good.h, `//:README.md`, https://example.com//lib:gone.\n"
                  "Dangling: NOTE [ Missing note ], `//lib:gone`.\n"),
    "lib/BUILD.bazel": ('load("//tools:cc.bzl", "td_cc_test")\n'
                        '# Targets: //lib:good_test, //lib:made_test, //nopkg:x\n'
                        'cc_library(name = "lib", srcs = ["good.h"])\n'
                        'filegroup(name = "good")\n'
                        '[td_cc_test(name = n + "_test") for n in ["good", "made"]]\n'),
    "lib/good.h": ("// NOTE [ Good note ]\n"
                   "// The body. See internal/inner.h and good.cc, //lib:good_test; NOTE [ Good\n"
                   "// note ] (lib/good.cc) and NOTE [ Good note ] in internal/inner.h.\n"
                   "/* NOTE [ Good note ] in a block; lib/inner.h is gone */\n"
                   "const char* kMsg = \"see NOTE [ Nowhere ]\";  // td.h:12 rots\n"
                   "// Wraps: NOTE [ Also\n"
                   "// missing ] and a bare gone.cc; <torch/torch.h>, ATen/ops/add.h are fine.\n"),
    "lib/good.cc": "// NOTE [ Good note ]\n// defined twice\n",
    "lib/internal/inner.h": "int x;\n",
    "lib/run.sh": "#!/bin/bash\necho \"# //lib:not_a_comment\"  # but //lib:gone_sh is\n",
    "tools/BUILD.bazel": "",
    "tools/cc.bzl": '"""Docstring citing //tools:missing."""\n',
    "sub/WORKSPACE": "",
    "sub/BUILD.bazel": 'cc_test(name = "t", deps = ["@tensordict//lib"])\n# //:t //lib\n',
}

SELF_TEST_EXPECTED = [
    ("README.md", 3, "NOTE [ Missing note ] is defined nowhere"),
    ("README.md", 3, "label //lib:gone: lib/BUILD.bazel declares no target 'gone'"),
    ("lib/BUILD.bazel", 2, "label //nopkg:x: no package"),
    ("lib/good.h", 1, "NOTE [ Good note ] defined again"),
    ("lib/good.h", 3, "NOTE [ Good note ] is defined in lib/good.cc, lib/good.h, not in "
     "internal/inner.h"),
    ("lib/good.h", 4, "file lib/inner.h does not exist"),
    ("lib/good.h", 5, "NOTE [ Nowhere ] is defined nowhere"),
    ("lib/good.h", 5, "line-number citation td.h:12"),
    ("lib/good.h", 5, "file td.h: no file of that name"),
    ("lib/good.h", 6, "NOTE [ Also missing ] is defined nowhere"),
    ("lib/good.h", 7, "file gone.cc: no file of that name"),
    ("lib/run.sh", 2, "label //lib:gone_sh: lib/BUILD.bazel declares no target 'gone_sh'"),
    ("sub/BUILD.bazel", 2, "label //lib: no package (no BUILD.bazel in sub/lib)"),
    ("tools/cc.bzl", 1, "label //tools:missing: tools/BUILD.bazel declares no target"),
]


def self_test():
  with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
    for rel, content in SELF_TEST_TREE.items():
      os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
      with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
        f.write(content)

    class Sink:
      def write(self, s):
        sys.stdout.write(s)

    print("self-test findings:")
    got = run(tmp, Sink())
  ok = True
  for f, no, want in SELF_TEST_EXPECTED:
    if not any(g[0] == f and g[1] == no and want in g[2] for g in got):
      print("NOT REPORTED: %s:%d: %s" % (f, no, want))
      ok = False
  for g in got:
    if not any(g[0] == f and g[1] == no and want in g[2] for f, no, want in SELF_TEST_EXPECTED):
      print("REPORTED BUT VALID: %s:%d: %s" % g)
      ok = False
  print("self-test " + ("passed" if ok else "FAILED"))
  return 0 if ok else 1


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--root", help="the tree to check (default: the Bazel runfiles of the "
                      "main workspace, or the repository this script is in)")
  parser.add_argument("--self-test", action="store_true")
  args = parser.parse_args()
  if args.self_test:
    return self_test()
  root = args.root
  if root is None and os.environ.get("TEST_SRCDIR"):
    root = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "tensordict"))
  if root is None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  errors = run(root)
  if errors:
    print("\n%d dangling citation(s); rules: the header of tools/comment_refs.py" % len(errors))
    return 1
  print("comment references: all resolve")
  return 0


if __name__ == "__main__":
  sys.exit(main())
