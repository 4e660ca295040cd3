// AOTInductor's package loader across the LibTorch versions that have it (2.6 and 2.14; none in
// 1.13, where this target is not declared: td/compat/aoti.bzl). See NOTE [ LibTorch versions ]
// in torch.h. The differences are detected from the loader's own members, not from versions:
//  * the constructor takes (path, model_name) in 2.6, and also run_single_threaded, num_runners
//    and device_index in 2.14;
//  * boxed_run (inputs moved in) is 2.14's; 2.6 has run only;
//  * AOTIModelContainerRunner::extract_constants_map (the constants' values) is 2.14's; 2.6
//    names the constants (get_constant_fqns) but does not give their values.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace td::compat {

using AotiLoader = torch::inductor::AOTIModelPackageLoader;

// The loader for `model_name` in the package at `path`. Returns nullptr when this LibTorch's
// loader cannot take run_single_threaded or device_index other than their defaults (false, -1).
template <class L = AotiLoader>
std::unique_ptr<L> MakeAotiLoader(const std::string& path, const std::string& model_name,
                                  bool run_single_threaded, int64_t device_index) {
  if constexpr (std::is_constructible_v<L, const std::string&, const std::string&, bool, size_t,
                                        c10::DeviceIndex>) {
    return std::make_unique<L>(path, model_name, run_single_threaded, /*num_runners=*/1,
                               static_cast<c10::DeviceIndex>(device_index));
  } else {
    if (run_single_threaded || device_index != -1) return nullptr;
    return std::make_unique<L>(path, model_name);
  }
}

// Runs the package on `inputs` (moved in where the loader can take them).
template <class L>
std::vector<at::Tensor> AotiRun(L& loader, std::vector<at::Tensor>&& inputs) {
  if constexpr (requires { loader.boxed_run(std::move(inputs)); }) {
    return loader.boxed_run(std::move(inputs));
  } else {
    return loader.run(inputs);
  }
}

// True where the runner gives its constants' values (AotiConstants below is not nullopt). A
// template, so that a missing member makes it false instead of an error.
template <class R>
inline constexpr bool kRunnerGivesConstants = requires(R& r) { r.extract_constants_map(false); };
inline constexpr bool kAotiGivesConstants =
    kRunnerGivesConstants<torch::inductor::AOTIModelContainerRunner>;

// The package's active constants by internal name, or nullopt where the runner cannot give them.
template <class R>
std::optional<std::unordered_map<std::string, at::Tensor>> AotiConstants(R& runner) {
  if constexpr (requires { runner.extract_constants_map(false); }) {
    return runner.extract_constants_map(/*use_inactive=*/false);
  } else {
    return std::nullopt;
  }
}

}  // namespace td::compat
