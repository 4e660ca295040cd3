#!/usr/bin/env python3
"""Writes the CMake build of tensordict from its Bazel BUILD files, or checks it is current.

Bazel is the source of truth (NOTE [ CMake from Bazel ]). This tool evaluates each BUILD.bazel
under td/, tests/conformance/ and tests/generative/ (Starlark here is a subset of Python: the
rules are plain functions that record their arguments) and writes, next to it, a CMakeLists.txt
that declares the same targets with the functions of cmake/tensordict_rules.cmake. It also writes
tests/consumer_cmake/alone.cmake, the programs of the CMake consumer, from
tests/public_targets.bzl, and cmake/tensordict_warnings.cmake from tools/cc.bzl.

  python3 tools/bazel_to_cmake.py           # rewrite the generated files
  python3 tools/bazel_to_cmake.py --check   # exit 1, naming each target that differs

//tools:cmake_fresh_test runs the check under Bazel.

# NOTE [ CMake from Bazel ]
# A Bazel target //td/<path>:<name> is the CMake target tensordict::<stem>, where <stem> is <path>
# with "/" replaced by "_", followed by "_<name>" when <name> differs from the last component of
# <path> (//td/core -> tensordict::core, //td/core:errors -> tensordict::core_errors,
# //td/backends/memmap -> tensordict::backends_memmap, //td:version -> tensordict::version).
# Outside td/ the whole package path is the stem (//tests/conformance:suite ->
# tests_conformance_suite). The library's file is libtensordict_<stem>.
# External repositories map to names that cmake/tensordict_rules.cmake resolves with the
# find_package results (EXTERNAL below). A target is Bazel-only when it is a rule CMake does not
# build (sh_test, a genrule other than those of CMAKE_GENRULES, a linkshared binary), needs a
# file only Bazel generates, or depends on a Bazel-only target or on an external repository with
# no CMake counterpart (the Python headers of //td/python); the generated file lists each with
# its reason.
# A target Bazel declares only where LibTorch has AOTInductor's package loader (`for _ in
# IF_AOTI`, td/compat/aoti.bzl) is written inside `if(TD_LIBTORCH_HAS_AOTI)`, which
# cmake/tensordict_deps.cmake sets from the same header: on LibTorch 1.13 CMake defines none of
# them, as Bazel declares none. A genrule of CMAKE_GENRULES runs its Python script into the build
# tree, at the paths Bazel writes under its bin folder (<package>/<out>); a test that reads its
# outputs runs in the build tree (the others run in the source root), or, where no Python fit to
# run the script was found, is registered as skipped with the reason.
"""

import argparse
import difflib
import os
import pathlib
import re
import sys
import textwrap

ROOTS = ["td", "tests/conformance", "tests/format_conformance", "tests/generative"]
HEADER_EXTS = (".h", ".def", ".inc")
SOURCE_EXTS = (".cc", ".cpp")

# Bazel external label -> the name cmake/tensordict_rules.cmake's td_external() maps to targets.
EXTERNAL = {
    "@tensordict_absl//:absl": "absl",
    "@tensordict_libtorch//:libtorch": "torch",
    "@tensordict_libtorch//:c10d": "c10d",
    "@tensordict_tbb//:tbb": "tbb",
    "@tensordict_json//:json": "json",
    "@tensordict_hdf5//:hdf5": "hdf5",
    "@tensordict_zlib//:zlib": "zlib",
    "@tensordict_zstd//:zstd": "zstd",
    "@tensordict_blosc//:blosc": "blosc",
    "@tensordict_gtest//:gtest": "gtest",
    "@tensordict_gtest//:gtest_main": "gtest_main",
    "@tensordict_gtest//:gmock": "gmock",
    "@tensordict_gtest//:gmock_main": "gmock_main",
}
# External repositories the CMake build has no counterpart for, and why.
EXTERNAL_BAZEL_ONLY = {
    "@tensordict_python": "needs Python's headers and pybind11 (Python users build the caster "
    "with torch.utils.cpp_extension, docs/python.md)",
}

# Packages the CMake build leaves out, and why (their targets are listed as Bazel-only).
BAZEL_ONLY_PACKAGES = {}
# Packages only a CUDA LibTorch builds: Bazel declares nothing in them (IF_CUDA of their cuda.bzl
# is empty: the Bazel build links the system's CPU LibTorch); CMake declares their targets inside
# `if(TENSORDICT_CUDA)` (CMakeLists.txt's option, which needs Torch's CUDA targets) and links
# them to LibTorch's CUDA libraries (td_external "torch_cuda" in cmake/tensordict_rules.cmake).
CUDA_PACKAGES = {"td/nn/cuda_graph"}
# Targets of other packages the CMake build leaves out, and why.
BAZEL_ONLY_TARGETS = {}
# What BUILD files load from .bzl files this tool does not evaluate: the values under which
# every target is declared (td/compat/aoti.bzl's, as on a LibTorch with the loader; IF_CUDA:
# td/nn/cuda_graph/cuda.bzl's, as with a CUDA LibTorch, see CUDA_PACKAGES), and those of a
# LibTorch without the loader. Each BUILD file is evaluated with both; a target only the first
# declares is written inside `if(AOTI_CONDITION)`.
LOADED_VALUES = {"IF_AOTI": [1], "LIBTORCH_HAS_AOTI": True, "IF_CUDA": [1]}
LOADED_VALUES_WITHOUT_AOTI = {"IF_AOTI": [], "LIBTORCH_HAS_AOTI": False, "IF_CUDA": [1]}
AOTI_CONDITION = "TD_LIBTORCH_HAS_AOTI"
# The genrules CMake runs (td_cmake_python_genrule of cmake/tensordict_rules.cmake), each with
# the Python it needs, by the name cmake/tensordict_rules.cmake finds it under. The command must
# be `[VAR=value ...] python3 $(location <script>) $(RULEDIR)/<dir> [>/dev/null]` with every
# output under <dir>. Other genrules are Bazel-only.
CMAKE_GENRULES = {
    # torch with AOTInductor's export, of LibTorch's version (td/nn/aoti/testdata/
    # export_policies.py).
    "//td/nn/aoti:exported": "aoti",
}

SIZE_SECONDS = {"small": 60, "medium": 300, "large": 900, "enormous": 3600}
TIMEOUT_SECONDS = {"short": 60, "moderate": 300, "long": 900, "eternal": 3600}


class Rule:
    def __init__(self, kind, package, attrs):
        self.kind = kind
        self.package = package
        self.name = attrs.pop("name")
        self.attrs = attrs
        # True when Bazel declares it only where LibTorch has AOTInductor's package loader.
        self.aoti_only = False

    @property
    def label(self):
        return "//%s:%s" % (self.package, self.name)

    def get(self, key, default=None):
        return self.attrs.get(key, default if default is not None else [])


def stem(package, name):
    parts = package.split("/")
    if parts[0] == "td":
        parts = parts[1:]
    if not parts or parts[-1] != name:
        parts = parts + [name]
    return "_".join(parts)


def resolve(label, package):
    """A label as written in `package` -> (package, name), or None for a source file."""
    if label.startswith("@"):
        return None
    if label.startswith("//"):
        pkg, _, name = label[2:].partition(":")
        return pkg, name or pkg.split("/")[-1]
    if label.startswith(":"):
        return package, label[1:]
    return None


class Package:
    def __init__(self, root, path):
        self.root = root
        self.path = path  # e.g. "td/core"
        self.rules = []

    def evaluate(self):
        """Records the rules, each marked aoti_only when Bazel declares it only with the loader."""
        self.rules = self._rules(LOADED_VALUES_WITHOUT_AOTI)
        without = {r.label for r in self.rules}
        self.rules = self._rules(LOADED_VALUES)
        for r in self.rules:
            r.aoti_only = r.label not in without

    def _rules(self, loaded_values):
        build = self.root / self.path / "BUILD.bazel"
        scope = {}
        rules = []

        def record(kind):
            def rule(**attrs):
                rules.append(Rule(kind, self.path, dict(attrs)))
            return rule

        def ignored(*args, **kwargs):
            pass

        def glob(include, exclude=(), **kwargs):
            base = self.root / self.path
            found = set()
            for pattern in include:
                for p in base.glob(pattern):
                    rel = p.relative_to(base)
                    if p.is_file() and not self._in_subpackage(rel):
                        found.add(str(rel))
            for pattern in exclude:
                found -= {str(p.relative_to(base)) for p in base.glob(pattern)}
            return sorted(found)

        def select(*args, **kwargs):
            raise SystemExit("%s: select() has no CMake translation here" % build)

        def load(module, *names, **aliases):
            # The rules below stand in for everything //tools:cc.bzl defines.
            scope.update({n: loaded_values[n] for n in names if n in loaded_values})

        scope.update(
            load=load,
            glob=glob,
            select=select,
            package=ignored,
            exports_files=ignored,
            filegroup=record("filegroup"),
            genrule=record("genrule"),
            sh_test=record("sh_test"),
            cc_library=record("library"),
            cc_test=record("test"),
            cc_binary=record("binary"),
            td_cc_library=record("library"),
            td_cc_test=record("test"),
            td_cc_binary=record("binary"),
        )
        exec(compile(build.read_text(), str(build), "exec"), scope)
        return rules

    def _in_subpackage(self, rel):
        parent = rel.parent
        while str(parent) != ".":
            if (self.root / self.path / parent / "BUILD.bazel").exists():
                return True
            parent = parent.parent
        return False


def load_packages(root):
    packages = {}
    for r in ROOTS:
        for build in sorted((root / r).rglob("BUILD.bazel")):
            path = str(build.parent.relative_to(root))
            pkg = Package(root, path)
            pkg.evaluate()
            packages[path] = pkg
    return packages


def bazel_only_reasons(packages):
    """label -> why CMake does not build it, for every Bazel-only rule (transitively)."""
    rules = {r.label: r for p in packages.values() for r in p.rules}
    reasons = {}
    for r in rules.values():
        if r.package in BAZEL_ONLY_PACKAGES and r.kind != "filegroup":
            reasons[r.label] = BAZEL_ONLY_PACKAGES[r.package]
            continue
        if r.label in BAZEL_ONLY_TARGETS:
            reasons[r.label] = BAZEL_ONLY_TARGETS[r.label]
            continue
        if r.kind == "sh_test" or (r.kind == "genrule" and r.label not in CMAKE_GENRULES):
            reasons[r.label] = "a %s, which CMake does not run" % r.kind
        if r.kind == "test" and generated_data(r) and source_data(r):
            reasons[r.label] = ("reads files of both the source tree and a genrule, and a CMake "
                                "test runs in one of the two")
        if r.kind == "binary" and r.get("linkshared", False):
            reasons[r.label] = ("a shared object bundling libraries for Python extensions; CMake "
                                "users link the libraries themselves")
    changed = True
    while changed:
        changed = False
        for r in rules.values():
            if r.label in reasons or r.kind == "filegroup":
                continue
            why = None
            for dep in r.get("deps"):
                for repo, text in EXTERNAL_BAZEL_ONLY.items():
                    if dep.startswith(repo + "//"):
                        why = text
                target = resolve(dep, r.package)
                if target and "//%s:%s" % target in reasons:
                    why = "depends on //%s:%s" % target
            for item in r.get("data"):
                target = resolve(item, r.package)
                if target and "//%s:%s" % target in reasons:
                    why = "needs the output of //%s:%s" % target
            if why:
                reasons[r.label] = why
                changed = True
    return reasons


def generated_data(rule):
    """The CMAKE_GENRULES targets among `rule`'s data, as CMake stems."""
    found = []
    for item in rule.get("data"):
        target = resolve(item, rule.package)
        if target and "//%s:%s" % target in CMAKE_GENRULES:
            found.append(stem(*target))
    return found


def source_data(rule):
    """`rule`'s data items read from the source tree: all but genrule outputs and the targets
    its args name with $(location) (those reach the test by their path in the build tree)."""
    args = " ".join(rule.get("args"))
    found = []
    for item in rule.get("data"):
        target = resolve(item, rule.package)
        if target and "//%s:%s" % target in CMAKE_GENRULES:
            continue
        if "$(location %s)" % item in args:
            continue
        found.append(item)
    return found


GENRULE_COMMAND = re.compile(
    r"(?P<env>(?:[A-Z_]+=(?:\$\$\([^)]*\)|\S+) )*)python3 \$\(location (?P<script>\S+)\) "
    r"\$\(RULEDIR\)/(?P<dir>[\w./-]+)(?: >/dev/null)?")
# Variables a genrule's command may set that td_cmake_python_genrule sets itself.
GENRULE_ENV = {"TORCHINDUCTOR_CACHE_DIR"}


def genrule_lines(rule):
    """The arguments of td_cmake_python_genrule for a CMAKE_GENRULES genrule, as lines."""
    match = GENRULE_COMMAND.fullmatch(rule.get("cmd", ""))
    if not match:
        raise SystemExit("%s: no CMake translation of the command %r (CMAKE_GENRULES in %s)" %
                         (rule.label, rule.get("cmd", ""), __file__))
    env = set(re.findall(r"([A-Z_]+)=", match.group("env")))
    if env - GENRULE_ENV:
        raise SystemExit("%s: the command sets %s, which td_cmake_python_genrule does not" %
                         (rule.label, ", ".join(sorted(env - GENRULE_ENV))))
    script, out_dir = match.group("script"), match.group("dir")
    if list(rule.get("srcs")) != [script]:
        raise SystemExit("%s: srcs must be the script alone" % rule.label)
    outs = list(rule.get("outs"))
    for out in outs:
        if not out.startswith(out_dir + "/"):
            raise SystemExit("%s: output %s is not under %s" % (rule.label, out, out_dir))
    lines = ["  PYTHON %s" % CMAKE_GENRULES[rule.label], "  SCRIPT %s" % script,
             "  OUT_DIR %s" % out_dir]
    return lines + format_list("OUTS", outs)


def cmake_name(rule_label):
    pkg, name = resolve(rule_label, "")
    return stem(pkg, name)


def format_list(key, items):
    """`  KEY a b c`, continued on lines of at most 100 columns."""
    lines = []
    for item in items:
        if lines and len(lines[-1]) + 1 + len(item) <= 100:
            lines[-1] += " " + item
        else:
            lines.append(("  %s " % key if not lines else " " * (len(key) + 3)) + item)
    return lines


def quote(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def rule_block(rule):
    """The CMake call for one rule, as lines."""
    name = cmake_name(rule.label)
    srcs = list(rule.get("srcs"))
    hdrs = list(rule.get("hdrs"))
    deps, external = [], []
    for dep in rule.get("deps"):
        if dep.startswith("@"):
            if dep not in EXTERNAL:
                raise SystemExit("%s: no CMake counterpart for %s (EXTERNAL in %s)" %
                                 (rule.label, dep, __file__))
            ext = EXTERNAL[dep]
            external.append("torch_cuda" if ext == "torch" and rule.package in CUDA_PACKAGES
                            else ext)
        else:
            pkg, dep_name = resolve(dep, rule.package)
            deps.append(stem(pkg, dep_name))
    lines = ["# %s" % rule.label]
    function = {"library": "td_cmake_library", "test": "td_cmake_test",
                "binary": "td_cmake_binary", "genrule": "td_cmake_python_genrule"}[rule.kind]
    lines.append("%s(%s" % (function, name))
    if rule.kind == "genrule":
        lines += genrule_lines(rule)
        lines[-1] += ")"
        return name, lines
    flags = []
    if rule.get("testonly", False):
        flags.append("TESTONLY")
    if rule.get("alwayslink", False):
        flags.append("ALWAYSLINK")
    if flags:
        lines.append("  " + " ".join(flags))
    lines += format_list("SRCS", srcs)
    lines += format_list("HDRS", hdrs)
    lines += format_list("DEPS", deps)
    lines += format_list("EXTERNAL", external)
    lines += format_list("COPTS", [quote(c) for c in rule.get("copts")])
    lines += format_list("LINKOPTS", [quote(c) for c in rule.get("linkopts")])
    if rule.kind == "test":
        args = []
        for arg in rule.get("args"):
            for item in rule.get("data"):
                target = resolve(item, rule.package)
                if target:
                    arg = arg.replace("$(location %s)" % item,
                                      "$<TARGET_FILE:tensordict_%s>" % stem(*target))
            if "$(" in arg:
                raise SystemExit("%s: no CMake translation of argument %r" % (rule.label, arg))
            args.append(quote(arg))
        lines += format_list("ARGS", args)
        lines += format_list("GENERATED", generated_data(rule))
        env = ["%s=%s" % kv for kv in sorted(rule.get("env", {}).items())]
        lines += format_list("ENV", [quote(e) for e in env])
        tags = [t for t in rule.get("tags") if t in ("multihost", "slow", "exclusive", "cuda")]
        lines += format_list("LABELS", tags)
        seconds = TIMEOUT_SECONDS.get(rule.get("timeout", ""),
                                      SIZE_SECONDS[rule.get("size", "medium")])
        lines.append("  TIMEOUT %d" % seconds)
    lines[-1] += ")"
    return name, lines


HEADER = """\
# Generated by tools/bazel_to_cmake.py from {build}; do not edit: edit that file, then run
#   python3 tools/bazel_to_cmake.py
# //tools:cmake_fresh_test fails while this file differs from what the tool writes. The target
# names follow NOTE [ CMake from Bazel ] (tools/bazel_to_cmake.py).
"""


def package_file(pkg, packages, reasons):
    """(path, text, {cmake name: block text}) of one package's CMakeLists.txt."""
    out = [HEADER.format(build=pkg.path + "/BUILD.bazel")]
    cuda = pkg.path in CUDA_PACKAGES
    if cuda:
        out.append("# Only with a CUDA LibTorch and -DTENSORDICT_CUDA=ON (Bazel builds nothing "
                   "here).\nif(TENSORDICT_CUDA)\n")
    blocks = {}
    skipped = []
    for rule in pkg.rules:
        if rule.kind == "filegroup":
            continue
        if rule.label in reasons:
            skipped += textwrap.wrap("%s: %s" % (rule.label, reasons[rule.label]), 97,
                                     initial_indent="#   ", subsequent_indent="#     ")
            continue
        name, lines = rule_block(rule)
        if rule.aoti_only:
            lines = ([lines[0], "if(%s)" % AOTI_CONDITION] + ["  " + l for l in lines[1:]] +
                     ["endif()"])
        blocks[name] = "\n".join(lines)
        out.append(blocks[name] + "\n")
    if cuda:
        out.append("endif()\n")
    if skipped:
        out.append("# Bazel-only:\n" + "\n".join(skipped) + "\n")
    children = sorted(p for p in packages
                      if p.startswith(pkg.path + "/") and "/" not in p[len(pkg.path) + 1:])
    if children:
        out.append("\n".join("add_subdirectory(%s)" % c[len(pkg.path) + 1:]
                             for c in children) + "\n")
    return pkg.path + "/CMakeLists.txt", "\n".join(out), blocks


def alone_file(root):
    """tests/consumer_cmake/alone.cmake from tests/public_targets.bzl's PUBLIC_TARGETS."""
    scope = {}
    bzl = root / "tests" / "public_targets.bzl"
    exec(compile(bzl.read_text(), str(bzl), "exec"), scope)
    lines = ["# Generated by tools/bazel_to_cmake.py from tests/public_targets.bzl; do not edit.",
             "# Each program of alone/ and the one tensordict target it links (the CMake names",
             "# of NOTE [ CMake from Bazel ] in tools/bazel_to_cmake.py).",
             "set(TD_ALONE"]
    blocks = {}

    def rows(targets):
        for program, label in targets.items():
            pkg, name = resolve(label, "")
            blocks[program] = "  %s tensordict::%s" % (program, stem(pkg, name))
            lines.append(blocks[program])
        lines[-1] += ")"

    rows(scope["PUBLIC_TARGETS"])
    lines += ["# Those of AOTI_PUBLIC_TARGETS: where tensordict has them (TD_LIBTORCH_HAS_AOTI).",
              "set(TD_ALONE_AOTI"]
    rows(scope.get("AOTI_PUBLIC_TARGETS", {}))
    return "tests/consumer_cmake/alone.cmake", "\n".join(lines) + "\n", blocks


def warnings_file(root):
    """cmake/tensordict_warnings.cmake: TD_WARNINGS of tools/cc.bzl."""
    cc_bzl = root / "tools" / "cc.bzl"
    scope = {}

    def load(module, *names):
        scope.update({n: [] if n.endswith("CXXOPTS") else "" for n in names})

    scope.update(load=load, cc_binary=None, cc_library=None, cc_test=None)
    exec(compile(cc_bzl.read_text(), str(cc_bzl), "exec"), scope)
    lines = ["# Generated by tools/bazel_to_cmake.py from tools/cc.bzl's TD_WARNINGS; do not edit.",
             "# The warnings of tensordict's own code (errors with -DTENSORDICT_WERROR=ON)."]
    lines += [line[2:] for line in format_list("set(TD_WARNINGS", scope["TD_WARNINGS"])]
    lines[-1] += ")"
    blocks = {"TD_WARNINGS": "\n".join(lines[2:])}
    return "cmake/tensordict_warnings.cmake", "\n".join(lines) + "\n", blocks


def generate(root):
    packages = load_packages(root)
    reasons = bazel_only_reasons(packages)
    files = [package_file(p, packages, reasons) for p in packages.values()]
    files.append(alone_file(root))
    files.append(warnings_file(root))
    return files


def parse_blocks(text):
    """{name: block} of a file as package_file / alone_file lay it out, to name what changed."""
    blocks = {}
    for chunk in text.split("\n\n"):
        lines = chunk.strip("\n").splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("td_cmake_"):
                name = line.split("(", 1)[1].split()[0].rstrip(")")
                blocks[name] = "\n".join(lines[i - 1:])
            elif line.startswith("  ") and " tensordict::" in line:
                blocks[line.split()[0]] = line
    return blocks


def check(root, files):
    problems = []
    for path, text, blocks in files:
        on_disk = root / path
        if not on_disk.exists():
            problems.append("%s is missing (targets %s)" % (path, ", ".join(blocks) or "none"))
            continue
        old = on_disk.read_text()
        if old == text:
            continue
        old_blocks = parse_blocks(old)
        new_blocks = parse_blocks(text)
        named = []
        for name in sorted(set(old_blocks) | set(new_blocks)):
            if name not in old_blocks:
                named.append("%s is new" % name)
            elif name not in new_blocks:
                named.append("%s is gone" % name)
            elif old_blocks[name] != new_blocks[name]:
                named.append("%s changed" % name)
        detail = "; ".join(named) or "outside any target"
        diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                            path + " (checked in)", path + " (from BUILD)", n=1))
        problems.append("%s differs from what its BUILD file says: %s\n%s" % (path, detail, diff))
    written = {path for path, _, _ in files}
    for r in ROOTS:
        for stale in sorted((root / r).rglob("CMakeLists.txt")):
            rel = str(stale.relative_to(root))
            if rel not in written:
                problems.append("%s has no BUILD.bazel beside it any more: remove it" % rel)
    return problems


def write(root, files):
    for path, text, _ in files:
        target = root / path
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            print("wrote", path)


def self_test():
    """A made-up tree: the check passes after writing, and names the target a BUILD edit adds,
    changes or removes (also inside `if(TD_LIBTORCH_HAS_AOTI)`), and a package whose BUILD file
    is gone; targets declared `for _ in IF_AOTI` are written inside that if(), a CMAKE_GENRULES
    genrule as td_cmake_python_genrule with its tests' GENERATED, and a test that reads both
    its outputs and source files is Bazel-only."""
    import tempfile
    failures = []

    def expect_text(root, path, wanted):
        text = (root / path).read_text()
        for piece in wanted:
            if piece not in text:
                failures.append("expected %r in %s, got:\n%s" % (piece, path, text))

    def expect(root, wanted):
        problems = "\n".join(check(root, generate(root)))
        for text in wanted:
            if text not in problems:
                failures.append("expected %r in the check's report, got:\n%s" % (text, problems))
        if not wanted and problems:
            failures.append("expected no problems, got:\n" + problems)

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "tools").mkdir()
        (root / "tools" / "cc.bzl").write_text('TD_WARNINGS = ["-Wall"]\n')
        (root / "tests").mkdir()
        (root / "tests" / "public_targets.bzl").write_text('PUBLIC_TARGETS = {"x_alone": "//td/x"}\n')
        build = root / "td" / "x" / "BUILD.bazel"
        build.parent.mkdir(parents=True)
        lib = 'td_cc_library(name = "x", srcs = ["x.cc"], deps = ["//td/x:y"])\n'
        other = 'td_cc_library(name = "y", hdrs = ["y.h"], deps = ["@tensordict_absl//:absl"])\n'
        build.write_text(lib + other)
        write(root, generate(root))
        expect(root, [])
        build.write_text(lib.replace('"x.cc"', '"x.cc", "z.cc"') + other)
        expect(root, ["td/x/CMakeLists.txt", "x changed"])
        build.write_text(lib + other + 'td_cc_test(name = "x_test", srcs = ["t.cc"])\n')
        expect(root, ["x_test is new"])
        build.write_text(lib)
        expect(root, ["x_y is gone"])
        aoti = ('load("//td/compat:aoti.bzl", "IF_AOTI")\n'
                '[td_cc_library(name = "z", hdrs = ["z.h"]) for _ in IF_AOTI]\n')
        build.write_text(lib + other + aoti)
        write(root, generate(root))
        expect(root, [])
        expect_text(root, "td/x/CMakeLists.txt",
                    ["# //td/x:y\ntd_cmake_library(x_y\n",
                     "# //td/x:z\nif(TD_LIBTORCH_HAS_AOTI)\n  td_cmake_library(x_z\n"
                     "    HDRS z.h)\nendif()\n"])
        build.write_text(lib + other + aoti.replace('"z.h"', '"z.h", "w.h"'))
        expect(root, ["x_z changed"])
        build.write_text(lib + other)
        genrule = root / "td" / "nn" / "aoti" / "BUILD.bazel"
        genrule.parent.mkdir(parents=True)
        genrule.write_text(
            'genrule(name = "exported", srcs = ["e.py"], outs = ["out/a.pt2"],\n'
            '        cmd = "TORCHINDUCTOR_CACHE_DIR=$$(mktemp -d) python3 $(location e.py) "\n'
            '              "$(RULEDIR)/out >/dev/null")\n'
            'td_cc_test(name = "t", srcs = ["t.cc"], data = [":exported"])\n'
            'td_cc_test(name = "mixed", srcs = ["m.cc"], data = [":exported", "d.txt"])\n')
        write(root, generate(root))
        expect(root, [])
        expect_text(root, "td/nn/aoti/CMakeLists.txt",
                    ["td_cmake_python_genrule(nn_aoti_exported\n  PYTHON aoti\n  SCRIPT e.py\n"
                     "  OUT_DIR out\n  OUTS out/a.pt2)",
                     "  GENERATED nn_aoti_exported\n",
                     "//td/nn/aoti:mixed: reads files of both the source tree and a genrule"])
        (root / "td" / "gone").mkdir()
        (root / "td" / "gone" / "CMakeLists.txt").write_text("")
        expect(root, ["td/gone/CMakeLists.txt has no BUILD.bazel"])
    for f in failures:
        print("FAIL:", f)
    print("self-test: %s" % ("failed" if failures else "passed"))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--self-test", action="store_true", help="check the checker")
    parser.add_argument("--root", default=None, help="the repository (default: this file's)")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    root = pathlib.Path(args.root) if args.root else pathlib.Path(__file__).resolve().parent.parent
    if "TEST_SRCDIR" in os.environ and args.root is None:
        root = pathlib.Path(os.environ["TEST_SRCDIR"]) / os.environ["TEST_WORKSPACE"]
    files = generate(root)
    if args.check:
        problems = check(root, files)
        for p in problems:
            print(p)
        if problems:
            print("Run `python3 tools/bazel_to_cmake.py` and commit what it writes.")
            return 1
        print("%d CMake files match the BUILD files." % len(files))
        return 0
    write(root, files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
