// The c10d process-group type td::distributed's calls take (see NOTE [ LibTorch versions ] in
// td/compat/torch.h). LibTorch 1.x: c10d::ProcessGroup, which ProcessGroupGloo derives from;
// 2.x: c10d::Backend (ProcessGroupGloo derives from it, and c10d::ProcessGroup became a
// dispatcher over backends). Both have the send / recv / collective signatures td::distributed
// uses.
#pragma once

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

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

}  // namespace td::compat
