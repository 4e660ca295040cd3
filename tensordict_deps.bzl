"""External dependencies of tensordict, taken from the local system.

Usage from this repository's WORKSPACE or from any other Bazel workspace:

    local_repository(name = "tensordict", path = "/path/to/tensordict")
    load("@tensordict//:tensordict_deps.bzl", "tensordict_deps")
    tensordict_deps()

Declared repositories (all prefixed so they cannot collide with a consumer's
own repositories):

    @tensordict_libtorch//:libtorch   LibTorch (ATen, c10, torch C++ API)
    @tensordict_libtorch//:c10d       + torch.distributed C++ headers, with
                                      Gloo when gloo headers are installed
    @tensordict_absl//:absl           Abseil (every libabsl_*.so found)
    @tensordict_tbb//:tbb             oneTBB
    @tensordict_gtest//:gtest, :gtest_main, :gmock, :gmock_main
    @tensordict_benchmark//:benchmark, :benchmark_main
    @tensordict_json//:json           nlohmann/json (header-only)
    @tensordict_hdf5//:hdf5           HDF5's C library, serial build (for //td/backends/h5)
    @tensordict_zlib//:zlib, @tensordict_zstd//:zstd, @tensordict_blosc//:blosc
                                      zlib, Zstandard and c-blosc 1.x (for //td/bytes:codec)
    @tensordict_python//:torch_python, :pybind11, :python_headers
                                      for //td/python only: libtorch_python, pybind11 and
                                      <Python.h> of the interpreter `python`

plus offline stand-ins for @rules_cc, @rules_java, @rules_proto and
@remote_coverage_tools, which Bazel 4's built-in @bazel_tools refers to and
would otherwise download. Every repository is declared only if the calling
WORKSPACE has not declared one of the same name already, so a consumer can
bring its own (e.g. the real rules_cc).

Each system repository symlinks only the header directories of its own
library (e.g. /usr/include/absl) into `include/` of the repository, so the
`includes = ["include"]` of its cc_library becomes `-isystem` for exactly
those headers; warnings inside them are not reported. Libraries are linked
with `-l` flags (plus `-L`/`-rpath` when the library directory is not a
default linker directory); their files are not Bazel inputs, so after a
system upgrade run `bazel clean` (or `bazel sync`) to relink.
"""

# Directories the linker and the dynamic loader search anyway on Debian/Ubuntu.
_DEFAULT_LIB_DIRS = [
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
]

# Multiarch library directories tried (in order) when no lib dir is given.
_LIB_DIR_CANDIDATES = [
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "lib64",
    "lib",
]

def _abs(root, path):
    """Resolves `path` (absolute, or relative to `root`)."""
    if path.startswith("/"):
        return path
    return root.rstrip("/") + "/" + path

def _find_lib_dir(ctx, root, lib_dir, probe):
    """Returns the absolute library directory of `root`.

    `lib_dir` wins when given; otherwise the first of _LIB_DIR_CANDIDATES that
    holds `probe` (e.g. "libtorch.so"), falling back to <root>/lib.
    """
    if lib_dir:
        return _abs(root, lib_dir)
    for candidate in _LIB_DIR_CANDIDATES:
        if ctx.path(_abs(root, candidate) + "/" + probe).exists:
            return _abs(root, candidate)
    return _abs(root, "lib")

def _search_flags(lib_dirs):
    """-L/-rpath flags for library directories the linker would not search."""
    flags = []
    for d in lib_dirs:
        d = d.rstrip("/")
        if d in _DEFAULT_LIB_DIRS:
            continue
        flags += ["-L" + d, "-Wl,-rpath," + d]
    return flags

def _system_library_impl(ctx):
    root = ctx.attr.path
    include_dir = _abs(root, ctx.attr.include_dir)
    lib_dir = _find_lib_dir(ctx, root, ctx.attr.lib_dir, ctx.attr.lib_probe)

    found = []
    for entry in ctx.attr.include_entries:
        src = ctx.path(include_dir + "/" + entry)
        if src.exists:
            ctx.symlink(src, "include/" + entry)
            found.append(entry)
    missing_required = [
        e
        for e in ctx.attr.required_include_entries
        if e not in found
    ]
    if missing_required:
        fail("{}: {} not found in {} (is the library installed? try tools/install_deps.sh)".format(
            ctx.name,
            ", ".join(missing_required),
            include_dir,
        ))

    if ctx.attr.lib_probe and not ctx.path(lib_dir + "/" + ctx.attr.lib_probe).exists:
        fail("{}: {} not found in {} (is the library installed? try tools/install_deps.sh)".format(
            ctx.name,
            ctx.attr.lib_probe,
            lib_dir,
        ))

    # Optional extra directories for -L/-rpath.
    extra_dirs = [_abs(root, d) for d in ctx.attr.extra_lib_dirs]

    # Every lib<prefix>*.so in lib_dir, as -l flags (used for Abseil, which is
    # split into ~60 shared objects).
    glob_libs = []
    if ctx.attr.link_all_with_prefix:
        prefix = "lib" + ctx.attr.link_all_with_prefix
        excluded = ["lib" + e for e in ctx.attr.link_all_except]
        for f in ctx.path(lib_dir).readdir():
            name = f.basename
            if not (name.startswith(prefix) and name.endswith(".so")):
                continue
            if [e for e in excluded if name.startswith(e)]:
                continue
            glob_libs.append("-l" + name[len("lib"):-len(".so")])
        glob_libs = sorted(glob_libs)

    substitutions = {
        "%{NAME}": ctx.name,
        "%{ROOT}": root,
        "%{LIB_DIR}": lib_dir,
        "%{SEARCH_FLAGS}": repr(_search_flags([lib_dir] + extra_dirs)),
        "%{GLOB_LIBS}": repr(glob_libs),
        "%{INCLUDE_ENTRIES}": repr(found),
    }
    for key, value in ctx.attr.substitutions.items():
        substitutions["%{" + key + "}"] = value

    if ctx.attr.version_headers:
        ctx.file("cxx.bzl", _libtorch_cxx_bzl(ctx, include_dir, ctx.attr.version_headers))

    ctx.file("WORKSPACE", 'workspace(name = "{}")\n'.format(ctx.name))
    ctx.template("BUILD.bazel", ctx.attr.build_file_template, substitutions, executable = False)

# NOTE [ C++ standard ]
# The standard follows the LibTorch found, chosen here and nowhere else: C++17 for LibTorch 1.x,
# C++20 for 2.x. LibTorch 2.14's headers refuse anything older than C++20 (`#error C++20 or later
# compatible compiler is required`); 2.6 takes either, and C++20 keeps every 2.x build alike.
# LibTorch 1.13's headers also compile as C++20 with GCC 12 (measured: <torch/torch.h>), but its
# users build with C++17 (its TorchConfig.cmake asks for 14), so 1.13 keeps C++17 and CI builds
# the library and its public headers as both. tools/cc.bzl adds TD_CXXOPTS to every target of
# this repository, and consumers add it to theirs (README, "Using it from another Bazel
# workspace").
def _libtorch_cxx_bzl(ctx, include_dir, version_headers):
    """The text of the LibTorch repository's `@tensordict_libtorch//:cxx.bzl`: version, standard."""
    # The version macros: torch/csrc/api/include/torch/version.h up to 2.x, which from 2.10 or so
    # only includes torch/headeronly/version.h; the first header that defines them wins.
    version = {}
    for header in version_headers:
        path = ctx.path(include_dir + "/" + header)
        if not path.exists:
            continue
        for line in ctx.read(path).splitlines():
            words = [w for w in line.replace("\t", " ").split(" ") if w]
            if len(words) == 3 and words[0] == "#define" and words[1].startswith("TORCH_VERSION_"):
                version[words[1][len("TORCH_VERSION_"):]] = words[2]
        if version:
            break
    for part in ["MAJOR", "MINOR", "PATCH"]:
        if not version.get(part, "").isdigit():
            fail("{}: no TORCH_VERSION_{} in {} under {} (is this a LibTorch install?)".format(
                ctx.name,
                part,
                " or ".join(version_headers),
                include_dir,
            ))
    major = int(version["MAJOR"])
    std = "c++17" if major < 2 else "c++20"

    # AOTInductor's package loader (torch::inductor::AOTIModelPackageLoader): in 2.6 and 2.14,
    # not in 1.13. Detected from the header, not the version (NOTE [ LibTorch versions ] in
    # td/compat/torch.h); //td/nn/aoti exists only where it is True (td/compat/aoti.bzl).
    loader = "/torch/csrc/inductor/aoti_package/model_package_loader.h"
    has_aoti = ctx.path(include_dir + loader).exists
    return "\n".join([
        "# Generated by tensordict_deps.bzl (NOTE [ C++ standard ]) from the LibTorch in " + include_dir + ".",
        "LIBTORCH_VERSION = \"{}.{}.{}\"".format(version["MAJOR"], version["MINOR"], version["PATCH"]),
        "LIBTORCH_CXX_STD = \"{}\"".format(std),
        "LIBTORCH_CXXOPTS = [\"-std={}\"]".format(std),
        "LIBTORCH_HAS_AOTI = {}".format("True" if has_aoti else "False"),
        "",
    ])

tensordict_system_library = repository_rule(
    doc = """Like new_local_repository, for a library installed outside Bazel.

Symlinks <include_dir>/<entry> for each of `include_entries` into include/
and instantiates `build_file_template` with %{SEARCH_FLAGS} (the -L/-rpath
flags needed for the library directory, empty for default ones),
%{GLOB_LIBS}, %{LIB_DIR}, %{ROOT}, %{INCLUDE_ENTRIES} and `substitutions`.
""",
    implementation = _system_library_impl,
    local = True,
    attrs = {
        "path": attr.string(mandatory = True, doc = "Install prefix, e.g. /usr or /opt/libtorch."),
        "include_dir": attr.string(default = "include", doc = "Absolute, or relative to path."),
        "include_entries": attr.string_list(doc = "Entries of include_dir to expose."),
        "required_include_entries": attr.string_list(doc = "Entries whose absence is an error."),
        "lib_dir": attr.string(doc = "Absolute, or relative to path; autodetected if empty."),
        "lib_probe": attr.string(doc = "A file that must exist in lib_dir (also used to autodetect it)."),
        "version_headers": attr.string_list(
            doc = "LibTorch only: headers with TORCH_VERSION_*, relative to include_dir, tried in order; writes cxx.bzl.",
        ),
        "extra_lib_dirs": attr.string_list(doc = "More directories for -L/-rpath."),
        "link_all_with_prefix": attr.string(doc = "Link every lib<prefix>*.so of lib_dir."),
        "link_all_except": attr.string_list(doc = "...but none whose name starts with lib<one of these>."),
        "build_file_template": attr.label(mandatory = True, allow_single_file = True),
        "substitutions": attr.string_dict(),
    },
)

def _source_dir_impl(ctx):
    # ctx.path() of a label in this repository gives its location on disk
    # whether tensordict is the main workspace or a local_repository of a
    # consumer, so the stand-ins need no path relative to the consumer.
    src = ctx.path(ctx.attr.anchor).dirname
    for part in ctx.attr.subdir.split("/"):
        src = src.get_child(part)
    if not src.exists:
        fail("{}: {} does not exist".format(ctx.name, src))
    for child in src.readdir():
        ctx.symlink(child, child.basename)

_tensordict_source_dir = repository_rule(
    doc = "local_repository for a directory of the tensordict source tree.",
    implementation = _source_dir_impl,
    local = True,
    attrs = {
        "anchor": attr.label(mandatory = True, allow_single_file = True),
        "subdir": attr.string(mandatory = True),
    },
)

def _python_impl(ctx):
    python = ctx.attr.python
    if not ctx.path(python).exists:
        fail("{}: no Python interpreter at {} (Debian: apt-get install python3-dev python3-torch)".format(
            ctx.name,
            python,
        ))
    result = ctx.execute([python, ctx.path(ctx.attr._probe)])
    if result.return_code != 0:
        fail("{}: {} failed to run {}: {}".format(ctx.name, python, ctx.attr._probe, result.stderr))
    info = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("=")
        if key:
            info[key] = value
    if "torch_error" in info:
        fail("{}: {} cannot import torch ({}); install torch for it (Debian: python3-torch)".format(
            ctx.name,
            python,
            info["torch_error"],
        ))
    py_include = info["python_include"]
    if not ctx.path(py_include + "/Python.h").exists:
        fail("{}: Python.h not found in {} (Debian: apt-get install python3-dev)".format(
            ctx.name,
            py_include,
        ))
    ctx.symlink(py_include, "python_include")

    # pybind11: the one bundled with a pip-installed torch wheel (torch/include/pybind11) first,
    # so that the extension is built with the pybind11 torch was built with; then the attribute,
    # the system's (Debian: pybind11-dev) and the pybind11 Python package's.
    candidates = [info["torch_include"]]
    if ctx.attr.pybind11_include:
        candidates = [ctx.attr.pybind11_include] + candidates
    candidates += ["/usr/include"]
    if "pybind11_module_include" in info:
        candidates.append(info["pybind11_module_include"])
    pybind11 = None
    for c in candidates:
        if ctx.path(c + "/pybind11/pybind11.h").exists:
            pybind11 = c + "/pybind11"
            break
    if not pybind11:
        fail("{}: pybind11 headers not found in {} (Debian: apt-get install pybind11-dev)".format(
            ctx.name,
            ", ".join(candidates),
        ))
    ctx.symlink(pybind11, "pybind11_include/pybind11")

    torch_lib = info["torch_lib"]
    if not ctx.path(torch_lib + "/libtorch_python.so").exists:
        fail("{}: libtorch_python.so not found in {}".format(ctx.name, torch_lib))
    ctx.symlink(python, "python3")
    ctx.file("WORKSPACE", 'workspace(name = "{}")\n'.format(ctx.name))
    ctx.template("BUILD.bazel", ctx.attr._build_file_template, {
        "%{PYTHON}": python,
        "%{PYTHON_VERSION}": info["python_version"],
        "%{TORCH_VERSION}": info["torch_version"],
        "%{SEARCH_FLAGS}": repr(["-L" + torch_lib, "-Wl,-rpath," + torch_lib]),
    }, executable = False)

tensordict_python_repository = repository_rule(
    doc = """Python's headers, pybind11's headers and libtorch_python, for //td/python.

Runs `python` with third_party/python/probe.py to find them: <Python.h> from sysconfig, torch's
`lib/` next to `torch/__init__.py`, pybind11 from torch's `include/` (pip wheels bundle it), then
`pybind11_include`, /usr/include (Debian's pybind11-dev) and the pybind11 Python package.
Only evaluated when a //td/python target is built.
""",
    implementation = _python_impl,
    local = True,
    attrs = {
        "python": attr.string(default = "/usr/bin/python3"),
        "pybind11_include": attr.string(doc = "A directory holding pybind11/pybind11.h."),
        "_probe": attr.label(default = Label("//third_party:python/probe.py"), allow_single_file = True),
        "_build_file_template": attr.label(
            default = Label("//third_party:python/BUILD.tpl"),
            allow_single_file = True,
        ),
    },
)

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

# Repositories that @bazel_tools (Bazel 4.2.3) refers to and downloads by
# default; see third_party/offline/*/WORKSPACE.
OFFLINE_STANDINS = [
    "rules_cc",
    "rules_java",
    "rules_proto",
    "remote_coverage_tools",
]

def tensordict_offline_repositories():
    """Declares the offline stand-ins not already declared by the caller."""
    for name in OFFLINE_STANDINS:
        _maybe(
            _tensordict_source_dir,
            name,
            anchor = Label("//third_party:BUILD.bazel"),
            subdir = "offline/" + name,
        )

def tensordict_deps(**kwargs):
    """Declares all external repositories tensordict needs.

    Args (all optional; defaults in tensordict_repositories):
      libtorch_path: LibTorch install prefix. "/usr" for Debian's
        libtorch-dev; the directory an official libtorch zip was unpacked to
        (layout <root>/include, <root>/include/torch/csrc/api/include,
        <root>/lib) otherwise.
      libtorch_include_dir: headers, absolute or relative to libtorch_path.
      libtorch_lib_dir: libraries, absolute or relative to libtorch_path;
        autodetected ("lib/x86_64-linux-gnu" on Debian, "lib" for a zip).
      libtorch_cxx11_abi: value of _GLIBCXX_USE_CXX11_ABI LibTorch was built
        with (True for Debian and the "cxx11 ABI" zips, False for the
        "Pre-cxx11 ABI" zips).
      system_path: prefix of Abseil, oneTBB, GoogleTest, Google Benchmark,
        nlohmann/json, HDF5, zlib, Zstandard and c-blosc.
      system_lib_dir: their library directory (autodetected).
      python: the interpreter //td/python's extensions are built for (its headers, its torch's
        libtorch_python, pybind11); only read when a //td/python target is built. Its torch
        must be the LibTorch at libtorch_path.
    """
    tensordict_offline_repositories()
    tensordict_repositories(_maybe, **kwargs)

def _declare(rule, name, **kwargs):
    rule(name = name, **kwargs)

def tensordict_repositories(
        declare = _declare,
        libtorch_path = "/usr",
        libtorch_include_dir = "include",
        libtorch_lib_dir = "",
        libtorch_cxx11_abi = True,
        system_path = "/usr",
        system_lib_dir = "",
        python = "/usr/bin/python3"):
    """The repositories themselves, for tensordict_deps (WORKSPACE) and the `tensordict` module
    extension (extensions.bzl, bzlmod); the arguments are tensordict_deps'. `declare(rule, name,
    **kwargs)` declares one (tensordict_deps skips those the caller declared already).
    """
    declare(
        tensordict_system_library,
        "tensordict_libtorch",
        path = libtorch_path,
        include_dir = libtorch_include_dir,
        # gloo: headers of libgloo-dev on Debian, needed by ProcessGroupGloo.hpp.
        include_entries = ["ATen", "c10", "caffe2", "torch", "gloo"],
        required_include_entries = ["ATen", "c10", "torch"],
        lib_dir = libtorch_lib_dir,
        lib_probe = "libtorch.so",
        version_headers = [
            "torch/headeronly/version.h",
            "torch/csrc/api/include/torch/version.h",
        ],
        build_file_template = Label("//third_party:libtorch/BUILD.tpl"),
        substitutions = {"CXX11_ABI": "1" if libtorch_cxx11_abi else "0"},
    )
    declare(
        tensordict_system_library,
        "tensordict_absl",
        path = system_path,
        include_entries = ["absl"],
        required_include_entries = ["absl"],
        lib_dir = system_lib_dir,
        lib_probe = "libabsl_base.so",
        link_all_with_prefix = "absl_",
        # Abseil's flags libraries register their flags when loaded; linked into every binary
        # (nothing here uses them), Abseil 20240722's crash at startup registering
        # libabsl_log_flags' flags. Leave them out.
        link_all_except = ["absl_flags", "absl_log_flags"],
        build_file_template = Label("//third_party:absl/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_tbb",
        path = system_path,
        include_entries = ["tbb", "oneapi"],
        required_include_entries = ["tbb"],
        lib_dir = system_lib_dir,
        lib_probe = "libtbb.so",
        build_file_template = Label("//third_party:tbb/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_gtest",
        path = system_path,
        include_entries = ["gtest", "gmock"],
        required_include_entries = ["gtest", "gmock"],
        lib_dir = system_lib_dir,
        lib_probe = "libgtest.a",
        build_file_template = Label("//third_party:gtest/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_benchmark",
        path = system_path,
        include_entries = ["benchmark"],
        required_include_entries = ["benchmark"],
        lib_dir = system_lib_dir,
        lib_probe = "libbenchmark.so",
        build_file_template = Label("//third_party:benchmark/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_json",
        path = system_path,
        include_entries = ["nlohmann"],
        required_include_entries = ["nlohmann"],
        build_file_template = Label("//third_party:json/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_hdf5",
        path = system_path,
        # Debian's libhdf5-dev: the serial build's headers in include/hdf5/serial, its library
        # as libhdf5_serial.so in the multiarch directory.
        include_dir = "include/hdf5",
        include_entries = ["serial"],
        required_include_entries = ["serial"],
        lib_dir = system_lib_dir,
        lib_probe = "libhdf5_serial.so",
        build_file_template = Label("//third_party:hdf5/BUILD.tpl"),
    )
    # The decompressors of //td/bytes:codec (Zarr chunks, deflated .tdz entries).
    declare(
        tensordict_system_library,
        "tensordict_zlib",
        path = system_path,
        include_entries = ["zlib.h", "zconf.h"],
        required_include_entries = ["zlib.h", "zconf.h"],
        lib_dir = system_lib_dir,
        lib_probe = "libz.so",
        build_file_template = Label("//third_party:zlib/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_zstd",
        path = system_path,
        include_entries = ["zstd.h", "zstd_errors.h"],
        required_include_entries = ["zstd.h", "zstd_errors.h"],
        lib_dir = system_lib_dir,
        lib_probe = "libzstd.so",
        build_file_template = Label("//third_party:zstd/BUILD.tpl"),
    )
    declare(
        tensordict_system_library,
        "tensordict_blosc",
        path = system_path,
        include_entries = ["blosc.h", "blosc-export.h"],
        required_include_entries = ["blosc.h", "blosc-export.h"],
        lib_dir = system_lib_dir,
        lib_probe = "libblosc.so",
        build_file_template = Label("//third_party:blosc/BUILD.tpl"),
    )
    declare(
        tensordict_python_repository,
        "tensordict_python",
        python = python,
    )
