"""The C++ rules every tensordict package uses: cc_library / cc_test / cc_binary with the
project's warning flags (errors in this workspace, see //tools:werror). Third-party headers come
in through `includes` (-isystem), so the flags apply to our code only.

Visibility: packages keep Bazel's default (private); a target users depend on says
`visibility = ["//visibility:public"]`, one shared inside the library says
`visibility = ["//td:__subpackages__"]` or narrower.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")
load("@tensordict_libtorch//:cxx.bzl", "LIBTORCH_CXXOPTS", "LIBTORCH_CXX_STD")

# The C++ standard of the LibTorch found (NOTE [ C++ standard ] in tensordict_deps.bzl): every
# target here has it, and a consumer adds it to its own targets that include tensordict:
#   load("@tensordict//tools:cc.bzl", "TD_CXXOPTS")
#   cc_binary(name = ..., copts = TD_CXXOPTS, deps = ["@tensordict//td/core"])
TD_CXXOPTS = LIBTORCH_CXXOPTS

# Our own code on LibTorch 2.x is built with C10_NODEPRECATED, which removes the deprecated c10::
# aliases of std types (c10::optional, c10::nullopt, c10::string_view, ...): it spells them the
# std way, or through td/compat/torch.h where 1.13 needs the c10 ones. (1.13's c10 types are
# classes of their own, not aliases.) Consumers' targets do not get it.
_TD_OWN_COPTS = [] if LIBTORCH_CXX_STD == "c++17" else ["-DC10_NODEPRECATED"]

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
    return TD_CXXOPTS + _TD_OWN_COPTS + TD_WARNINGS + select({
        str(Label("//tools:werror")): ["-Werror"],
        "//conditions:default": [],
    })

def td_cc_library(name, copts = [], **kwargs):
    cc_library(name = name, copts = td_copts() + copts, **kwargs)

def td_cc_test(name, copts = [], **kwargs):
    cc_test(name = name, copts = td_copts() + copts, **kwargs)

def td_cc_binary(name, copts = [], **kwargs):
    cc_binary(name = name, copts = td_copts() + copts, **kwargs)
