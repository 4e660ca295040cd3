// Python's lazy_legacy() / set_lazy_legacy: a switch that makes TensorDict's shape operations
// return lazy views instead of new TensorDicts, and td::stack a lazy stack.
//
//   {
//     td::SetLazyLegacy lazy(true);
//     td::TensorDict t = data.permute({1, 0});   // a td::LazyViewTensorDict over `data`
//     t.set("new", x);                           // lands in data as x.permute({1, 0, ...})
//   }
//
// NOTE [ Lazy legacy ]
// While lazy_legacy() is true, as in tensordict 0.14:
//  * permute / transpose / unsqueeze / squeeze / view return td::permute_view / transpose_view /
//    unsqueeze_view / squeeze_view / reshape_view of the TensorDict (td/backends/lazy_view):
//    handles that read and write it, where a key set through them lands in the source too.
//    squeeze() without a dim squeezes every size-1 batch dim, last first; view() of the same
//    batch size returns the TensorDict itself. reshape and the other shape ops are unaffected.
//  * td::stack returns td::lazy_stack of its inputs (td/backends/lazy_stack).
// Those two backends implement the lazy calls through core's backend hooks (NOTE [ Backend entry
// points ] in td/core/internal/backend_hooks.h): a program that sets the switch must link them,
// and a lazy call without them throws c10::Error naming the Bazel target to add.
// The default is false; the environment variable LAZY_LEGACY_OP (1 / true / yes / on) makes it
// true, read once, as upstream reads it at import. The innermost live SetLazyLegacy on the
// calling thread overrides it (upstream's switch is process-wide; C++ code that runs other
// threads sets it on each).
#pragma once

#include <optional>

namespace td {

// Whether shape operations and td::stack are lazy on this thread (NOTE [ Lazy legacy ]).
//   if (td::lazy_legacy()) { ... }
bool lazy_legacy();

// Sets lazy_legacy() on this thread while it lives; scopes nest and restore the previous value.
//   td::SetLazyLegacy lazy(true);
class SetLazyLegacy {
 public:
  explicit SetLazyLegacy(bool mode = true);
  ~SetLazyLegacy();
  SetLazyLegacy(const SetLazyLegacy&) = delete;
  SetLazyLegacy& operator=(const SetLazyLegacy&) = delete;

 private:
  std::optional<bool> previous_;
};

}  // namespace td
