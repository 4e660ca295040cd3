// Upstream's tensorclass from_dict / from_dict_instance: a class built from a dict — fields by
// name, a TensorDict, or a c10::IValue dict (what torch::pickle_load gives for a Python dict,
// or td::to_dict wrote) — with the batch size given or inferred, as td::from_dict
// (td/io/dict.h) builds a TensorDict.
//
//   MyData d = td::from_dict<MyData>({{"image", images}, {"mask", mask}, {"label", labels}},
//                                    td::FromDictOptions().auto_batch_size(true));   // [100]
//   MyData e = td::from_dict<MyData>(torch::pickle_load(bytes), td::FromDictOptions().batch_dims(1));
//   MyData f = td::from_dict_instance(d, td::to_dict(d));     // same class as d
//
// Bazel: //td/tensorclass:dict (brings //td/io). See docs/tensorclass.md.
#pragma once

#include <ATen/core/ivalue.h>

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "td/core/tensordict.h"
#include "td/io/dict.h"
#include "td/tensorclass/tensorclass.h"

namespace td {
namespace internal::tensorclass {

// Builds C from fields by name as its named constructor does — every name a field, values of
// the declared kinds, defaults for the fields not given (checked against the given batch size,
// or [] when inferring) — then hands the entries to td::from_dict with `options` (which infers
// the batch size, defaults included, and rejects batch_size combined with auto_batch_size /
// batch_dims), then runs post_init and locks a kFrozen class (NOTE [ Construction order ] in
// td/tensorclass/tensorclass.h).
template <class C>
C FromNamed(at::ArrayRef<NamedField> fields, const FromDictOptions& options) {
  const std::vector<int64_t> batch = options.batch_size().value_or(std::vector<int64_t>{});
  std::vector<TensorDict::Item> items = C::td_items(fields, batch);
  if (options.auto_batch_size() || options.batch_dims()) {
    // Inferring sets the batch size of nested levels too: work on copies of the nested
    // TensorDicts the caller passed, never on them.
    for (TensorDict::Item& item : items) {
      if (item.second.is_tensordict()) item.second = Value(item.second.tensordict().copy());
    }
  }
  return C::td_adopt(::td::from_dict(items, options), /*lock=*/false);
}

}  // namespace internal::tensorclass

#define TD_TC_IF_CLASS(C) template <class C, std::enable_if_t<internal::tensorclass::kIsTensorClass<C>, int> = 0>

// From fields given by name (as the named constructor takes them; fields with a default may be
// left out). Throws what the named constructor throws (KeyError for an unknown or missing
// field, TypeError for a value of another kind), and what td::from_dict throws (ValueError for
// batch_size with auto_batch_size / batch_dims, BatchSizeError naming a field that does not
// start with the given batch size).
TD_TC_IF_CLASS(C) C from_dict(std::initializer_list<NamedField> fields, const FromDictOptions& options = {}) {
  return internal::tensorclass::FromNamed<C>(fields, options);
}
TD_TC_IF_CLASS(C) C from_dict(const std::vector<NamedField>& fields, const FromDictOptions& options = {}) {
  return internal::tensorclass::FromNamed<C>(fields, options);
}
// From the top-level entries of a TensorDict (not changed: nested levels are copied first), each
// a field; a non-tensor entry holding null counts as not given (upstream's None).
TD_TC_IF_CLASS(C) C from_dict(const TensorDict& dict, const FromDictOptions& options = {}) {
  return internal::tensorclass::FromNamed<C>(C::td_named(dict.copy()), options);
}
// From a c10::Dict<std::string, IValue> of tensors, dicts and JSON-like values (nested dicts
// are nested TensorDicts / classes, or the JSON object of a field declared nlohmann::json), as
// td::from_dict reads it. Throws TypeError when `dict` is
// no dict or holds another kind of value, and as above.
TD_TC_IF_CLASS(C) C from_dict(const c10::IValue& dict, const FromDictOptions& options = {}) {
  FromDictOptions plain;
  plain.batch_size(options.batch_size()).device(options.device());
  return internal::tensorclass::FromNamed<C>(C::td_named(::td::from_dict(dict, plain)), options);
}

// Upstream's instance method from_dict_instance: a new object of `instance`'s class from `dict`.
// The class's field types already say what each entry becomes (upstream reads them from the
// instance's current values), so this is from_dict<C>(dict, options); `instance` is not read.
template <class C, class Dict, std::enable_if_t<internal::tensorclass::kIsTensorClass<C>, int> = 0>
C from_dict_instance(const C& instance, const Dict& dict, const FromDictOptions& options = {}) {
  return from_dict<C>(dict, options);
}
template <class C, std::enable_if_t<internal::tensorclass::kIsTensorClass<C>, int> = 0>
C from_dict_instance(const C& instance, std::initializer_list<NamedField> fields,
                     const FromDictOptions& options = {}) {
  return from_dict<C>(fields, options);
}

#undef TD_TC_IF_CLASS

}  // namespace td
