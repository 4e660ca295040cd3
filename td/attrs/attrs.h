// Upstream's td.attrs() / td.to(attrs) and tensordict.TensorAttrs: a record of each leaf's device,
// dtype and shape, and the per-leaf cast back to them -- for a TensorDict whose leaves do not
// share one device or dtype (int64 indices next to float16 weights, a few leaves kept on the
// CPU), which to(device) / to(dtype) would flatten.
//
//   td::TensorDict spec = td::attrs(params, td::AttrsFields().shape(false));
//   td::TensorDict work = params.to(at::kFloat);     // compute in float32 ...
//   td::TensorDict back = td::to(work, spec);        // ... each leaf back to its own dtype
//   td::TensorAttrs a = td::TensorAttrs::get(spec, {"layer", "weight"});  // a.tgt_dtype
//
// NOTE [ TensorAttrs records ]
// The attrs TensorDict is an ordinary TensorDict of batch size [] and no device, with the source's
// nested levels, holding under each tensor key one non-tensor entry, the JSON record
//   {"_type": "TensorAttrs", "tgt_device": "cpu", "tgt_dtype": "torch.float32",
//    "tgt_shape": [3, 4]}
// (a field not recorded is null; dtypes as Python spells them, td::DtypeRepr). Being a
// TensorDict, it nests, prints, saves (memmap, consolidate, ...) and is indexed by NestedKey as
// upstream's (whose leaves are TensorAttrs tensorclass objects); td::TensorAttrs converts a
// record to and from a struct. The "_type" tag is what to() recognises: any other entry where a
// record is expected is an error, never silently skipped.
//
// Spelling: free functions of their own target (//td/attrs) rather than TensorDict members, so
// //td/core stays as it is and only code that wants the records links them. td::to(td, attrs)
// is upstream's td.to(attrs) with the TensorDict as the first argument, as td::stack(tds) is
// torch.stack; it does not collide with TensorDict::to's overloads, which are members.
// Depend on //td/attrs (consumers: @tensordict//td/attrs). See README.md and docs/porting.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "nlohmann/json.hpp"
#include "td/core/tensordict.h"

namespace td {

// Which attributes a record holds (upstream's `fields=("device", "dtype", "shape")`); the ones
// left out stay unset.
//   td::attrs(td, td::AttrsFields().shape(false))   // upstream: fields=("device", "dtype")
struct AttrsFields {
  TORCH_ARG(bool, device) = true;
  TORCH_ARG(bool, dtype) = true;
  TORCH_ARG(bool, shape) = true;
};

// One leaf's record (upstream's TensorAttrs tensorclass; the fields keep its tgt_ names). A
// record with neither tgt_device nor tgt_dtype leaves its leaf as it is.
struct TensorAttrs {
  std::optional<at::Device> tgt_device;
  std::optional<at::ScalarType> tgt_dtype;
  // -1 for a dim whose size differs between the members of a lazy stack (get_item_shape's
  // convention): any size matches it.
  std::optional<std::vector<int64_t>> tgt_shape;

  // The requested attributes of `tensor`.
  static TensorAttrs from_tensor(const at::Tensor& tensor, const AttrsFields& fields = {});
  // The record under `key` of an attrs TensorDict (upstream's attrs[key]). KeyError when
  // missing; TypeError when the entry is not a record (see from_json).
  static TensorAttrs get(const TensorDict& attrs, KeyRef key);

  // The JSON record of NOTE [ TensorAttrs records ].
  nlohmann::json to_json() const;
  // The record as a TensorDict entry:  spec.set("w", rec.to_non_tensor());
  NonTensorData to_non_tensor() const { return NonTensorData(to_json()); }
  // True when `j` is tagged as a record ({"_type": "TensorAttrs", ...}), well formed or not.
  static bool is_record(const nlohmann::json& j);
  // Parses a record. TypeError when `j` is not tagged as one (saying what it is instead);
  // ValueError naming the field for an unknown field, a device string LibTorch does not parse,
  // a dtype name no dtype of this LibTorch has, or a shape that is not a list of integers >= -1.
  static TensorAttrs from_json(const nlohmann::json& j);

  friend bool operator==(const TensorAttrs& a, const TensorAttrs& b) {
    return a.tgt_device == b.tgt_device && a.tgt_dtype == b.tgt_dtype &&
           a.tgt_shape == b.tgt_shape;
  }
  friend bool operator!=(const TensorAttrs& a, const TensorAttrs& b) { return !(a == b); }
};

// "TensorAttrs(tgt_device=cpu, tgt_dtype=torch.float32, tgt_shape=torch.Size([3, 4]))", None
// for a field not recorded.
std::ostream& operator<<(std::ostream& os, const TensorAttrs& a);

// Upstream's td.attrs(fields=...): a TensorDict of batch size [] and no device with the nested
// levels of `td` and one record per tensor leaf (NOTE [ TensorAttrs records ]); non-tensor
// entries have none. Read from the storage's metadata, as get_item_shape: no leaf is computed or
// copied, so a lazy stack costs nothing (a dim whose size differs between its members is
// recorded as -1) and a memory-mapped leaf is not read.
TensorDict attrs(const TensorDict& td, const AttrsFields& fields = {});

// Upstream's td.to(attrs): every tensor leaf with a record in `attrs` cast to its tgt_device and
// tgt_dtype (Tensor::to; a leaf that already has them is shared), the other leaves, and
// non-tensor entries, as they are. The result is a dense TensorDict of the same structure and
// batch size, with `td`'s devices, or with no device at any level when a record moved a leaf to
// another device (upstream's result has none). A lazy stack's leaves are stacked, as by
// TensorDict::to. Records whose keys `td` lacks are ignored, as upstream (one spec can serve
// TensorDicts holding a subset of its keys). Everything is checked before any leaf is cast:
//   TypeError naming the key for an attrs entry that is a tensor or non-tensor data other than
//     a record, for a record where `td` holds a sub-TensorDict or non-tensor data, and for a
//     sub-TensorDict of `attrs` where `td` holds a tensor;
//   ValueError naming the key and both shapes when a recorded tgt_shape is not the leaf's shape
//     (upstream ignores tgt_shape: record with AttrsFields().shape(false) to cast TensorDicts
//     of another batch size with one spec), and from_json's errors for a malformed record.
// LibTorch's errors while casting are rethrown with the key.
//   td::TensorDict back = td::to(work, spec);
TensorDict to(const TensorDict& td, const TensorDict& attrs, bool non_blocking = false);

}  // namespace td
