"""Whether the build has a CUDA LibTorch, for td/nn/cuda_graph/BUILD.bazel.

The Bazel build never does: it links the system's LibTorch (Debian's, CPU only), so IF_CUDA is
empty and //td/nn/cuda_graph declares nothing but its files. The CMake build declares the
package's targets (tools/bazel_to_cmake.py evaluates IF_CUDA as [1]) inside
`if(TENSORDICT_CUDA)`, an option that needs a CUDA LibTorch (CMakeLists.txt).

  load("//td/nn/cuda_graph:cuda.bzl", "IF_CUDA")
"""

# [1] where a CUDA LibTorch is linked, [] where not: `[rule(...) for _ in IF_CUDA]`.
IF_CUDA = []
