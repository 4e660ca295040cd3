// The fast paths over a consolidated TensorDict's one buffer (td/consolidate/consolidate.h):
// each call does the work of the TensorDict member of the same name with ONE copy or ONE kernel
// over the buffer, and returns a consolidated TensorDict (same layout, NOTE [ Consolidated buffer
// layout ]). On a TensorDict that is not consolidated — or when the fast path does not apply (the
// leaves have several dtypes where one kernel needs one dtype; two operands with different
// layouts) — each call does exactly what the member does, leaf by leaf, with the member's result
// and errors. So the result is always the member's result; only the speed differs.
//
//   td::TensorDict c = td::consolidate(data);
//   td::TensorDict twice = td::consolidated::mul(c, 2);          // one kernel over the buffer
//   td::consolidated::add_(c, twice);                            // one kernel, in place
//   td::TensorDict d = td::consolidated::to(c, at::kDouble);     // one kernel
//   td::TensorDict e = td::consolidated::apply(c, [](const at::Tensor& x) { return x.sigmoid(); });
//
// Element-wise functions: apply / apply_ call `fn` ONCE on the whole buffer viewed as a 1-D
// tensor of the leaves' dtype (gaps between leaves included; they are zero and never read back),
// so `fn` must be element-wise (x.exp(), x * 2, x.clamp(0, 1), at::where(x > 0, x, 0) ...): a
// function that mixes elements (x - x.mean(), x.cumsum(0), x.flip(0)) gives wrong values. A
// result with another number of elements is a ValueError.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>

#include <optional>

#include "td/core/tensordict.h"

namespace td {
namespace consolidated {

// TensorDict::clone with one memcpy of the buffer.
//   td::TensorDict copy = td::consolidated::clone(c);
TensorDict clone(const TensorDict& td);
// TensorDict::to(dtype) (a floating dtype casts the floating-point leaves, any other dtype every
// leaf) as one conversion kernel over the buffer when every leaf has one floating dtype and the
// target is floating; element offsets are kept, so the result is consolidated with its offsets
// scaled by the size ratio. Any other case is the member's leaf-by-leaf cast.
//   td::TensorDict d = td::consolidated::to(c, at::kHalf);
TensorDict to(const TensorDict& td, at::ScalarType dtype);
// TensorDict::to(device) as one copy of the buffer.
//   td::TensorDict g = td::consolidated::to(c, at::Device("cuda:0"));
TensorDict to(const TensorDict& td, at::Device device, bool non_blocking = false);
// TensorDict::pin_memory as one copy into pinned memory (needs CUDA, as the member does).
TensorDict pin_memory(const TensorDict& td);
// TensorDict::share_memory_ as one copy of the buffer into one shared-memory segment (link
// //td/backends/shared_memory): in place, every handle sees it; locks the TensorDict as the
// member does; is_shared() is then true and the TensorDict stays consolidated.
TensorDict& share_memory_(TensorDict& td);

// TensorDict::apply(fn) for an element-wise fn: fn(whole buffer) once. See the top of this file.
//   auto y = td::consolidated::apply(c, [](const at::Tensor& x) { return x.exp(); });
TensorDict apply(const TensorDict& td, const TensorDict::LeafFn& fn);
// TensorDict::apply(fn, other) for an element-wise fn: one call when both are consolidated with
// the same layout and matching keys.
TensorDict apply(const TensorDict& td, const TensorDict::BinaryLeafFn& fn,
                 const TensorDict& other);
// TensorDict::apply_(fn) for an element-wise fn: fn(whole buffer) once; a result that is not
// the buffer itself is copied into it. Returns `td`.
//   td::consolidated::apply_(c, [](const at::Tensor& x) { return x.clamp_(0, 1); });
TensorDict& apply_(TensorDict& td, const TensorDict::LeafFn& fn);
// TensorDict::apply_(fn, other) for an element-wise fn.
TensorDict& apply_(TensorDict& td, const TensorDict::BinaryLeafFn& fn, const TensorDict& other);

// The members of the same names (td * s, td + other, add_, zero_, clamp, exp) over the buffer.
TensorDict mul(const TensorDict& td, const at::Scalar& other);
TensorDict add(const TensorDict& td, const TensorDict& other, const at::Scalar& alpha = 1);
TensorDict& add_(TensorDict& td, const TensorDict& other, const at::Scalar& alpha = 1);
// One memset of the buffer, whatever the dtypes (all-zero bytes are zero in every dtype).
TensorDict& zero_(TensorDict& td);
TensorDict clamp(const TensorDict& td, const std::optional<at::Scalar>& min,
                 const std::optional<at::Scalar>& max);
TensorDict exp(const TensorDict& td);

}  // namespace consolidated
}  // namespace td
