// The OpenMP runtime LibTorch itself runs its intra-op threads on, when it was built with OpenMP
// (Debian's and the official builds are; see NOTE [ LibTorch versions ] in td/compat/torch.h).
// Looked up by name in the process (official LibTorch zips ship a renamed libgomp; linking our
// own could load a second runtime): null where LibTorch does not use OpenMP or no runtime is
// loaded.
#pragma once

namespace td::compat {

struct OpenMpApi {
  void (*set_num_threads)(int) = nullptr;  // omp_set_num_threads: this thread's nthreads-var
  int (*get_max_threads)() = nullptr;      // omp_get_max_threads
  explicit operator bool() const { return set_num_threads != nullptr; }
};

// Both functions, or neither.
const OpenMpApi& OpenMp();

}  // namespace td::compat
