#include "td/compat/omp.h"

#include <ATen/Config.h>
#include <dlfcn.h>

namespace td::compat {

const OpenMpApi& OpenMp() {
  static const OpenMpApi api = [] {
    OpenMpApi a;
#if AT_PARALLEL_OPENMP
    a.set_num_threads =
        reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    a.get_max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (!a.set_num_threads || !a.get_max_threads) a = OpenMpApi();
#endif
    return a;
  }();
  return api;
}

}  // namespace td::compat
