"""Every public tensordict target, and the program of tests/consumer/alone/ that links it alone.

tests/consumer/alone (WORKSPACE), tests/consumer_bzlmod (bzlmod, the same folder) and
tests/consumer_cmake (CMake, through the alone.cmake that tools/bazel_to_cmake.py writes from this
file) each build one program per row. Add a row when a public target is added.
"""

PUBLIC_TARGETS = {
    "core_alone": "//td/core",
    "errors_alone": "//td/core:errors",
    "compat_torch_alone": "//td/compat:torch",
    "compat_module_access_alone": "//td/compat:module_access",
    "nested_key_alone": "//td/core:nested_key",
    "dtype_alone": "//td/core:dtype",
    "options_alone": "//td/core:options",
    "executor_alone": "//td/executor",
    "progress_alone": "//td/parallel:progress",
    "parallel_alone": "//td/parallel",
    "lazy_stack_alone": "//td/backends/lazy_stack",
    "lazy_view_alone": "//td/backends/lazy_view",
    "memmap_alone": "//td/backends/memmap",
    "memmap_archive_alone": "//td/backends/memmap/archive",
    "h5_alone": "//td/backends/h5",
    "shared_memory_alone": "//td/backends/shared_memory",
    "all_backends_alone": "//td/backends:all",
    "nn_alone": "//td/nn",
    "nn_module_alone": "//td/nn:module",
    "nn_probabilistic_alone": "//td/nn:probabilistic",
    "nn_scale_alone": "//td/nn:scale",
    "nn_continuous_alone": "//td/nn:continuous",
    "nn_discrete_alone": "//td/nn:discrete",
    "nn_wrappers_alone": "//td/nn:wrappers",
    "stacking_alone": "//td/stacking",
    "attrs_alone": "//td/attrs",
    "consolidate_alone": "//td/consolidate",
    "format_alone": "//td/format",
    "io_alone": "//td/io",
    "io_zarr_alone": "//td/io:zarr",
    "io_schema_alone": "//td/io:schema",
    "version_alone": "//td:version",
    "tensorclass_alone": "//td/tensorclass",
    "tensorclass_nn_alone": "//td/tensorclass:nn",
    "tensorclass_distributed_alone": "//td/tensorclass:distributed",
    "tensorclass_data_alone": "//td/tensorclass:data",
    "data_alone": "//td/data",
    "distributed_alone": "//td/distributed",
    "script_alone": "//td/nn:script",
    "functional_alone": "//td/functional",
}

# Public targets that exist only where LibTorch has AOTInductor's package loader
# (LIBTORCH_HAS_AOTI of td/compat/aoti.bzl, TD_LIBTORCH_HAS_AOTI of cmake/tensordict_deps.cmake):
# the consumers build their programs there only.
AOTI_PUBLIC_TARGETS = {
    "nn_aoti_alone": "//td/nn/aoti",
}
