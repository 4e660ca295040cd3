// td::TensorClass: typed classes with named fields that keep every TensorDict operation — the
// C++ counterpart of Python tensordict's @tensorclass.
//
//   class MyData : public td::TensorClass<MyData> {
//    public:
//     TD_TENSORCLASS(MyData, (at::Tensor, image), (at::Tensor, mask), (at::Tensor, label))
//
//     at::Tensor mask_image() const {
//       std::vector<int64_t> shape(batch_size().begin(), batch_size().end());
//       shape.push_back(-1);
//       return image().index({mask().expand_as(image())}).view(shape);
//     }
//     MyData select_label(int64_t l) const { return index({label() == l}); }
//   };
//
//   MyData data(images, mask, labels, {100});                       // positional fields
//   MyData same({{"image", images}, {"mask", mask}, {"label", labels}}, {100});  // named
//   at::Tensor img = data.image();                                   // typed accessor
//   data.set_label(labels + 1);                                      // typed setter (checked)
//   MyData ones = data.select_label(1);                              // batch [n]
//   MyData grid = data.reshape({10, 10});                            // every TensorDict op
//   std::cout << grid;                                               // MyData(image=..., ...)
//
// TD_TENSORCLASS(Class, (Type, name)...) declares, for each field: `name()` (returns the field),
// `set_name(value)` (writes it; returns *this), and the class's constructors:
//   Class(Type1 name1, ..., TypeN nameN, at::IntArrayRef batch_size,
//         std::optional<at::Device> device = std::nullopt)         positional, every field
//   Class(std::initializer_list<td::NamedField> fields, at::IntArrayRef batch_size,
//         std::optional<at::Device> device = std::nullopt)         by name
//   Class::unset(batch_size, device)    no field set yet (filled by index_put_, setters, ...)
// Field types: see td/tensorclass/fields.h. A field of another type stops compilation with the
// static_assert "td::TensorClass field '<name>': unsupported field type '<Type>'. A field is
// ...", and a field named like a TensorClass member (index, reshape, batch_size, ...) with
// "td::TensorClass field '<name>' has the name of a TensorClass member ...". A value of the
// wrong type passed to a positional constructor or setter is a C++ conversion error at the call
// (e.g. no conversion from `int` to `at::Tensor`); by name it is a td TypeError naming the field.
//
// NOTE [ TensorClass storage ]
// A TensorClass is a handle holding one td::TensorDict (like TensorDict holds its storage):
// copies share the fields; clone() is a deep copy. Each field is the entry of the same name:
// tensors as tensors, nested TensorDicts and nested TensorClasses as nested TensorDicts, and
// non-tensor fields (strings, numbers, bools, JSON) as td::NonTensorData, so every TensorDict
// operation carries them along unchanged, and memmap writes them where Python tensordict's
// tensorclass writes its non-tensor fields (in `_tensordict/`, as NonTensorData entries).
// Operations run on the TensorDict and wrap the result back into the class (TensorClass::wrap):
// structure-preserving operations wrap without checking; apply / named_apply, whose function
// may drop entries, and from_tensordict check that every required field is present with the
// declared kind and that no other key exists. The invariant "the TensorDict's top-level keys
// are a subset of the fields, with the declared kinds, and include every required one" holds
// for every TensorClass reachable through this API; `tensordict()` exposes the handle itself,
// and whoever adds keys to it breaks the invariant (use to_tensordict() for a separate dict).
#pragma once

#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "td/core/errors.h"
#include "td/core/stack.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/tensorclass/fields.h"
#include "td/tensorclass/for_each.h"

namespace td {
namespace tc_detail {

// Printing helpers (tensorclass.cc): one entry's text, as TensorDict's repr prints entries.
std::string EntryRepr(const TensorDict& td, const std::string& key);
// `text` with every line after the first indented by `indent` spaces.
std::string Reindent(const std::string& text, int indent);
// Class(\n    a=...,\n    b=...,\n    batch_size=..., device=..., is_shared=...), fields sorted.
std::string ClassRepr(std::string_view cls, const TensorDict& td,
                      std::vector<std::pair<std::string, std::string>> fields);
// Throws KeyError naming the required fields that are missing.
[[noreturn]] void FailMissing(std::string_view cls, const std::vector<std::string>& missing,
                              const std::vector<std::string_view>& fields);
// Throws KeyError naming an unknown field.
[[noreturn]] void FailUnknown(std::string_view cls, const std::string& name,
                              const std::vector<std::string_view>& fields);
// "missing fields [...]; keys that are not fields [...] (fields of C: [...])", or "" when both
// lists are empty.
std::string KeyMismatch(std::string_view cls, const std::vector<std::string>& missing,
                        const std::vector<std::string>& extra,
                        const std::vector<std::string_view>& fields);
// Entry-wise == (or != when `equal` is false) of two TensorDicts with the same keys at every
// level: tensors compared with eq / ne, non-tensor entries to a bool tensor of their level's
// batch size. Throws KeyError naming the keys on one side only.
TensorDict FieldsEqual(const TensorDict& a, const TensorDict& b, bool equal);
// Python's str(cls) for a qualified Python class name: "<class 'a.b.C'>".
std::string PythonTypeString(std::string_view python_name);
// Memmap helpers (td/tensorclass/memmap.cc; NOTE [ Tensorclass directory layout ] in memmap.h).
// PrepareClassDir creates `prefix` when missing (refusing a TensorDict directory there, or an
// existing tensorclass directory when `exists_ok` is false) and returns `prefix`/_tensordict;
// WriteClassMeta then replaces `prefix`/meta.json atomically with {"_type": "<class '...'>"}.
std::string PrepareClassDir(const std::string& prefix, bool exists_ok);
void WriteClassMeta(const std::string& prefix, std::string_view python_name, bool fsync);
// Reads `prefix`/meta.json, checks that "_type" names `python_name` (the qualified name or its
// last component), loads `prefix`/_tensordict and merges the top-level non-tensor fields of
// older Python layouts into it. Throws MemmapError naming the file otherwise.
TensorDict LoadClassTensorDict(const std::string& prefix, std::string_view cls,
                               std::string_view python_name, const LoadMemmapOptions& options,
                               const std::vector<std::string_view>& fields);

// The names of TensorClass's own members (and of those TD_TENSORCLASS declares): a field with
// one of them would hide the member, so TD_TENSORCLASS refuses it with a static_assert.
inline constexpr std::string_view kMemberNames[] = {
    "abs", "abs_", "add", "add_", "all", "any", "apply", "apply_", "backend", "batch_dims",
    "batch_size", "ceil", "ceil_", "check_tensordict", "chunk", "clamp", "clamp_", "clone",
    "contains", "contiguous", "copy", "cpu", "detach", "detach_", "device", "div", "div_", "eq",
    "exp", "exp_", "expand", "field_names", "fill_", "finish_positional", "flatten", "flip",
    "floor", "floor_", "from_tensordict", "gather", "ge", "get", "get_field", "gt", "has_field",
    "index", "index_put_", "init_named", "init_positional", "is_locked", "is_memmap",
    "is_shared", "le", "load_memmap", "lock_", "log", "log_", "lt", "masked_fill",
    "masked_fill_", "masked_select", "max", "mean", "memmap", "memmap_", "memmap_like", "min",
    "mul", "mul_", "named_apply", "names", "narrow", "ndim", "ne", "neg", "neg_", "norm",
    "numel", "pad", "permute", "pin_memory", "pow", "pow_", "python_type", "reciprocal",
    "reciprocal_", "repeat", "repeat_interleave", "repr", "requires_grad_", "reshape", "rewrap",
    "roll", "round", "round_", "self", "set_batch_size", "set_field", "shape", "share_memory_",
    "sigmoid", "sigmoid_", "sign", "split", "sqrt", "sqrt_", "squeeze", "std", "sub", "sub_",
    "sum", "tanh", "tanh_", "td_", "tensordict", "to", "to_dense", "to_tensordict", "transpose",
    "unbind", "unflatten", "unlock_", "unset", "unsqueeze", "var", "view", "where", "wrap",
    "zero_",
};
constexpr bool IsMemberName(std::string_view name) {
  for (std::string_view m : kMemberNames) {
    if (m == name) return true;
  }
  return false;
}

template <class T>
struct TypeTag {
  using type = T;
};

// NOTE [ TensorClass forwarding ]
// Most operations are not written out one by one: TD_TC_FORWARD(op) defines `op(args...)` as
// `td_.op(Unwrap(args)...)` with the result mapped by Rewrapped: a TensorDict becomes Derived
// (wrapped without a check: these operations keep every entry), a TensorDict& (an in-place
// operation returning *this) becomes Derived& (this object), a std::vector<TensorDict> a
// std::vector<Derived>, anything else (bool, sizes, ...) is returned as it is. Arguments that
// are TensorClasses (or vectors of them) are passed as their TensorDicts. Overload resolution
// and every check are TensorDict's own, so the forwarded set stays exactly TensorDict's API.
// A braced list cannot be forwarded through a template parameter, so the operations whose
// first argument is often one (`reshape({10, 10})`, `index({0})`) get an extra overload taking
// at::IntArrayRef / std::initializer_list<TensorIndex> first.
template <class T>
struct IsVector {
  using Elem = void;
};
template <class T, class Alloc>
struct IsVector<std::vector<T, Alloc>> {
  using Elem = T;
};
template <class A>
decltype(auto) Unwrap(A&& a) {
  using T = std::decay_t<A>;
  if constexpr (kIsTensorClass<T>) {
    return (a.tensordict());
  } else if constexpr (kIsTensorClass<typename IsVector<T>::Elem>) {
    std::vector<TensorDict> out;
    out.reserve(a.size());
    for (const auto& d : a) out.push_back(d.tensordict());
    return out;
  } else {
    return std::forward<A>(a);
  }
}

template <class D, class R>
struct RewrapT {
  using type = std::decay_t<R>;
};
template <class D>
struct RewrapT<D, TensorDict> {
  using type = D;
};
template <class D>
struct RewrapT<D, TensorDict&> {
  using type = D&;
};
template <class D>
struct RewrapT<D, std::vector<TensorDict>> {
  using type = std::vector<D>;
};
template <class D, class R>
using Rewrapped = typename RewrapT<D, R>::type;

}  // namespace tc_detail

#define TD_TC_FORWARD(op)                                                                      \
  template <class... A>                                                                        \
  auto op(A&&... a) const->::td::tc_detail::Rewrapped<                                         \
      Derived, decltype(std::declval<const TensorDict&>().op(                                  \
                   ::td::tc_detail::Unwrap(std::forward<A>(a))...))> {                         \
    return rewrap(td_.op(::td::tc_detail::Unwrap(std::forward<A>(a))...));                     \
  }                                                                                            \
  template <class... A>                                                                        \
  auto op(A&&... a)->::td::tc_detail::Rewrapped<                                               \
      Derived,                                                                                 \
      decltype(std::declval<TensorDict&>().op(::td::tc_detail::Unwrap(std::forward<A>(a))...))> { \
    return rewrap(td_.op(::td::tc_detail::Unwrap(std::forward<A>(a))...));                     \
  }
// TD_TC_FORWARD plus an overload whose first argument is a braced list of sizes.
#define TD_TC_FORWARD_SIZES(op)                                                                \
  TD_TC_FORWARD(op)                                                                            \
  template <class... A>                                                                        \
  auto op(at::IntArrayRef s, A&&... a) const->::td::tc_detail::Rewrapped<                      \
      Derived, decltype(std::declval<const TensorDict&>().op(                                  \
                   s, ::td::tc_detail::Unwrap(std::forward<A>(a))...))> {                      \
    return rewrap(td_.op(s, ::td::tc_detail::Unwrap(std::forward<A>(a))...));                  \
  }

// The CRTP base of every TensorClass (see the file comment). Derived declares its fields with
// TD_TENSORCLASS. Operations mirror td::TensorDict's (td/core/tensordict.h, where each is
// documented), with Derived in place of TensorDict.
template <class Derived>
class TensorClass : public tc_detail::TensorClassTag {
 public:
  using Index = at::indexing::TensorIndex;

  // ---- the underlying TensorDict -----------------------------------------------------------
  // The TensorDict holding the fields (a handle: writes go to this object's fields).
  const TensorDict& tensordict() const { return td_; }
  // A separate TensorDict with the same entries (a shallow copy: tensors are shared, keys not).
  //   td::TensorDict plain = data.to_tensordict();
  TensorDict to_tensordict() const { return td_.copy(); }
  // Wraps `td` (a handle: no copy) as Derived after checking that it holds every required
  // field with the declared kind and no other key. Throws KeyError naming the missing and the
  // extra keys, TypeError naming a field of the wrong kind.
  //   MyData d = MyData::from_tensordict(td::TensorDict({{"image", x}, ...}, {100}));
  static Derived from_tensordict(TensorDict td) {
    std::string why = check_tensordict(td, /*throw_keys=*/true);
    if (!why.empty()) TD_FAIL(TypeError, Derived::kClassName, ".from_tensordict: ", why);
    return Derived(tc_detail::WrapTag{}, std::move(td));
  }
  // "" when `td` can be wrapped as Derived, else why not. With `throw_keys`, missing and extra
  // keys throw KeyError instead of being returned.
  static std::string check_tensordict(const TensorDict& td, bool throw_keys = false) {
    std::vector<std::string> missing;
    std::string why;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using Tr = tc_detail::FieldTraits<typename decltype(tag)::type>;
      std::optional<Value> v = td.find(key);
      if (!v) {
        if (Tr::kRequired) missing.emplace_back(name);
        return;
      }
      std::string w = Tr::check(*v);
      if (!w.empty() && why.empty()) {
        why = "field '" + std::string(name) + "' holds " + w + ", but it is declared as " +
              Tr::kDeclared;
      }
    });
    std::vector<std::string> extra;
    for (const std::string& k : td.storage().keys()) {
      if (!has_field(k)) extra.push_back(k);
    }
    std::string keys = tc_detail::KeyMismatch(Derived::kClassName, missing, extra, names());
    if (!keys.empty()) {
      if (throw_keys) TD_FAIL(KeyError, Derived::kClassName, ": ", keys);
      return keys;
    }
    return why;
  }
  // True when `name` is one of Derived's fields.
  static bool has_field(std::string_view name) {
    for (std::string_view f : Derived::field_names()) {
      if (f == name) return true;
    }
    return false;
  }
  // The qualified Python class name memmap records in "_type" ("__main__.MyData" unless
  // Derived defines its own `static std::string python_type()`).
  static std::string python_type() { return std::string("__main__.") + Derived::kClassName; }

  // ---- batch size, device, generic access -------------------------------------------------
  at::IntArrayRef batch_size() const { return td_.batch_size(); }
  at::IntArrayRef shape() const { return td_.batch_size(); }
  int64_t batch_dims() const { return td_.batch_dims(); }
  int64_t ndim() const { return td_.batch_dims(); }
  int64_t numel() const { return td_.numel(); }
  std::optional<at::Device> device() const { return td_.device(); }
  std::string_view backend() const { return td_.backend(); }
  // The tensor under a (nested) key, as TensorDict::get: `ep.get({"step", "obs"})`.
  at::Tensor get(const NestedKey& key) const { return td_.get(key); }
  // True when the field (or nested key) is set.
  bool contains(const NestedKey& key) const { return td_.contains(key); }

  // ---- operations returning the class (NOTE [ TensorClass forwarding ]) ------------------
  // Indexing: ints, slices, Ellipsis, None, bool masks, index tensors (TensorDict::index).
  //   MyData row = data.index({0});  MyData picked = data.index({data.label() == 1});
  TD_TC_FORWARD(index)
  Derived index(std::initializer_list<Index> i) const { return wrap(td_.index(i)); }
  // Writes a Derived / tensor / scalar at `i`; fields this object lacks are created (lazy
  // preallocation, TensorDict::index_put_). Only these three kinds of value are accepted (a raw
  // TensorDict could create keys that are not fields).
  //   MyData buf = MyData::unset({n});  for (i...) buf.index_put_({i}, item);
  Derived& index_put_(at::ArrayRef<Index> i, const Derived& v) { return put(i, v.td_); }
  Derived& index_put_(std::initializer_list<Index> i, const Derived& v) { return put(i, v.td_); }
  Derived& index_put_(at::ArrayRef<Index> i, const at::Tensor& v) { return put(i, v); }
  Derived& index_put_(std::initializer_list<Index> i, const at::Tensor& v) { return put(i, v); }
  Derived& index_put_(at::ArrayRef<Index> i, const at::Scalar& v) { return put(i, v); }
  Derived& index_put_(std::initializer_list<Index> i, const at::Scalar& v) { return put(i, v); }
  TD_TC_FORWARD(masked_select)
  TD_TC_FORWARD(masked_fill)
  TD_TC_FORWARD(masked_fill_)
  TD_TC_FORWARD(where)
  TD_TC_FORWARD(gather)
  // Shape operations on the batch dims (TensorDict's shape ops).
  //   MyData grid = data.reshape({10, 10});
  TD_TC_FORWARD_SIZES(view)
  TD_TC_FORWARD_SIZES(reshape)
  TD_TC_FORWARD_SIZES(permute)
  TD_TC_FORWARD_SIZES(expand)
  TD_TC_FORWARD_SIZES(flip)
  TD_TC_FORWARD_SIZES(repeat)
  TD_TC_FORWARD_SIZES(pad)
  TD_TC_FORWARD_SIZES(split)
  TD_TC_FORWARD(squeeze)
  TD_TC_FORWARD(unsqueeze)
  TD_TC_FORWARD(transpose)
  TD_TC_FORWARD(flatten)
  TD_TC_FORWARD(unflatten)
  Derived unflatten(int64_t dim, at::IntArrayRef sizes) const {
    return wrap(td_.unflatten(dim, sizes));
  }
  TD_TC_FORWARD(chunk)
  TD_TC_FORWARD(unbind)
  TD_TC_FORWARD(roll)
  Derived roll(at::IntArrayRef shifts, at::IntArrayRef dims) const {
    return wrap(td_.roll(shifts, dims));
  }
  TD_TC_FORWARD(narrow)
  TD_TC_FORWARD(repeat_interleave)
  TD_TC_FORWARD_SIZES(set_batch_size)
  // Copies, devices, dtypes, locks.
  TD_TC_FORWARD(clone)
  TD_TC_FORWARD(copy)
  TD_TC_FORWARD(to)
  TD_TC_FORWARD(cpu)
  TD_TC_FORWARD(to_dense)
  TD_TC_FORWARD(contiguous)
  TD_TC_FORWARD(detach)
  TD_TC_FORWARD(detach_)
  TD_TC_FORWARD(requires_grad_)
  TD_TC_FORWARD(pin_memory)
  TD_TC_FORWARD(zero_)
  TD_TC_FORWARD(fill_)
  TD_TC_FORWARD(lock_)
  TD_TC_FORWARD(unlock_)
  TD_TC_FORWARD(is_locked)
  // In-place apply (TensorDict::apply_; entries cannot be dropped in place).
  TD_TC_FORWARD(apply_)
  // Arithmetic and math, leaf-wise over the tensor fields (non-tensor fields carried); the
  // comparisons give Derived with bool tensors in its tensor fields.
  //   MyData y = (x * 2).add_(1);
  TD_TC_FORWARD(add)
  TD_TC_FORWARD(sub)
  TD_TC_FORWARD(mul)
  TD_TC_FORWARD(div)
  TD_TC_FORWARD(pow)
  TD_TC_FORWARD(add_)
  TD_TC_FORWARD(sub_)
  TD_TC_FORWARD(mul_)
  TD_TC_FORWARD(div_)
  TD_TC_FORWARD(pow_)
  TD_TC_FORWARD(abs)
  TD_TC_FORWARD(neg)
  TD_TC_FORWARD(exp)
  TD_TC_FORWARD(log)
  TD_TC_FORWARD(sqrt)
  TD_TC_FORWARD(sigmoid)
  TD_TC_FORWARD(tanh)
  TD_TC_FORWARD(reciprocal)
  TD_TC_FORWARD(sign)
  TD_TC_FORWARD(floor)
  TD_TC_FORWARD(ceil)
  TD_TC_FORWARD(round)
  TD_TC_FORWARD(abs_)
  TD_TC_FORWARD(neg_)
  TD_TC_FORWARD(exp_)
  TD_TC_FORWARD(log_)
  TD_TC_FORWARD(sqrt_)
  TD_TC_FORWARD(sigmoid_)
  TD_TC_FORWARD(tanh_)
  TD_TC_FORWARD(reciprocal_)
  TD_TC_FORWARD(floor_)
  TD_TC_FORWARD(ceil_)
  TD_TC_FORWARD(round_)
  TD_TC_FORWARD(clamp)
  TD_TC_FORWARD(clamp_)
  TD_TC_FORWARD(eq)
  TD_TC_FORWARD(ne)
  TD_TC_FORWARD(lt)
  TD_TC_FORWARD(le)
  TD_TC_FORWARD(gt)
  TD_TC_FORWARD(ge)
  Derived operator-() const { return wrap(td_.neg()); }
  // Reductions: Derived with the reduced batch size; all() / any() without arguments are bools.
  TD_TC_FORWARD_SIZES(sum)
  TD_TC_FORWARD_SIZES(mean)
  TD_TC_FORWARD_SIZES(std)
  TD_TC_FORWARD_SIZES(var)
  TD_TC_FORWARD_SIZES(min)
  TD_TC_FORWARD_SIZES(max)
  TD_TC_FORWARD_SIZES(any)
  TD_TC_FORWARD_SIZES(all)
  TD_TC_FORWARD(norm)
  // Shared memory (link //td/backends/shared_memory): the fields move into one shared block.
  TD_TC_FORWARD(share_memory_)
  TD_TC_FORWARD(is_shared)
  TD_TC_FORWARD(is_memmap)

  // ---- apply: checked, as fn may drop a field by returning an undefined tensor ------------
  // Same arguments as TensorDict::apply / named_apply. Throws as from_tensordict when the
  // result lacks a required field.
  //   MyData halved = data.apply([](const at::Tensor& x) {
  //     return x.is_floating_point() ? x / 2 : x;
  //   });
  template <class... A>
  Derived apply(A&&... a) const {
    return from_tensordict(td_.apply(tc_detail::Unwrap(std::forward<A>(a))...));
  }
  template <class... A>
  Derived named_apply(A&&... a) const {
    return from_tensordict(td_.named_apply(tc_detail::Unwrap(std::forward<A>(a))...));
  }

  // ---- equality --------------------------------------------------------------------------
  // Field-wise equality: a TensorDict of bool tensors, one per field, nested classes and
  // TensorDicts recursed into; a non-tensor field gives a bool tensor of its level's batch
  // shape, true when the two values are equal. It is a TensorDict, not Derived, because a
  // std::string / number field cannot hold a bool tensor. Throws KeyError naming the fields
  // set on one side only.
  //   bool same = (a == b).all();
  TensorDict operator==(const Derived& o) const { return tc_detail::FieldsEqual(td_, o.td_, true); }
  TensorDict operator!=(const Derived& o) const {
    return tc_detail::FieldsEqual(td_, o.td_, false);
  }

  // ---- memory-mapped files (the work is TensorDict's: link //td/backends/memmap) ----------
  // Writes Python tensordict's tensorclass layout (NOTE [ Tensorclass directory layout ] in
  // td/tensorclass/memmap.h): `prefix`/meta.json {"_type": "<class 'python_type()'>"} and the
  // fields as a memmap TensorDict in `prefix`/_tensordict (written crash-safely by
  // TensorDict::memmap; meta.json is then replaced atomically). Returns the memory-mapped
  // object. Throws as TensorDict::memmap, and ValueError for an unusable prefix.
  //   MyData saved = data.memmap("/data/mydata");
  Derived memmap(const std::string& prefix, const MemmapOptions& o = {}) const {
    TensorDict out = td_.memmap(tc_detail::PrepareClassDir(prefix, o.exists_ok()), o);
    tc_detail::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return wrap(std::move(out));
  }
  // In place: this object's fields become memory-mapped files (every handle sees them).
  Derived& memmap_(const std::string& prefix, const MemmapOptions& o = {}) {
    td_.memmap_(tc_detail::PrepareClassDir(prefix, o.exists_ok()), o);
    tc_detail::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return self();
  }
  // Same fields, shapes and dtypes at `prefix`, zero-filled sparse files (nothing copied).
  Derived memmap_like(const std::string& prefix, const MemmapOptions& o = {}) const {
    TensorDict out = td_.memmap_like(tc_detail::PrepareClassDir(prefix, o.exists_ok()), o);
    tc_detail::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return wrap(std::move(out));
  }
  // Opens a tensorclass directory written by memmap() or by Python tensordict (options as
  // TensorDict::load_memmap's, applied to the fields' directory). Throws
  // MemmapError naming the file when `prefix` is not a tensorclass directory or its "_type"
  // names another class, and KeyError / TypeError (as from_tensordict) when the stored fields
  // do not match Derived's.
  //   MyData loaded = MyData::load_memmap("/data/mydata");
  static Derived load_memmap(const std::string& prefix, const LoadMemmapOptions& o = {}) {
    return from_tensordict(tc_detail::LoadClassTensorDict(prefix, Derived::kClassName,
                                                          Derived::python_type(), o, names()));
  }

  // ---- printing ------------------------------------------------------------------------------
  // MyData(\n    image=Tensor(shape=..., device=..., dtype=..., is_shared=...),\n    ...,
  // batch_size=torch.Size([...]),\n    device=None,\n    is_shared=False): set fields in sorted
  // order, nested TensorClasses and TensorDicts indented, as Python tensordict prints them.
  std::string repr() const {
    std::vector<std::pair<std::string, std::string>> fields;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using T = typename tc_detail::IsOptional<typename decltype(tag)::type>::Inner;
      if (!td_.contains(key)) return;
      std::string n(name);
      if constexpr (tc_detail::kIsTensorClass<T>) {
        fields.emplace_back(n, tc_detail::FieldTraits<T>::read(td_, key).repr());
      } else {
        fields.emplace_back(n, tc_detail::EntryRepr(td_, n));
      }
    });
    return tc_detail::ClassRepr(Derived::kClassName, td_, std::move(fields));
  }

  // Wraps a TensorDict that is known to fit (the result of a structure-preserving operation)
  // without checking it; use from_tensordict() for anything else.
  static Derived wrap(TensorDict td) { return Derived(tc_detail::WrapTag{}, std::move(td)); }

 protected:
  TensorClass(tc_detail::WrapTag, TensorDict td) : td_(std::move(td)) {}
  TensorClass(at::IntArrayRef batch_size, std::optional<at::Device> device)
      : td_(std::initializer_list<TensorDict::Item>{}, batch_size, device) {}

  static std::vector<std::string_view> names() {
    return std::vector<std::string_view>(Derived::field_names().begin(),
                                         Derived::field_names().end());
  }
  // Used by TD_TENSORCLASS's accessors and setters.
  template <class T>
  typename tc_detail::FieldTraits<T>::Get get_field(const NestedKey& key) const {
    return tc_detail::FieldTraits<T>::read(td_, key);
  }
  template <class T>
  void set_field(const NestedKey& key, T v) {
    if constexpr (tc_detail::IsOptional<T>::value) {
      std::optional<Value> value = tc_detail::FieldTraits<T>::to_value(std::move(v));
      if (value) {
        td_.set(key, *std::move(value));
      } else if (td_.contains(key)) {
        td_.del_(key);
      }
    } else {
      td_.set(key, tc_detail::FieldTraits<T>::to_value(std::move(v)));
    }
  }
  // The named-field constructor: every name and value is checked before anything is built.
  void init_named(std::initializer_list<NamedField> fields) {
    const std::vector<std::string_view> all = names();
    std::vector<const NamedField*> given(all.size(), nullptr);
    for (const NamedField& f : fields) {
      size_t i = 0;
      while (i < all.size() && all[i] != f.name) ++i;
      if (i == all.size()) tc_detail::FailUnknown(Derived::kClassName, f.name, all);
      if (given[i]) TD_FAIL(ValueError, Derived::kClassName, ": field '", f.name, "' is given twice");
      given[i] = &f;
    }
    std::vector<std::string> missing;
    std::vector<TensorDict::Item> items;
    size_t i = 0;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using Tr = tc_detail::FieldTraits<typename decltype(tag)::type>;
      const NamedField* f = given[i++];
      if (!f || f->value.is_none()) {
        if (Tr::kRequired) missing.emplace_back(name);
        return;
      }
      items.emplace_back(key, Tr::from_field(f->value, Derived::kClassName, name));
    });
    if (!missing.empty()) tc_detail::FailMissing(Derived::kClassName, missing, all);
    td_ = TensorDict(items, td_.batch_size(), td_.device());
  }
  template <class T>
  void init_positional(std::vector<TensorDict::Item>* items, const NestedKey& key, T v) {
    if constexpr (tc_detail::IsOptional<T>::value) {
      std::optional<Value> value = tc_detail::FieldTraits<T>::to_value(std::move(v));
      if (value) items->emplace_back(key, *std::move(value));
    } else {
      items->emplace_back(key, tc_detail::FieldTraits<T>::to_value(std::move(v)));
    }
  }
  void finish_positional(const std::vector<TensorDict::Item>& items) {
    td_ = TensorDict(items, td_.batch_size(), td_.device());
  }

  TensorDict td_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  template <class I, class V>
  Derived& put(const I& i, const V& v) {
    td_.index_put_(i, v);
    return self();
  }
  // See NOTE [ TensorClass forwarding ].
  Derived rewrap(TensorDict&& t) const { return wrap(std::move(t)); }
  Derived& rewrap(TensorDict&) { return self(); }
  std::vector<Derived> rewrap(std::vector<TensorDict>&& v) const {
    std::vector<Derived> out;
    out.reserve(v.size());
    for (TensorDict& t : v) out.push_back(wrap(std::move(t)));
    return out;
  }
  template <class R>
  std::decay_t<R> rewrap(R&& r) const {
    return std::forward<R>(r);
  }
};

#undef TD_TC_FORWARD_SIZES
#undef TD_TC_FORWARD

}  // namespace td

// stack / cat / unbind, operators, *_like and printing of TensorClasses.
#include "td/tensorclass/free_functions.h"  // IWYU pragma: export

// ---- TD_TENSORCLASS -------------------------------------------------------------------------
#define TD_TC_NAME(T, name) #name,
#define TD_TC_PARAM(T, name) T name,
#define TD_TC_INIT(T, name) \
  this->template init_positional<T>(&td_tc_items, td_key_##name(), std::move(name));
#define TD_TC_VISIT(T, name) \
  f(::td::tc_detail::TypeTag<T>{}, std::string_view(#name), td_key_##name());
#define TD_TC_MEMBERS(T, name)                                                                   \
  static_assert(::td::tc_detail::FieldTraits<T>::kSupported,                                     \
                "td::TensorClass field '" #name "': unsupported field type '" #T                 \
                "'. A field is at::Tensor, td::TensorDict, a td::TensorClass, std::string, bool, " \
                "an integer or floating type, nlohmann::json, or std::optional of one of these"); \
  static_assert(!::td::tc_detail::IsMemberName(#name),                                           \
                "td::TensorClass field '" #name "' has the name of a TensorClass member (an "    \
                "operation such as index / reshape / sum, or batch_size, device, ...); rename "   \
                "the field");                                                                    \
  static const ::td::NestedKey& td_key_##name() {                                                \
    static const ::td::NestedKey key(#name);                                                     \
    return key;                                                                                  \
  }                                                                                              \
  typename ::td::tc_detail::FieldTraits<T>::Get name() const {                                   \
    return this->template get_field<T>(td_key_##name());                                         \
  }                                                                                              \
  td_self_type& set_##name(T value) {                                                            \
    this->template set_field<T>(td_key_##name(), std::move(value));                              \
    return *this;                                                                                \
  }

// Declares the fields of a TensorClass (see the file comment): inside the class body,
// `TD_TENSORCLASS(Class, (Type, name), ...)` with at most 32 fields. Types must not contain
// unparenthesised commas (use an alias). Leaves the class body in `public:`.
#define TD_TENSORCLASS(Class, ...)                                                            \
 public:                                                                                      \
  using td_self_type = Class;                                                                 \
  static constexpr const char* kClassName = #Class;                                           \
  static constexpr size_t kNumFields = TD_TC_COUNT(__VA_ARGS__);                              \
  static const std::array<std::string_view, kNumFields>& field_names() {                      \
    static constexpr std::array<std::string_view, kNumFields> names{                          \
        {TD_TC_FOR_EACH(TD_TC_NAME, __VA_ARGS__)}};                                           \
    return names;                                                                             \
  }                                                                                           \
  template <class F>                                                                          \
  static void td_for_each_field(F&& f) {                                                      \
    TD_TC_FOR_EACH(TD_TC_VISIT, __VA_ARGS__)                                                  \
  }                                                                                           \
  Class(::td::tc_detail::WrapTag tag, ::td::TensorDict td)                                    \
      : ::td::TensorClass<Class>(tag, std::move(td)) {}                                       \
  Class(TD_TC_FOR_EACH(TD_TC_PARAM, __VA_ARGS__)::at::IntArrayRef batch_size,                 \
        std::optional<::at::Device> device = std::nullopt)                                    \
      : ::td::TensorClass<Class>(batch_size, device) {                                        \
    std::vector<::td::TensorDict::Item> td_tc_items;                                          \
    TD_TC_FOR_EACH(TD_TC_INIT, __VA_ARGS__)                                                   \
    this->finish_positional(td_tc_items);                                                     \
  }                                                                                           \
  Class(std::initializer_list<::td::NamedField> fields, ::at::IntArrayRef batch_size,         \
        std::optional<::at::Device> device = std::nullopt)                                    \
      : ::td::TensorClass<Class>(batch_size, device) {                                        \
    this->init_named(fields);                                                                 \
  }                                                                                           \
  static Class unset(::at::IntArrayRef batch_size,                                            \
                     std::optional<::at::Device> device = std::nullopt) {                     \
    return Class(::td::tc_detail::WrapTag{},                                                  \
                 ::td::TensorDict(std::initializer_list<::td::TensorDict::Item>{}, batch_size, \
                                  device));                                                   \
  }                                                                                           \
  TD_TC_FOR_EACH(TD_TC_MEMBERS, __VA_ARGS__)
