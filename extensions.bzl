"""The `tensordict` module extension: the bzlmod counterpart of tensordict_deps() (WORKSPACE).

It declares the same repositories (@tensordict_libtorch, @tensordict_absl, @tensordict_tbb,
@tensordict_gtest, @tensordict_benchmark, @tensordict_json, @tensordict_hdf5, @tensordict_zlib,
@tensordict_zstd, @tensordict_blosc, @tensordict_python;
see tensordict_deps.bzl) from libraries installed outside Bazel. In a consumer's MODULE.bazel:

    bazel_dep(name = "tensordict", version = "0.1.0")
    tensordict = use_extension("@tensordict//:extensions.bzl", "tensordict")
    tensordict.libtorch(path = "/opt/libtorch")     # optional; default: the system's, /usr
    use_repo(tensordict, "tensordict_gtest")        # only the repositories it names itself

`libtorch(path = ...)` takes the system's LibTorch (/usr, the default), an official zip unpacked
anywhere, or a pip wheel's `torch/` folder (`python3 -c 'import torch, os;
print(os.path.dirname(torch.__file__))'`): headers in <path>/include, libraries found in
<path>/lib or the multiarch directory. `system(path = ...)` moves Abseil, oneTBB, GoogleTest,
Google Benchmark, nlohmann/json, HDF5, zlib,
Zstandard and c-blosc; `python(interpreter = ...)` the Python that //td/python
builds for. The root module's tags win; a tag given twice by one module is an error.
"""

load("//:tensordict_deps.bzl", "tensordict_repositories")

_libtorch = tag_class(attrs = {
    "path": attr.string(default = "/usr", doc = "LibTorch's prefix (see tensordict_deps)."),
    "include_dir": attr.string(default = "include"),
    "lib_dir": attr.string(doc = "Autodetected when empty."),
    "cxx11_abi": attr.bool(default = True, doc = "_GLIBCXX_USE_CXX11_ABI LibTorch was built with."),
})

_system = tag_class(attrs = {
    "path": attr.string(default = "/usr"),
    "lib_dir": attr.string(doc = "Autodetected when empty."),
})

_python = tag_class(attrs = {
    "interpreter": attr.string(default = "/usr/bin/python3"),
})

def _one(module, tags, what):
    if len(tags) > 1:
        fail("module {}: tensordict.{}() given {} times; give it once".format(
            module.name,
            what,
            len(tags),
        ))
    return tags[0] if tags else None

def _tensordict_impl(mctx):
    libtorch = None
    system = None
    python = None

    # mctx.modules lists the root module first: the first module that sets a tag wins.
    for module in mctx.modules:
        libtorch = libtorch or _one(module, module.tags.libtorch, "libtorch")
        system = system or _one(module, module.tags.system, "system")
        python = python or _one(module, module.tags.python, "python")
    kwargs = {}
    if libtorch:
        kwargs.update(
            libtorch_path = libtorch.path,
            libtorch_include_dir = libtorch.include_dir,
            libtorch_lib_dir = libtorch.lib_dir,
            libtorch_cxx11_abi = libtorch.cxx11_abi,
        )
    if system:
        kwargs.update(system_path = system.path, system_lib_dir = system.lib_dir)
    if python:
        kwargs.update(python = python.interpreter)
    tensordict_repositories(**kwargs)

tensordict = module_extension(
    implementation = _tensordict_impl,
    tag_classes = {
        "libtorch": _libtorch,
        "system": _system,
        "python": _python,
    },
    doc = "Repositories of the libraries tensordict uses, from the local system.",
)
