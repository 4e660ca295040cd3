// REQUIRE(cond): prints the failed condition and exits 1. The single-target programs of this
// package depend on one tensordict target each and nothing else (no GoogleTest), so they bring
// their own check (not named CHECK: LibTorch's glog headers define that).
#pragma once

#include <cstdio>
#include <cstdlib>

#define REQUIRE(cond)                                                                 \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
