// The c10d process-group type td::distributed's calls take (see NOTE [ LibTorch versions ] in
// td/compat/torch.h). LibTorch 1.x: c10d::ProcessGroup, which ProcessGroupGloo derives from;
// 2.x: c10d::Backend (ProcessGroupGloo derives from it, and c10d::ProcessGroup became a
// dispatcher over backends). Both have the send / recv / collective signatures td::distributed
// uses.
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <type_traits>
#include <utility>

// 1.13 already ships c10d/Backend.hpp, but its ProcessGroupGloo still derives from ProcessGroup:
// the version decides (//td/compat:compat_test checks the base on each version).
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace td::compat {

#if TORCH_VERSION_MAJOR >= 2
using ProcessGroupBase = c10d::Backend;
#else
using ProcessGroupBase = c10d::ProcessGroup;
#endif

namespace internal {
template <class T, class = void>
struct HasUseLibUv : std::false_type {};
template <class T>
struct HasUseLibUv<T, std::void_t<decltype(std::declval<T&>().useLibUV)>> : std::true_type {};
}  // namespace internal

// Makes a TCPStore use the server every LibTorch has. From 2.2 on TCPStoreOptions can ask for a
// libuv server, and from 2.4 on that is the default; LibTorch built without libuv (Debian's)
// then refuses to start the store ("use_libuv was requested but PyTorch was build without libuv
// support").
template <class Options>
void UseClassicTcpStoreServer(Options& options) {
  if constexpr (internal::HasUseLibUv<Options>::value) options.useLibUV = false;
}

}  // namespace td::compat
