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
// TD_TENSORCLASS(Class, (Type, name)..., (Type, name, default)...) declares, for each field:
// `name()` (returns the field), `set_name(value)` (writes it; returns *this), and the class's
// constructors:
//   Class(Type1 name1, ..., TypeN nameN, at::IntArrayRef batch_size,
//         td::TensorClassOptions options = {})     positional, every field (td::use_default in
//                                                  place of a field that has a default)
//   Class(std::initializer_list<td::NamedField> fields, at::IntArrayRef batch_size,
//         td::TensorClassOptions options = {})     by name; fields with a default may be left out
//   Class::unset(batch_size, device)    no field set yet (filled by index_put_, setters, ...)
// options: the device (a device alone converts to it) and lock. Defaults: NOTE [ Field defaults ]
// in td/tensorclass/fields.h. A class may declare `void post_init()`, which every constructor
// calls once the fields are set (NOTE [ Construction order ]), and the flags kFrozen / kShadow
// (see TensorClass below). Upstream's from_dict: td::from_dict<Class> (td/tensorclass/dict.h).
// Field types: see td/tensorclass/fields.h. A field of another type stops compilation with the
// static_assert "td::TensorClass field '<name>': unsupported field type '<Type>'. A field is
// ...", and a field named like a TensorClass member (index, reshape, batch_size, ...) with
// "td::TensorClass field '<name>' has the name of a TensorClass member ..." (unless kShadow). A
// value of the wrong type passed to a positional constructor or setter is a C++ conversion error
// at the call (e.g. no conversion from `int` to `at::Tensor`); by name it is a td TypeError
// naming the field.
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
#include <torch/arg.h>

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
#include "td/tensorclass/declare.h"  // IWYU pragma: export
#include "td/tensorclass/fields.h"
#include "td/tensorclass/for_each.h"

namespace td {
namespace internal::tensorclass {

// Printing helpers (tensorclass.cc): one entry's text, as TensorDict's repr prints entries
// (under the print options, td/core/print_options.h).
std::string EntryRepr(const TensorDict& td, const std::string& key);
// `text` with every line after the first indented by `indent` spaces.
std::string Reindent(const std::string& text, int indent);
// Class(\n    a=...,\n    b=...,\n    batch_size=..., device=..., is_shared=...): fields ordered
// and lines shown as the print options say.
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

// Throws BatchSizeError when the default of field `name` (a tensor or TensorDict) does not start
// with `batch_size`.
void CheckDefault(std::string_view cls, std::string_view name, const Value& value,
                  at::IntArrayRef batch_size);
// The JSON object of a TensorDict holding non-tensor entries only (nested levels as nested
// objects), or nullopt when it holds a tensor.
std::optional<nlohmann::json> NonTensorTreeAsJson(const TensorDict& td);
// Throws LockedError: "<Class> is frozen (kFrozen): <what> [of field '<field>'] is refused ...";
// with `frozen_by`, the object is a nested field read from an object of that frozen class.
[[noreturn]] void FailFrozen(std::string_view cls, std::string_view what, std::string_view field,
                             const char* frozen_by = nullptr);
// A locked TensorDict holding `td` (the TensorDict of an object of the frozen class `cls`): while
// it lives, no handle to `td` can unlock it (NOTE [ Frozen classes ] in declare.h).
TensorDict FrozenOwner(const TensorDict& td, std::string_view cls);
// "update() of fields 'a', 'b'" for the top-level keys of `other`.
std::string UpdateWhat(const TensorDict& other);
// Whether a frozen object may run this update: only in place (UpdateOptions::inplace), which
// writes existing tensors as set_ does.
inline bool FrozenMayUpdate(const TensorDict&) { return false; }
inline bool FrozenMayUpdate(const TensorDict&, const UpdateOptions& o) { return o.inplace(); }
// (values, indices) of min_with_indices / max_with_indices / cummax / cummin on a TensorClass:
// two objects of the class (structured bindings work: auto [v, i] = data.cummax(0);).
template <class D>
struct ValuesIndicesOf {
  D values;
  D indices;
};

}  // namespace internal::tensorclass

// Options of a TensorClass constructor (upstream's constructor keywords device=, names= and
// lock=):
//   MyData d(images, mask, labels, {100}, td::TensorClassOptions().device(at::kCPU).lock(true));
//   MyData n(images, mask, labels, {8, 100}, td::TensorClassOptions().names({"env", "time"}));
// A device alone converts to it, so `MyData(images, mask, labels, {100}, at::kCUDA)` reads as
// before.
struct TensorClassOptions {
  TensorClassOptions() = default;
  template <class D,
            std::enable_if_t<std::is_constructible_v<std::optional<at::Device>, D&&> &&
                                 !std::is_same_v<std::decay_t<D>, TensorClassOptions>,
                             int> = 0>
  TensorClassOptions(D&& device) : device_(std::forward<D>(device)) {}  // NOLINT
  // The device every tensor field is moved to (nullopt: none).
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  // Lock the object once it is built (after post_init): no field may then be added, removed or
  // replaced by one of another shape (TensorDict::lock_). Objects of a kFrozen class are
  // locked either way.
  TORCH_ARG(bool, lock) = false;
  // The names of the batch dims (TensorDict::set_names' rules; empty: unnamed), set before
  // post_init.
  TORCH_ARG(DimNames, names);
};

// NOTE [ TensorClass forwarding ]
// TensorClass's operations are the rows of the op table (NOTE [ The op table ] in
// td/core/ops.def): each row gives TensorClass a member with the row's exact parameters that
// calls the TensorDict member on td_ and maps its result by the row's kind (TD_TC_OP_<KIND>
// below). So the set is TensorDict's by construction, overload resolution is TensorDict's, and
// a TensorClass converts to `const TensorDict&` wherever a TensorDict operand is taken.
#define TD_TC_FIRST_(a, ...) a
#define TD_TC_FIRST(...) TD_TC_FIRST_(__VA_ARGS__, )
#define TD_TC_OP_OUT(ret, name, params, args) \
  Derived name params const { return wrap(td_.name args); }
#define TD_TC_OP_CHECKED(ret, name, params, args) \
  Derived name params const { return from_tensordict(td_.name args); }
#define TD_TC_OP_IN(ret, name, params, args)                                    \
  Derived& name params {                                                         \
    if constexpr (std::string_view(#name) == "unlock_") check_unfrozen("unlock_()"); \
    td_.name args;                                                               \
    return self();                                                               \
  }
#define TD_TC_OP_IN_FIELDS(ret, name, params, args)                              \
  Derived& name params {                                                         \
    if (!internal::tensorclass::FrozenMayUpdate args) {                          \
      check_unfrozen(internal::tensorclass::UpdateWhat(TD_TC_FIRST args));       \
    }                                                                            \
    check_fields(TD_TC_FIRST args, #name);                                       \
    td_.name args;                                                               \
    return self();                                                               \
  }
#define TD_TC_OP_LIST(ret, name, params, args) \
  std::vector<Derived> name params const { return wrap_all(td_.name args); }
#define TD_TC_OP_PAIR(ret, name, params, args)                        \
  internal::tensorclass::ValuesIndicesOf<Derived> name params const {             \
    ValuesIndices r = td_.name args;                                  \
    return {wrap(std::move(r.values)), wrap(std::move(r.indices))};   \
  }
#define TD_TC_OP_QUERY(ret, name, params, args) \
  ret name params const { return td_.name args; }
#define TD_TC_OP_CUSTOM_CONST(ret, name, params, args)
#define TD_TC_OP_CUSTOM(ret, name, params, args)
#define TD_TC_OP_DICT(ret, name, params, args)
#define TD_TC_OP_DICT_CONST(ret, name, params, args)

// The CRTP base of every TensorClass (see the file comment). Derived declares its fields with
// TD_TENSORCLASS. Operations mirror td::TensorDict's (td/core/tensordict.h, where each is
// documented), with Derived in place of TensorDict.
template <class Derived>
class TensorClass : public internal::tensorclass::TensorClassTag {
 public:
  using Index = at::indexing::TensorIndex;

  // ---- class flags: a class redeclares them in its body, before TD_TENSORCLASS --------------
  // kFrozen: every object of the class is locked from construction on, and stays so
  // (NOTE [ Frozen classes ] in td/tensorclass/declare.h; upstream's frozen=True).
  //   class Config : public td::TensorClass<Config> {
  //    public:
  //     static constexpr bool kFrozen = true;
  //     TD_TENSORCLASS(Config, (at::Tensor, weights), (double, lr))
  //   };
  static constexpr bool kFrozen = false;
  // kShadow: fields may be named like TensorClass's operations and properties (index, to,
  // batch_size, ...), whose accessor then hides the member (NOTE [ Shadowing fields ] in
  // td/tensorclass/declare.h; upstream's shadow=True).
  static constexpr bool kShadow = false;

  // ---- the underlying TensorDict -----------------------------------------------------------
  // The TensorDict holding the fields (a handle: writes go to this object's fields). For an
  // object of a kFrozen class it is locked for good: the handle and its copies cannot unlock
  // it (LockedError naming the class) while the object lives; to_tensordict() gives an unlocked
  // copy that does not change the object (NOTE [ Frozen classes ] in declare.h).
  const TensorDict& tensordict() const { return td_; }
  // A separate TensorDict with the same entries (a shallow copy: tensors are shared, keys not).
  //   td::TensorDict plain = data.to_tensordict();
  TensorDict to_tensordict() const { return td_.copy(); }
  // Wraps `td` (a handle: no copy) as Derived after checking that it holds every required
  // field with the declared kind and no other key. Throws KeyError naming the missing and the
  // extra keys, TypeError naming a field of the wrong kind.
  //   MyData d = MyData::from_tensordict(td::TensorDict({{"image", x}, ...}, {100}));
  // Then runs Derived's post_init() and, for a kFrozen class, locks `td` (as every constructor
  // does); defaults are not filled (td::from_dict does, td/tensorclass/dict.h).
  static Derived from_tensordict(TensorDict td) {
    std::string why = check_tensordict(td, /*throw_keys=*/true);
    if (!why.empty()) TD_FAIL(TypeError, Derived::kClassName, ".from_tensordict: ", why);
    return td_adopt(std::move(td), /*lock=*/false);
  }
  // "" when `td` can be wrapped as Derived, else why not. With `throw_keys`, missing and extra
  // keys throw KeyError instead of being returned.
  static std::string check_tensordict(const TensorDict& td, bool throw_keys = false) {
    std::vector<std::string> missing;
    std::string why;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using Tr = internal::tensorclass::FieldTraits<typename decltype(tag)::type>;
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
    std::string keys =
        internal::tensorclass::KeyMismatch(Derived::kClassName, missing, extra, field_name_list());
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
  // A TensorClass is accepted wherever a `const TensorDict&` is (its fields' TensorDict).
  operator const TensorDict&() const { return td_; }  // NOLINT(google-explicit-constructor)

  // ---- every op of the table (NOTE [ TensorClass forwarding ]) -------------------------------
  // Each is documented at its row in td/core/ops.def. OUT / LIST / PAIR results are objects of
  // the class; in-place ops return this object; apply / named_apply check their result as
  // from_tensordict does (fn may drop a field); update(other) first checks that `other` holds
  // only fields of the class, with their declared kinds.
  //   MyData row = data.index({0});  MyData grid = data.reshape({10, 10});
  //   MyData y = (x * 2).add_(1);    auto [v, i] = data.max_with_indices(0);
  using Item = TensorDict::Item;
  using LeafFn = TensorDict::LeafFn;
  using BinaryLeafFn = TensorDict::BinaryLeafFn;
  using NaryLeafFn = TensorDict::NaryLeafFn;
  using NamedLeafFn = TensorDict::NamedLeafFn;
  using NamedNaryLeafFn = TensorDict::NamedNaryLeafFn;
#define TD_OP(kind, ret, name, params, args, sample) TD_TC_OP_##kind(ret, name, params, args)
#define TD_UNARY(name, kernel)                          \
  Derived name() const { return wrap(td_.name()); }     \
  Derived& name##_() {                                  \
    td_.name##_();                                      \
    return self();                                      \
  }
#include "td/core/ops.def"
  Derived operator-() const { return wrap(td_.neg()); }

  // Writes a Derived at `i`; fields this object lacks are created (lazy preallocation,
  // TensorDict::index_put_). A raw TensorDict is not accepted: it could create keys that are not
  // fields. (Tensors and numbers: the table's index_put_ rows.)
  //   MyData buf = MyData::unset({n});  for (i...) buf.index_put_({i}, item);
  Derived& index_put_(at::ArrayRef<Index> i, const Derived& v) {
    td_.index_put_(i, v.td_);
    return self();
  }
  Derived& index_put_(std::initializer_list<Index> i, const Derived& v) {
    td_.index_put_(i, v.td_);
    return self();
  }

  // ---- equality --------------------------------------------------------------------------
  // Field-wise equality: a TensorDict of bool tensors, one per field, nested classes and
  // TensorDicts recursed into; a non-tensor field gives a bool tensor of its level's batch
  // shape, true when the two values are equal. It is a TensorDict, not Derived, because a
  // std::string / number field cannot hold a bool tensor. Throws KeyError naming the fields
  // set on one side only.
  //   bool same = (a == b).all();
  TensorDict operator==(const Derived& o) const { return internal::tensorclass::FieldsEqual(td_, o.td_, true); }
  TensorDict operator!=(const Derived& o) const {
    return internal::tensorclass::FieldsEqual(td_, o.td_, false);
  }

  // ---- memory-mapped files (the work is TensorDict's: link //td/backends/memmap) ----------
  // Writes Python tensordict's tensorclass layout (NOTE [ Tensorclass directory layout ] in
  // td/tensorclass/memmap.h): `prefix`/meta.json {"_type": "<class 'python_type()'>"} and the
  // fields as a memmap TensorDict in `prefix`/_tensordict (written crash-safely by
  // TensorDict::memmap; meta.json is then replaced atomically). Returns the memory-mapped
  // object. Throws as TensorDict::memmap, and ValueError for an unusable prefix.
  //   MyData saved = data.memmap("/data/mydata");
  Derived memmap(const std::string& prefix, const MemmapOptions& o = {}) const {
    TensorDict out = td_.memmap(internal::tensorclass::PrepareClassDir(prefix, o.exists_ok()), o);
    internal::tensorclass::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return wrap(std::move(out));
  }
  // In place: this object's fields become memory-mapped files (every handle sees them).
  Derived& memmap_(const std::string& prefix, const MemmapOptions& o = {}) {
    td_.memmap_(internal::tensorclass::PrepareClassDir(prefix, o.exists_ok()), o);
    internal::tensorclass::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return self();
  }
  // Same fields, shapes and dtypes at `prefix`, zero-filled sparse files (nothing copied).
  Derived memmap_like(const std::string& prefix, const MemmapOptions& o = {}) const {
    TensorDict out = td_.memmap_like(internal::tensorclass::PrepareClassDir(prefix, o.exists_ok()), o);
    internal::tensorclass::WriteClassMeta(prefix, Derived::python_type(), o.fsync());
    return wrap(std::move(out));
  }
  // Opens a tensorclass directory written by memmap() or by Python tensordict (options as
  // TensorDict::load_memmap's, applied to the fields' directory). Throws
  // MemmapError naming the file when `prefix` is not a tensorclass directory or its "_type"
  // names another class, and KeyError / TypeError (as from_tensordict) when the stored fields
  // do not match Derived's.
  //   MyData loaded = MyData::load_memmap("/data/mydata");
  static Derived load_memmap(const std::string& prefix, const LoadMemmapOptions& o = {}) {
    return from_tensordict(internal::tensorclass::LoadClassTensorDict(
        prefix, Derived::kClassName, Derived::python_type(), o, field_name_list()));
  }

  // ---- generic access by field name (upstream's tc.set(name, v) / tc.del_(name)) --------------
  // Writes field `name` (a value of its declared kind; the typed set_<name>() is the checked
  // C++ spelling). Throws KeyError naming the field and the class's fields when there is no such
  // field, TypeError naming it when the value is of another kind, and what TensorDict::set
  // throws (BatchSizeError). Returns *this.
  //   data.set("label", labels + 1);
  Derived& set(std::string_view name, Value value) {
    const NestedKey key = field_key(name, "set");
    check_unfrozen("set", name);
    std::string why;
    Derived::td_for_each_field([&](auto tag, std::string_view field, const NestedKey&) {
      using Tr = internal::tensorclass::FieldTraits<typename decltype(tag)::type>;
      if (field == name) why = Tr::check(value);
    });
    if (!why.empty()) {
      TD_FAIL(TypeError, Derived::kClassName, ".set: field '", name, "' cannot hold ", why);
    }
    td_.set(key, std::move(value));
    return self();
  }
  // Upstream's load_state_dict on an instance (state_dict() comes from the op table): the
  // entries of `state` ("field.sub" -> tensor, as state_dict() writes them) copied into the
  // fields, as TensorDict::load_state_dict. Throws KeyError naming the keys whose first part is
  // not a field (checked before anything is written; the class keeps its fields), and what
  // TensorDict::load_state_dict throws.
  //   fresh.load_state_dict(trained.state_dict());
  Derived& load_state_dict(const TensorMap& state, bool strict = true,
                           std::string_view separator = ".") {
    check_state_keys(state, separator);
    td_.load_state_dict(state, strict, separator);
    return self();
  }
  Derived& load_state_dict(const StateDict& state, bool strict = true,
                           std::string_view separator = ".") {
    check_state_keys(state.tensors, separator);
    td_.load_state_dict(state, strict, separator);
    return self();
  }

  // Removes an optional field (it reads as unset: upstream's None). Throws KeyError for an
  // unknown field, ValueError naming a required one.
  Derived& del_(std::string_view name) {
    const NestedKey key = field_key(name, "del_");
    check_unfrozen("del_", name);
    bool required = false;
    Derived::td_for_each_field([&](auto tag, std::string_view field, const NestedKey&) {
      if (field == name) required = internal::tensorclass::FieldTraits<typename decltype(tag)::type>::kRequired;
    });
    if (required) {
      TD_FAIL(ValueError, Derived::kClassName, ".del_: field '", name,
              "' is required (declare it std::optional to allow removing it)");
    }
    if (td_.contains(key)) td_.del_(key);
    return self();
  }

  // ---- printing ------------------------------------------------------------------------------
  // MyData(\n    image=Tensor(shape=..., device=..., dtype=..., is_shared=...),\n    ...,
  // batch_size=torch.Size([...]),\n    device=None,\n    is_shared=False): set fields in sorted
  // order, nested TensorClasses and TensorDicts indented, as Python tensordict prints them.
  std::string repr() const {
    std::vector<std::pair<std::string, std::string>> fields;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using T = typename internal::tensorclass::IsOptional<typename decltype(tag)::type>::Inner;
      if (!td_.contains(key)) return;
      std::string n(name);
      if constexpr (internal::tensorclass::kIsTensorClass<T>) {
        fields.emplace_back(n, internal::tensorclass::FieldTraits<T>::read(td_, key).repr());
      } else {
        fields.emplace_back(n, internal::tensorclass::EntryRepr(td_, n));
      }
    });
    return internal::tensorclass::ClassRepr(Derived::kClassName, td_, std::move(fields));
  }

  // Wraps a TensorDict that is known to fit (the result of a structure-preserving operation)
  // without checking it, locking it for a kFrozen class; use from_tensordict() for anything
  // else.
  static Derived wrap(TensorDict td) {
    Derived out(internal::tensorclass::WrapTag{}, std::move(td));
    if constexpr (Derived::kFrozen) out.td_freeze();
    return out;
  }

  // ---- construction steps: TD_TENSORCLASS's constructors and td::from_dict (dict.h) ---------
  // The entries of fields given by name, in field order, with the defaults of those not given
  // (a required field given as nullopt counts as not given; NOTE [ Field defaults ] in
  // td/tensorclass/fields.h). Throws KeyError naming an unknown field or the missing required
  // ones, TypeError naming a field given a value of another kind, ValueError for a field given
  // twice, BatchSizeError for a default that does not start with `batch_size`.
  static std::vector<TensorDict::Item> td_items(at::ArrayRef<NamedField> fields,
                                                at::IntArrayRef batch_size) {
    const std::vector<std::string_view> all = field_name_list();
    std::vector<const NamedField*> given(all.size(), nullptr);
    for (const NamedField& f : fields) {
      size_t i = 0;
      while (i < all.size() && all[i] != f.name) ++i;
      if (i == all.size()) internal::tensorclass::FailUnknown(Derived::kClassName, f.name, all);
      if (given[i]) TD_FAIL(ValueError, Derived::kClassName, ": field '", f.name, "' is given twice");
      given[i] = &f;
    }
    std::vector<std::string> missing;
    std::vector<TensorDict::Item> items;
    size_t i = 0;
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using Tag = decltype(tag);
      using Tr = internal::tensorclass::FieldTraits<typename Tag::type>;
      const NamedField* f = given[i++];
      if (!f || (Tr::kRequired && f->value.is_none())) {
        if constexpr (internal::tensorclass::kHasDefault<Tag>) {
          add_default<typename Tag::type>(&items, key, Tag::kDefault, name, batch_size);
          return;
        }
      }
      if (!f || f->value.is_none()) {
        if (Tr::kRequired) missing.emplace_back(name);
        return;
      }
      items.emplace_back(key, Tr::from_field(f->value, Derived::kClassName, name));
    });
    if (!missing.empty()) internal::tensorclass::FailMissing(Derived::kClassName, missing, all);
    return items;
  }
  // The top-level entries of `entries` as fields by name (tensors, TensorDicts, JSON values). A
  // JSON null in a field not declared nlohmann::json is not given (upstream's None); in a field
  // declared nlohmann::json, a TensorDict of non-tensor entries only is that JSON object (a dict
  // value read from a c10::IValue dict).
  static std::vector<NamedField> td_named(const TensorDict& entries) {
    std::vector<NamedField> out;
    entries.for_each_entry([&](const std::string& key, const Value& v) {
      if (v.is_tensor()) {
        out.emplace_back(key, v.tensor());
      } else if (v.is_tensordict()) {
        std::optional<nlohmann::json> j;
        if (td_is_json_field(key)) j = internal::tensorclass::NonTensorTreeAsJson(v.tensordict());
        if (j) {
          out.emplace_back(key, *std::move(j));
        } else {
          out.emplace_back(key, v.tensordict());
        }
      } else if (v.non_tensor().is_null() && !td_is_json_field(key)) {
        out.emplace_back(key, std::nullopt);
      } else {
        out.emplace_back(key, v.non_tensor());
      }
    });
    return out;
  }
  // Wraps `td` without checking it, then runs Derived's post_init() and locks the object when
  // `lock` or kFrozen: the last steps of every constructor.
  static Derived td_adopt(TensorDict td, bool lock) {
    Derived out(internal::tensorclass::WrapTag{}, std::move(td));
    out.finish_init(lock);
    return out;
  }

 protected:
  TensorClass(internal::tensorclass::WrapTag, TensorDict td) : td_(std::move(td)) {}
  TensorClass(at::IntArrayRef batch_size, std::optional<at::Device> device)
      : td_(std::initializer_list<TensorDict::Item>{}, batch_size, device) {}

  static std::vector<std::string_view> field_name_list() {
    return std::vector<std::string_view>(Derived::field_names().begin(),
                                         Derived::field_names().end());
  }
  // Used by TD_TENSORCLASS's accessors and setters.
  // A nested class read from a frozen object (or from a field of one) refuses its own writes
  // too (NOTE [ Frozen classes ]).
  template <class T>
  typename internal::tensorclass::FieldTraits<T>::Get get_field(const NestedKey& key) const {
    auto v = internal::tensorclass::FieldTraits<T>::read(td_, key);
    using Inner = typename internal::tensorclass::IsOptional<T>::Inner;
    if constexpr (internal::tensorclass::kIsTensorClass<Inner>) {
      if (const char* by = td_frozen_by()) {
        if constexpr (internal::tensorclass::IsOptional<T>::value) {
          if (v) v->td_frozen_by_ = by;
        } else {
          v.td_frozen_by_ = by;
        }
      }
    }
    return v;
  }
  template <class T>
  void set_field(const NestedKey& key, T v) {
    check_unfrozen("the setter", key.front());
    if constexpr (internal::tensorclass::IsOptional<T>::value) {
      std::optional<Value> value = internal::tensorclass::FieldTraits<T>::to_value(std::move(v));
      if (value) {
        td_.set(key, *std::move(value));
      } else if (td_.contains(key)) {
        td_.del_(key);
      }
    } else {
      td_.set(key, internal::tensorclass::FieldTraits<T>::to_value(std::move(v)));
    }
  }
  // The named-field constructor: every name and value is checked before anything is built.
  void init_named(std::initializer_list<NamedField> fields, const TensorClassOptions& options) {
    td_ = TensorDict(td_items(fields, td_.batch_size()), td_.batch_size(), td_.device(),
                     options.names());
    finish_init(options.lock());
  }
  // The positional constructor: init_positional for each field, then finish_positional.
  template <class T>
  void init_positional(std::vector<TensorDict::Item>* items, const NestedKey& key, T v) {
    if constexpr (internal::tensorclass::IsOptional<T>::value) {
      std::optional<Value> value = internal::tensorclass::FieldTraits<T>::to_value(std::move(v));
      if (value) items->emplace_back(key, *std::move(value));
    } else {
      items->emplace_back(key, internal::tensorclass::FieldTraits<T>::to_value(std::move(v)));
    }
  }
  template <class T>
  void init_positional(std::vector<TensorDict::Item>* items, const NestedKey& key,
                       internal::tensorclass::OrDefault<T> v, T (*dflt)(), std::string_view name) {
    if (v.given()) {
      init_positional<T>(items, key, std::move(v).take());
    } else {
      add_default<T>(items, key, dflt, name, td_.batch_size());
    }
  }
  void finish_positional(const std::vector<TensorDict::Item>& items,
                         const TensorClassOptions& options) {
    td_ = TensorDict(items, td_.batch_size(), td_.device(), options.names());
    finish_init(options.lock());
  }
  // NOTE [ Construction order ]
  // Every constructor (positional, named, from_tensordict, td::from_dict) sets the fields
  // (defaults included), then calls Derived's post_init() when it declares one, then locks the
  // object when asked (TensorClassOptions::lock) or when the class is kFrozen — upstream's
  // order. Operations returning the class (wrap) do not call post_init.
  void finish_init(bool lock) {
    internal::tensorclass::PostInitAccess::call(self());
    if constexpr (Derived::kFrozen) {
      td_freeze();
    } else {
      if (lock && !td_.is_locked()) td_.lock_();
    }
  }

  TensorDict td_;

 private:
  template <class>
  friend class TensorClass;
  // kFrozen: locks td_ and holds a locked TensorDict above it (FrozenOwner), so that no handle
  // to td_ (tensordict(), the conversion to const TensorDict&) can unlock it while this object
  // lives.
  void td_freeze() {
    if (!td_.is_locked()) td_.lock_();
    td_frozen_owner_ = internal::tensorclass::FrozenOwner(td_, Derived::kClassName);
  }
  // The frozen class whose object this one is, or was read from as a nested field; null when
  // writes are allowed.
  const char* td_frozen_by() const {
    if constexpr (Derived::kFrozen) {
      if (td_.is_locked()) return Derived::kClassName;
    }
    return td_frozen_by_;
  }
  std::optional<TensorDict> td_frozen_owner_;
  const char* td_frozen_by_ = nullptr;
  Derived& self() { return static_cast<Derived&>(*this); }
  // LockedError naming `what` (and `field`) when this object of a kFrozen class is locked (that
  // is, once it is built: post_init may still write).
  void check_unfrozen(std::string_view what, std::string_view field = {}) const {
    if constexpr (Derived::kFrozen) {
      if (td_.is_locked()) internal::tensorclass::FailFrozen(Derived::kClassName, what, field);
    }
    if (td_frozen_by_ != nullptr) {
      internal::tensorclass::FailFrozen(Derived::kClassName, what, field, td_frozen_by_);
    }
  }
  template <class T>
  static void add_default(std::vector<TensorDict::Item>* items, const NestedKey& key, T (*dflt)(),
                          std::string_view name, at::IntArrayRef batch_size) {
    if constexpr (internal::tensorclass::IsOptional<T>::value) {
      std::optional<Value> v = internal::tensorclass::FieldTraits<T>::to_value(dflt());
      if (!v) return;
      internal::tensorclass::CheckDefault(Derived::kClassName, name, *v, batch_size);
      items->emplace_back(key, *std::move(v));
    } else {
      Value v = internal::tensorclass::FieldTraits<T>::to_value(dflt());
      internal::tensorclass::CheckDefault(Derived::kClassName, name, v, batch_size);
      items->emplace_back(key, std::move(v));
    }
  }
  static bool td_is_json_field(std::string_view name) {
    bool json = false;
    Derived::td_for_each_field([&](auto tag, std::string_view field, const NestedKey&) {
      using T = typename internal::tensorclass::IsOptional<typename decltype(tag)::type>::Inner;
      if (field == name) json = std::is_same_v<T, nlohmann::json>;
    });
    return json;
  }
  // KeyError naming the state keys whose first part (before `separator`) is not a field.
  static void check_state_keys(const TensorMap& state, std::string_view separator) {
    std::string bad;
    for (const auto& item : state) {
      const std::string& k = item.key();
      const size_t cut = separator.empty() ? std::string::npos : k.find(separator);
      if (!has_field(std::string_view(k).substr(0, cut))) bad += (bad.empty() ? "'" : ", '") + k + "'";
    }
    if (!bad.empty()) {
      TD_FAIL(KeyError, Derived::kClassName, ".load_state_dict: ", bad,
              " name no field of the class");
    }
  }
  // The key of field `name`, or KeyError naming it and the fields.
  static NestedKey field_key(std::string_view name, const char* op) {
    std::optional<NestedKey> found;
    std::string fields;
    Derived::td_for_each_field([&](auto, std::string_view field, const NestedKey& key) {
      if (field == name) found = key;
      fields += (fields.empty() ? "'" : ", '") + std::string(field) + "'";
    });
    if (!found) {
      TD_FAIL(KeyError, Derived::kClassName, ".", op, ": no field '", name, "'; the fields are [",
              fields, "]");
    }
    return *found;
  }
  static std::vector<Derived> wrap_all(std::vector<TensorDict>&& v) {
    std::vector<Derived> out;
    out.reserve(v.size());
    for (TensorDict& t : v) out.push_back(wrap(std::move(t)));
    return out;
  }
  // Throws KeyError naming the keys of `other` that are not fields, TypeError naming a field
  // whose value in `other` is of another kind (before an IN_FIELDS op writes anything).
  void check_fields(const TensorDict& other, const char* op) const {
    std::vector<std::string> extra;
    for (const std::string& k : other.storage().keys()) {
      if (!has_field(k)) extra.push_back(k);
    }
    if (!extra.empty()) {
      TD_FAIL(KeyError, Derived::kClassName, ".", op, ": ",
              internal::tensorclass::KeyMismatch(Derived::kClassName, {}, extra, field_name_list()));
    }
    Derived::td_for_each_field([&](auto tag, std::string_view name, const NestedKey& key) {
      using Tr = internal::tensorclass::FieldTraits<typename decltype(tag)::type>;
      std::optional<Value> v = other.find(key);
      if (!v) return;
      std::string w = Tr::check(*v);
      if (!w.empty()) {
        TD_FAIL(TypeError, Derived::kClassName, ".", op, ": field '", name, "' would hold ", w,
                ", but it is declared as ", Tr::kDeclared);
      }
    });
  }
};

#undef TD_TC_FIRST_
#undef TD_TC_FIRST
#undef TD_TC_OP_OUT
#undef TD_TC_OP_CHECKED
#undef TD_TC_OP_IN
#undef TD_TC_OP_IN_FIELDS
#undef TD_TC_OP_LIST
#undef TD_TC_OP_PAIR
#undef TD_TC_OP_QUERY
#undef TD_TC_OP_CUSTOM_CONST
#undef TD_TC_OP_CUSTOM
#undef TD_TC_OP_DICT
#undef TD_TC_OP_DICT_CONST

}  // namespace td

// stack / cat / unbind, operators, *_like and printing of TensorClasses.
#include "td/tensorclass/free_functions.h"  // IWYU pragma: export

// ---- TD_TENSORCLASS -------------------------------------------------------------------------
// Declares the fields of a TensorClass (see the file comment of td/tensorclass/tensorclass.h):
// inside the class body, `TD_TENSORCLASS(Class, (Type, name), (Type, name, default), ...)` with
// at most 32 fields. Types and defaults must not contain unparenthesised commas (use an alias,
// or parentheses). Leaves the class body in `public:`.
#define TD_TENSORCLASS(Class, ...)                                                            \
 public:                                                                                      \
  using td_self_type = Class;                                                                 \
  friend struct ::td::internal::tensorclass::PostInitAccess;                                              \
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
  Class(::td::internal::tensorclass::WrapTag tag, ::td::TensorDict td)                                    \
      : ::td::TensorClass<Class>(tag, std::move(td)) {}                                       \
  Class(TD_TC_FOR_EACH(TD_TC_PARAM, __VA_ARGS__)::at::IntArrayRef td_batch_size,              \
        ::td::TensorClassOptions td_options = {})                                             \
      : ::td::TensorClass<Class>(td_batch_size, td_options.device()) {                        \
    std::vector<::td::TensorDict::Item> td_tc_items;                                          \
    TD_TC_FOR_EACH(TD_TC_INIT, __VA_ARGS__)                                                   \
    this->finish_positional(td_tc_items, td_options);                                         \
  }                                                                                           \
  Class(std::initializer_list<::td::NamedField> td_fields, ::at::IntArrayRef td_batch_size,   \
        ::td::TensorClassOptions td_options = {})                                             \
      : ::td::TensorClass<Class>(td_batch_size, td_options.device()) {                        \
    this->init_named(td_fields, td_options);                                                  \
  }                                                                                           \
  static Class unset(::at::IntArrayRef td_batch_size,                                         \
                     std::optional<::at::Device> td_device = std::nullopt) {                  \
    return ::td::TensorClass<Class>::wrap(::td::TensorDict(                                   \
        std::initializer_list<::td::TensorDict::Item>{}, td_batch_size, td_device));          \
  }                                                                                           \
  TD_TC_FOR_EACH(TD_TC_MEMBERS, __VA_ARGS__)
