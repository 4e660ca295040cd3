// Everything //td/core (@tensordict//td/core) offers users, in one include:
//
//   #include "td/core/core.h"
//   td::TensorDict data({{"obs", torch::zeros({8, 4})}}, {8});
//   td::TensorDict both = td::cat({data, data}, 0);          // stack / cat / unbind
//   bool same = td::allclose(both.index({0}), data.index({0}));
//
// TensorDict and Value (tensordict.h, which already brings the options, the print options,
// operators, stack/cat and allclose), NestedKey (nested_key.h), the error types including td::MemmapError (errors.h), the
// dtype helpers (dtype.h), and the storage interface plus backend registry for code that writes
// or opens backends by id (storage.h). TensorDict::memmap / load_memmap / share_memory_ are
// members, but their work is done by //td/backends/memmap and //td/backends/shared_memory: link
// those to use them (NOTE [ Backend entry points ] in td/core/internal/backend_hooks.h).
#pragma once

#include "td/core/comparison.h"      // IWYU pragma: export
#include "td/core/dtype.h"           // IWYU pragma: export
#include "td/core/errors.h"          // IWYU pragma: export
#include "td/core/lazy_legacy.h"     // IWYU pragma: export
#include "td/core/memmap_options.h"  // IWYU pragma: export
#include "td/core/nested_key.h"      // IWYU pragma: export
#include "td/core/operators.h"       // IWYU pragma: export
#include "td/core/options.h"         // IWYU pragma: export
#include "td/core/print_options.h"   // IWYU pragma: export
#include "td/core/stack.h"           // IWYU pragma: export
#include "td/core/storage.h"         // IWYU pragma: export
#include "td/core/tensordict.h"      // IWYU pragma: export
