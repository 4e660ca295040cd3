#include "td/io/dict.h"

#include <ATen/ops/scalar_tensor.h>

#include <string>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/errors.h"
#include "td/core/stack.h"
#include "td/stacking/stacking.h"

namespace td {

void internal::CheckBatchOptions(const char* fn,
                                 const std::optional<std::vector<int64_t>>& batch_size,
                                 bool auto_batch_size, std::optional<int64_t> batch_dims) {
  if (batch_size && (auto_batch_size || batch_dims)) {
    TD_FAIL(ValueError, fn, ": batch_size ", c10::IntArrayRef(*batch_size),
            " cannot be combined with ", batch_dims ? "batch_dims" : "auto_batch_size");
  }
  if (batch_dims && *batch_dims < 0) {
    TD_FAIL(ValueError, fn, ": batch_dims must be >= 0, got ", *batch_dims);
  }
}

namespace {

// The batch size to build with, and whether to infer one afterwards.
std::pair<std::vector<int64_t>, bool> Plan(const FromDictOptions& o, const char* fn) {
  internal::CheckBatchOptions(fn, o.batch_size(), o.auto_batch_size(), o.batch_dims());
  return {o.batch_size().value_or(std::vector<int64_t>{}), o.auto_batch_size() || o.batch_dims()};
}

TensorDict Finish(TensorDict out, bool infer, const FromDictOptions& o) {
  if (infer) out.auto_batch_size_(o.batch_dims());
  return out;
}

c10::IValue ToDict(const TensorDict& td, const ToDictOptions& options) {
  const c10::impl::GenericDict with_meta = td.to_ivalue().toGenericDict();
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  td.for_each_entry([&](const std::string& key, const Value& value) {
    if (value.is_tensordict()) {
      out.insert(key, ToDict(value.tensordict(), options));
    } else if (value.is_tensor()) {
      out.insert(key, value.tensor());
    } else if (options.retain_none() || !value.non_tensor().is_null()) {
      out.insert(key, with_meta.at(key));
    }
  });
  return c10::IValue(out);
}

// The options each element's from_dict gets (upstream: batch_size[1:], batch_dims - 1).
FromDictOptions ElementOptions(const FromListOptions& o, size_t n) {
  if (o.batch_size() && (o.auto_batch_size() || o.batch_dims())) {
    TD_FAIL(ValueError, "from_list: batch_size ", c10::IntArrayRef(*o.batch_size()),
            " cannot be combined with ", o.batch_dims() ? "batch_dims" : "auto_batch_size");
  }
  if (n == 0) TD_FAIL(ValueError, "from_list needs at least one element, got an empty list");
  FromDictOptions e;
  e.device(o.device());
  if (o.batch_size()) {
    const std::vector<int64_t>& b = *o.batch_size();
    if (b.empty() || b[0] != static_cast<int64_t>(n)) {
      TD_FAIL(ValueError, "from_list: the batch size ", c10::IntArrayRef(b),
              " does not start with the length of the list (", n, ")");
    }
    e.batch_size(std::vector<int64_t>(b.begin() + 1, b.end()));
  }
  if (o.batch_dims()) {
    if (*o.batch_dims() < 1) {
      TD_FAIL(ValueError, "from_list: batch_dims must be >= 1 (the stacked dim), got ",
              *o.batch_dims());
    }
    e.batch_dims(*o.batch_dims() - 1);
  }
  e.auto_batch_size(o.auto_batch_size() || o.batch_dims().has_value());
  return e;
}

TensorDict StackList(const std::vector<TensorDict>& tds, const FromListOptions& o) {
  if (!o.lazy()) return maybe_dense_stack(tds, 0);
  if (*o.lazy()) return lazy_stack(tds, 0);
  return stack(tds, 0);
}

}  // namespace

TensorDict from_list(const std::vector<Value>& input, const FromListOptions& options) {
  const FromDictOptions e = ElementOptions(options, input.size());
  std::vector<TensorDict> tds;
  tds.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const Value& v = input[i];
    if (v.is_tensordict()) {
      tds.push_back(v.tensordict());  // as it is, as upstream
    } else if (v.is_plain_dict()) {
      tds.push_back(from_dict(v.plain_dict(), e));
    } else {
      TD_FAIL(TypeError, "from_list: element ", i, " is ", v.kind(),
              "; expected a TensorDict or a dict");
    }
  }
  return StackList(tds, options);
}

TensorDict from_list(const c10::IValue& list, const FromListOptions& options) {
  if (!list.isList()) TD_FAIL(TypeError, "from_list needs a list, got ", list.tagKind());
  const c10::List<c10::IValue> items = list.toList();
  const FromDictOptions e = ElementOptions(options, items.size());
  std::vector<TensorDict> tds;
  tds.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const c10::IValue item = items.get(i);
    if (!item.isGenericDict()) {
      TD_FAIL(TypeError, "from_list: element ", i, " is ", item.tagKind(), "; expected a dict");
    }
    tds.push_back(from_dict(item, e));
  }
  return StackList(tds, options);
}

TensorDict from_dict(std::initializer_list<TensorDict::Item> items, const FromDictOptions& options) {
  return from_dict(std::vector<TensorDict::Item>(items), options);
}

TensorDict from_dict(const std::vector<TensorDict::Item>& items, const FromDictOptions& options) {
  auto [batch, infer] = Plan(options, "from_dict");
  return Finish(TensorDict(items, batch, options.device()), infer, options);
}

TensorDict from_dict(const c10::IValue& dict, const FromDictOptions& options) {
  auto [batch, infer] = Plan(options, "from_dict");
  if (!dict.isGenericDict()) TD_FAIL(TypeError, "from_dict needs a dict, got ", dict.tagKind());
  TensorDict out = TensorDict::from_ivalue(dict, batch, options.device());
  // from_ivalue gives every level the batch size it is passed; an empty one keeps [] (or what a
  // to_ivalue() dict recorded).
  return Finish(std::move(out), infer, options);
}

TensorDict make_tensordict(std::initializer_list<TensorDict::Item> items,
                           const FromDictOptions& options) {
  return from_dict(items, options);
}

c10::IValue to_dict(const TensorDict& td, const ToDictOptions& options) { return ToDict(td, options); }

TensorDict fromkeys(const std::vector<NestedKey>& keys, const Value& value) {
  const Value v = value.is_tensor() && !value.tensor().defined()
                      ? Value(at::scalar_tensor(0, at::TensorOptions().dtype(at::kLong)))
                      : value;
  TensorDict out({}, {});
  for (const NestedKey& k : keys) out.set(k, v);
  return out;
}

}  // namespace td
