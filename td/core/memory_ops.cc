// Devices, dtypes and memory over every leaf: to / cpu / cuda, clear_device_ / auto_device_, the
// dtype verbs (float32, ...), to_dense, contiguous, detach, requires_grad_, pin_memory /
// pin_memory_, record_stream, as_tensor, to_padded_tensor, gradients
// (grad, zero_grad, data, backward), new tensors shaped like this one (new_*) and the *_like free
// functions. Declared in td/core/ops.def and td/core/operators.h; built on NOTE [ Leaf maps ]
// (td/core/internal/leaves.h).
#include <ATen/ATen.h>
#include <ATen/ops/nested_to_padded_tensor.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "td/compat/torch.h"
#include "td/core/dtype.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/leafwise.h"
#include "td/core/internal/leaves.h"
#include "td/core/internal/storage_access.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;
using internal::MapEach;
using internal::MapLeaves;

at::TensorOptions NewTensorOptions(const at::Tensor& leaf, const NewOptions& o) {
  at::TensorOptions opts = leaf.options();
  if (o.dtype()) opts = opts.dtype(*o.dtype());
  if (o.device()) opts = opts.device(*o.device());
  return opts;
}

// A new TensorDict of batch size `size`, each leaf make(feature-extended size, options).
TensorDict NewLike(const TensorDict& td, at::IntArrayRef size, const NewOptions& o,
                   const char* op,
                   const std::function<at::Tensor(at::IntArrayRef, at::TensorOptions)>& make) {
  const std::vector<int64_t> batch = internal::CheckedBatch(size);
  LeafTree tree(td);
  const size_t nd = td.batch_size().size();
  std::vector<at::Tensor> out = MapEach(
      tree,
      [&](size_t, const at::Tensor& x) {
        std::vector<int64_t> shape = batch;
        shape.insert(shape.end(), x.sizes().begin() + nd, x.sizes().end());
        at::Tensor t = make(shape, NewTensorOptions(x, o));
        if (o.requires_grad()) t.requires_grad_(true);
        return t;
      },
      op);
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), batch, /*check=*/false, device);
}

// Copy of `data` with the leaf's dtype and device unless `o` overrides them.
at::Tensor NewTensor(const at::Tensor& leaf, const at::Tensor& data, const NewOptions& o) {
  const at::TensorOptions opts = NewTensorOptions(leaf, o);
  at::Tensor t = data.detach().to(opts.device(), opts.dtype().toScalarType(),
                                  /*non_blocking=*/false, /*copy=*/true);
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

// Sets the device of every level of `td` (the root and its nested TensorDicts) to `device`.
// ValueError naming a lazy level, checked before any level changes.
void SetLevelsDevice(const TensorDict& td, std::optional<at::Device> device, const char* op) {
  const LeafTree tree(td, /*stop_at_lazy=*/true);
  if (tree.has_lazy_level()) {
    const std::optional<NestedKey> key = tree.lazy_level_key();
    TD_FAIL(ValueError, op, "(): ", key ? "the level " + key->repr() : std::string("the TensorDict"),
            " is on the ", tree.lazy_level().backend(), " backend, whose device follows the "
            "TensorDicts it is built from; call ", op, "() on them");
  }
  std::function<void(const TensorDict&)> set = [&](const TensorDict& level) {
    internal::MutableStorage(level).set_device(device);
    for (const std::string& k : level.storage().keys()) {
      std::optional<Value> v = level.storage().get(k);
      if (v && v->is_tensordict()) set(v->tensordict());
    }
  };
  set(td);
}

// torch.uint16 / uint32 / uint64, which only some LibTorch versions have.
at::ScalarType UnsignedDtype(int bits) {
  std::optional<at::ScalarType> t = compat::UnsignedDtype(bits);
  if (!t) {
    TD_FAIL(TypeError, "uint", bits, "(): torch.uint", bits, " needs LibTorch 2.3 or later; this "
            "is LibTorch ", compat::kTorchVersionMajor, ".", compat::kTorchVersionMinor);
  }
  return *t;
}

// The quantized dtype verbs: torch's Tensor.to cannot cast a tensor to a quantized dtype, so
// every leaf must already be of `dtype` (checked before anything is built); they are shared.
TensorDict AlreadyQuantized(const TensorDict& td, at::ScalarType dtype, const char* verb) {
  LeafTree tree(td);
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    const at::ScalarType has = tree.leaves()[i].scalar_type();
    if (has == dtype) continue;
    TD_FAIL(TypeError, verb, "(): the leaf ", tree.key(i).repr(), " is ", DtypeRepr(has),
            "; torch cannot cast a tensor to a quantized dtype, so ", verb, "() passes only "
            "leaves already of ", DtypeRepr(dtype), ": quantize them with apply and "
            "at::quantize_per_tensor");
  }
  return tree.Rebuild(tree.leaves(), td.batch_size(), /*check=*/false);
}

// "cuda" -> the current cuda device ("cuda:0"); a device with an index, or the CPU, as is.
at::Device NormalizeDevice(at::Device device) {
  if (device.has_index() || device.is_cpu() || device.type() == at::kMeta) return device;
  if (!c10::impl::hasDeviceGuardImpl(device.type())) {
    TD_FAIL(c10::Error, "device ", device.str(),
                     " is not available: this LibTorch build has no support for it");
  }
  const at::Device current = c10::impl::getDeviceGuardImpl(device.type())->getDevice();
  return at::Device(device.type(), current.index());
}

// backward() over the leaves of `td` that require grad, with `gradient`'s leaves (or implicit
// ones) as their gradients; everything checked before autograd runs.
void Backward(const TensorDict& td, const TensorDict* gradient, std::optional<bool> retain_graph,
              bool create_graph) {
  LeafTree tree(td);
  std::vector<at::Tensor> outputs, grads;
  std::vector<NestedKey> missing;
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    const at::Tensor& leaf = tree.leaves()[i];
    if (!leaf.requires_grad()) continue;
    outputs.push_back(leaf);
    if (gradient == nullptr) {
      if (leaf.numel() != 1) {
        TD_FAIL(ValueError, "backward(): the leaf ", tree.key(i).repr(), " has shape ",
                leaf.sizes(), "; an implicit gradient needs one element per leaf: pass a "
                "gradient TensorDict");
      }
      continue;
    }
    std::optional<Value> g = gradient->find(tree.key(i));
    if (!g || !g->is_tensor()) {
      missing.push_back(tree.key(i));
      continue;
    }
    if (g->tensor().sizes() != leaf.sizes()) {
      TD_FAIL(ValueError, "backward(): the gradient of ", tree.key(i).repr(), " has shape ",
              g->tensor().sizes(), ", the leaf ", leaf.sizes());
    }
    grads.push_back(g->tensor());
  }
  if (!missing.empty()) {
    TD_FAIL(KeyError, "backward(): the gradient TensorDict has no tensor under ",
            KeysRepr(missing), " (leaves that require grad)");
  }
  if (outputs.empty()) {
    TD_FAIL(ValueError, "backward(): no leaf of the TensorDict requires grad");
  }
  torch::autograd::backward(outputs, grads,
                            retain_graph ? compat::Optional<bool>(*retain_graph) : compat::kNullopt,
                            create_graph);
}

}  // namespace

// ---- devices and dtypes -------------------------------------------------------------------

// NOTE [ One buffer, one kernel ] (td/core/leafwise.cc) for to(device) and to(dtype): leaves
// spanning one buffer are moved or cast with one copy of it.

TensorDict TensorDict::to(at::Device device, bool non_blocking) const {
  LeafTree tree(*this);
  std::optional<std::vector<at::Tensor>> out;
  if (!tree.leaves().empty() && tree.leaves()[0].device() != device) {
    out = internal::CopyOneBuffer(tree.leaves(), at::TensorOptions().device(device));
  }
  if (!out) {
    out = MapEach(
        tree, [&](size_t, const at::Tensor& t) { return t.to(device, non_blocking); }, "moving",
        parallel::ParallelOptions());
  }
  return tree.Rebuild(std::move(*out), batch_size(), /*check=*/false,
                      std::optional<at::Device>(device));
}

TensorDict TensorDict::to(at::ScalarType dtype) const {
  // Every leaf, as Python tensordict does (docs/porting.md).
  LeafTree tree(*this);
  std::optional<std::vector<at::Tensor>> out;
  if (!tree.leaves().empty() && tree.leaves()[0].scalar_type() != dtype) {
    out = internal::CopyOneBuffer(tree.leaves(), at::TensorOptions().dtype(dtype));
  }
  if (!out) {
    out = MapEach(
        tree, [dtype](size_t, const at::Tensor& t) { return t.to(dtype); }, "casting",
        parallel::ParallelOptions());
  }
  return tree.Rebuild(std::move(*out), batch_size(), /*check=*/false);
}

TensorDict TensorDict::to(at::Device device, at::ScalarType dtype, bool non_blocking) const {
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& t) { return t.to(device, dtype, non_blocking); },
      "moving", parallel::ParallelOptions());
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false,
                      std::optional<at::Device>(device));
}

TensorDict TensorDict::cpu() const { return to(at::Device(at::kCPU)); }

TensorDict TensorDict::contiguous() const {
  // to_dense() first: the result is dense at every level whatever the backend, and a lazy
  // stack's exclusive keys are an error rather than dropped.
  return MapLeaves(to_dense(), [](const at::Tensor& t) { return t.contiguous(); }, "making contiguous",
                   /*check=*/false, parallel::ParallelOptions());
}

TensorDict TensorDict::detach() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return t.detach(); }, "detaching");
}

TensorDict& TensorDict::detach_() {
  internal::WriteLeaves(
      *this, "detach_",
      [](const LeafTree& tree) {
        MapEach(
            tree,
            [](size_t, const at::Tensor& t) {
              at::Tensor x = t;
              x.detach_();
              return at::Tensor();
            },
            "detaching");
      },
      internal::LazyLevels::kReject);
  return *this;
}

TensorDict& TensorDict::requires_grad_(bool requires_grad) {
  internal::WriteLeaves(
      *this, "requires_grad_",
      [&](const LeafTree& tree) {
        MapEach(
            tree,
            [&](size_t, const at::Tensor& t) {
              if (t.is_floating_point() || t.is_complex()) {
                at::Tensor x = t;
                x.requires_grad_(requires_grad);
              }
              return at::Tensor();
            },
            "setting requires_grad on");
      },
      internal::LazyLevels::kReject);
  return *this;
}

TensorDict TensorDict::pin_memory() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return t.pin_memory(); }, "pinning");
}

namespace {

// A tensor leaf with its level, for the operations that replace or record leaves where they are.
struct LevelLeaf {
  TensorDict level;
  std::string key;
  NestedKey full_key;
  at::Tensor tensor;
};

// Every tensor leaf of `td` with its level (depth first, in order). `check_level` sees each level
// (with its key, nullptr for the root) before its entries are read, and throws to refuse it.
void CollectLevelLeaves(const TensorDict& td, const NestedKey* prefix,
                        const std::function<void(const TensorDict&, const NestedKey*)>& check_level,
                        std::vector<LevelLeaf>* out) {
  check_level(td, prefix);
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (v->is_tensor()) {
      out->push_back({td, k, std::move(full), v->tensor()});
    } else if (v->is_tensordict()) {
      CollectLevelLeaves(v->tensordict(), &full, check_level, out);
    }
  }
}

std::string LevelName(const NestedKey* key) {
  return key ? "the level " + key->repr() : std::string("the TensorDict");
}

}  // namespace

TensorDict& TensorDict::pin_memory_() {
  std::vector<LevelLeaf> leaves;
  CollectLevelLeaves(
      *this, nullptr,
      [](const TensorDict& level, const NestedKey* key) {
        if (level.backend() != "dense") {
          TD_FAIL(ValueError, "pin_memory_(): ", LevelName(key), " is on the '", level.backend(),
                  "' backend, whose tensors stay where it keeps them; pin_memory() returns a "
                  "pinned dense copy instead");
        }
      },
      &leaves);
  // Every pinned copy first: a failure leaves every leaf as it was.
  std::vector<at::Tensor> pinned(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    pinned[i] = internal::WithKeyContext(leaves[i].full_key, "pinning",
                                         [&] { return leaves[i].tensor.pin_memory(); });
  }
  // Then replace them, each in its level (a dense level's set() of a validated value of the same
  // shape does not throw).
  for (size_t i = 0; i < leaves.size(); ++i) {
    internal::MutableStorage(leaves[i].level).set(leaves[i].key, std::move(pinned[i]));
  }
  return *this;
}

TensorDict& TensorDict::record_stream(c10::Stream stream) {
  const std::optional<c10::Stream>& recorded = storage_->recorded_stream();
  if (recorded && *recorded != stream) {
    TD_FAIL(ValueError, "record_stream: a stream is already associated with this TensorDict (",
            *recorded, "); cannot record ", stream);
  }
  std::vector<LevelLeaf> leaves;
  CollectLevelLeaves(
      *this, nullptr,
      [](const TensorDict& level, const NestedKey* key) {
        if (level.storage().lazy() != nullptr) {
          TD_FAIL(TypeError, "record_stream: ", LevelName(key), " is on the '", level.backend(),
                  "' backend, whose tensors are computed on read; call record_stream on the "
                  "TensorDicts it is built from");
        }
      },
      &leaves);
  for (const LevelLeaf& leaf : leaves) {
    if (leaf.tensor.device().type() != stream.device_type()) {
      TD_FAIL(ValueError, "record_stream: key ", leaf.full_key.repr(), " is on ",
              leaf.tensor.device().str(), " but the stream is on ", stream.device().str(),
              "; every leaf must be on the stream's device type");
    }
  }
  for (const LevelLeaf& leaf : leaves) {
    internal::WithKeyContext(leaf.full_key, "recording a stream on",
                             [&] { leaf.tensor.record_stream(stream); });
  }
  internal::MutableStorage(*this).set_recorded_stream(stream);
  return *this;
}

TensorDict TensorDict::as_tensor() const {
  TensorDict out = to_dense();
  if (is_locked()) out.lock_();
  return out;
}

TensorDict TensorDict::to_padded_tensor(double padding) const {
  return MapLeaves(
      *this,
      [padding](const at::Tensor& t) {
        return t.is_nested() ? at::nested_to_padded_tensor(t, padding) : t;
      },
      "padding");
}

TensorDict TensorDict::to(const std::string& device, bool non_blocking) const {
  return to(NormalizeDevice(at::Device(device)), non_blocking);
}

TensorDict TensorDict::cuda(std::optional<int64_t> index) const {
  return to(index ? "cuda:" + std::to_string(*index) : std::string("cuda"));
}


TensorDict TensorDict::to(const char* device, bool non_blocking) const {
  return to(std::string(device), non_blocking);
}

// ---- the device of the levels ------------------------------------------------------------

TensorDict& TensorDict::clear_device_() {
  SetLevelsDevice(*this, std::nullopt, "clear_device_");
  return *this;
}

TensorDict& TensorDict::auto_device_() {
  std::optional<at::Device> device;
  bool one = true;
  const LeafTree tree(*this, /*stop_at_lazy=*/true);  // a lazy level: SetLevelsDevice throws
  for (const at::Tensor& t : tree.leaves()) {
    if (device && *device != t.device()) one = false;
    device = t.device();
  }
  SetLevelsDevice(*this, one ? device : std::nullopt, "auto_device_");
  return *this;
}

// ---- the dtype verbs ----------------------------------------------------------------------

#define TD_CAST_(name, dtype) \
  TensorDict TensorDict::name() const { return to(dtype); }
TD_CAST_(half, at::kHalf)
TD_CAST_(bfloat16, at::kBFloat16)
TD_CAST_(float16, at::kHalf)
TD_CAST_(float32, at::kFloat)
TD_CAST_(float64, at::kDouble)
TD_CAST_(int8, at::kChar)
TD_CAST_(int16, at::kShort)
TD_CAST_(int32, at::kInt)
TD_CAST_(int64, at::kLong)
TD_CAST_(uint8, at::kByte)
TD_CAST_(uint16, UnsignedDtype(16))
TD_CAST_(uint32, UnsignedDtype(32))
TD_CAST_(uint64, UnsignedDtype(64))
TD_CAST_(complex32, at::kComplexHalf)
TD_CAST_(complex64, at::kComplexFloat)
TD_CAST_(complex128, at::kComplexDouble)
#undef TD_CAST_

TensorDict TensorDict::qint8() const { return AlreadyQuantized(*this, at::kQInt8, "qint8"); }
TensorDict TensorDict::qint32() const { return AlreadyQuantized(*this, at::kQInt32, "qint32"); }
TensorDict TensorDict::quint8() const { return AlreadyQuantized(*this, at::kQUInt8, "quint8"); }
TensorDict TensorDict::quint4x2() const {
  return AlreadyQuantized(*this, at::kQUInt4x2, "quint4x2");
}

TensorDict TensorDict::type(at::ScalarType dtype) const { return to(dtype); }

// ---- gradients ----------------------------------------------------------------------------

TensorDict TensorDict::grad() const {
  LeafTree tree(*this);
  std::vector<at::Tensor> out(tree.leaves().size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = tree.leaves()[i].grad();
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false);
}

TensorDict& TensorDict::zero_grad(bool set_to_none) {
  LeafTree tree(*this);
  std::vector<at::Tensor> grads;
  for (const at::Tensor& leaf : tree.leaves()) {
    if (!leaf.grad().defined()) continue;
    if (set_to_none) {
      const_cast<at::Tensor&>(leaf).mutable_grad() = at::Tensor();
    } else {
      grads.push_back(leaf.grad());
    }
  }
  if (!grads.empty()) at::_foreach_zero_(grads);
  return *this;
}

TensorDict TensorDict::data() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return t.variable_data(); }, "reading .data of");
}

void TensorDict::backward(std::optional<bool> retain_graph, bool create_graph) const {
  Backward(*this, nullptr, retain_graph, create_graph);
}

void TensorDict::backward(const TensorDict& gradient, std::optional<bool> retain_graph,
                          bool create_graph) const {
  Backward(*this, &gradient, retain_graph, create_graph);
}

// ---- new_* --------------------------------------------------------------------------------

TensorDict TensorDict::new_zeros(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_zeros of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::zeros(s, t); });
}
TensorDict TensorDict::new_ones(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_ones of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::ones(s, t); });
}
TensorDict TensorDict::new_empty(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_empty of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::empty(s, t); });
}
TensorDict TensorDict::new_full(at::IntArrayRef size, const at::Scalar& fill_value,
                                const NewOptions& o) const {
  return NewLike(*this, size, o, "new_full of", [&](at::IntArrayRef s, at::TensorOptions t) {
    return at::full(s, fill_value, t);
  });
}

TensorDict TensorDict::new_tensor(const at::Tensor& data, const NewOptions& o) const {
  if (!data.defined()) TD_FAIL(ValueError, "new_tensor: data is an undefined tensor");
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& x) { return NewTensor(x, data, o); }, "new_tensor of");
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), data.sizes(), /*check=*/false, device,
                      /*nested_extra_dims=*/false);
}

TensorDict TensorDict::new_tensor(const TensorDict& data, const NewOptions& o) const {
  LeafTree tree(*this);
  std::vector<at::Tensor> src =
      tree.Align(data, LeafTree::AlignOptions().name("the data TensorDict"));
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return NewTensor(x, src[i], o); },
      "new_tensor of");
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), data.batch_size(), /*check=*/true, device);
}

// ---- *_like -------------------------------------------------------------------------------

TensorDict zeros_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::zeros_like(t); }, "zeros_like of");
}
TensorDict ones_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::ones_like(t); }, "ones_like of");
}
TensorDict empty_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::empty_like(t); }, "empty_like of");
}
TensorDict full_like(const TensorDict& td, const at::Scalar& value) {
  return MapLeaves(
      td, [&](const at::Tensor& t) { return at::full_like(t, value); }, "full_like of");
}
TensorDict rand_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::rand_like(t); }, "rand_like of");
}
TensorDict randn_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::randn_like(t); }, "randn_like of");
}

}  // namespace td
