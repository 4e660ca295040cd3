"""The C++ rules every tensordict package uses: cc_library / cc_test / cc_binary with the
project's warning flags (errors in this workspace, see //tools:werror). Third-party headers come
in through `includes` (-isystem), so the flags apply to our code only.

Visibility: packages keep Bazel's default (private); a target users depend on says
`visibility = ["//visibility:public"]`, one shared inside the library says
`visibility = ["//td:__subpackages__"]` or narrower.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

TD_WARNINGS = [
    "-Wall",
    "-Wextra",
    "-Wnon-virtual-dtor",
    "-Woverloaded-virtual",
    "-Wno-unused-parameter",
    # With -O2 GCC 12 reports LibTorch's own TensorIndex members (header code inlined into ours)
    # as maybe-uninitialized; that false positive stays a warning so `-c opt` builds.
    "-Wno-error=maybe-uninitialized",
]

def td_copts():
    return TD_WARNINGS + select({
        str(Label("//tools:werror")): ["-Werror"],
        "//conditions:default": [],
    })

def td_cc_library(name, copts = [], **kwargs):
    cc_library(name = name, copts = td_copts() + copts, **kwargs)

def td_cc_test(name, copts = [], **kwargs):
    cc_test(name = name, copts = td_copts() + copts, **kwargs)

def td_cc_binary(name, copts = [], **kwargs):
    cc_binary(name = name, copts = td_copts() + copts, **kwargs)
