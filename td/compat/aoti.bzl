"""Whether the LibTorch found has AOTInductor's package loader (NOTE [ LibTorch versions ] in
td/compat/torch.h): torch::inductor::AOTIModelPackageLoader, header
torch/csrc/inductor/aoti_package/model_package_loader.h. True on LibTorch 2.6 (Debian 13) and
2.14 (Debian sid), False on 1.13 (Debian 12). tensordict_deps.bzl detects it from the headers
and writes it into @tensordict_libtorch//:cxx.bzl; td/nn/aoti/BUILD.bazel declares its targets
only when it is True (so //td/nn/aoti is empty on 1.13, and `bazel build //...` still passes).

  load("//td/compat:aoti.bzl", "LIBTORCH_HAS_AOTI")
"""

load("@tensordict_libtorch//:cxx.bzl", _HAS_AOTI = "LIBTORCH_HAS_AOTI")

LIBTORCH_HAS_AOTI = _HAS_AOTI

# [1] where the loader exists, [] where not: `[rule(...) for _ in IF_AOTI]` declares a target only
# where it can build (a BUILD file has no `if`).
IF_AOTI = [1] if _HAS_AOTI else []
