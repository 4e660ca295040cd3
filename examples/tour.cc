// A tour of tensordict for C++: the Python package's tutorial and README walk-through, step by
// step, printing what each step gives. `bazel run //examples:tour`.
#include <ATen/ATen.h>

#include <iostream>

#include "td/core/tensordict.h"

namespace {

void Step(const char* title) { std::cout << "\n### " << title << "\n"; }

}  // namespace

int main() {
  using td::TensorDict;

  Step("A TensorDict is a dict of tensors sharing leading batch dims");
  TensorDict tensordict({{"a", at::zeros({3, 4, 5})}, {"b", at::zeros({3, 4, 1})}}, {3, 4});
  std::cout << tensordict << "\n";

  Step("get() by key");
  std::cout << "a has shape " << tensordict.get("a").sizes() << "\n";

  Step("keys() and values()");
  for (const td::NestedKey& key : tensordict.keys()) std::cout << key.front() << "\n";
  for (const td::Value& value : tensordict.values()) std::cout << value.tensor().sizes() << "\n";

  Step("set() a new key");
  tensordict.set("c", at::zeros({3, 4, 2, 2}));
  std::cout << "c has shape " << tensordict.get("c").sizes() << "\n";

  Step("update() from a dict");
  tensordict.update({{"a", at::ones({3, 4, 5})}, {"d", at::ones({3, 4, 2})}});
  std::cout << "a sums to " << tensordict.get("a").sum().item<float>() << ", d has shape "
            << tensordict.get("d").sizes() << "\n";

  Step("del_() a key");
  tensordict.del_("c");
  std::cout << td::KeysRepr(tensordict.keys()) << "\n";

  Step("Every entry must share the batch size");
  try {
    tensordict.update({{"c", at::zeros({4, 3, 1})}});
  } catch (const td::BatchSizeError& e) {
    std::cout << "BatchSizeError: " << e.what_without_backtrace() << "\n";
  }

  Step("clone() is independent");
  TensorDict tensordict_clone = tensordict.clone();
  tensordict_clone.set("a", at::full({3, 4, 5}, 2.0));
  std::cout << "original a sums to " << tensordict.get("a").sum().item<float>()
            << ", clone's a to " << tensordict_clone.get("a").sum().item<float>() << "\n";

  Step("Nested keys");
  TensorDict data({{"key 1", at::ones({3, 4, 5})},
                   {"key 2", at::zeros({3, 4, 5}, at::kBool)}},
                  {3, 4});
  data.set({"nested", "key"}, at::zeros({3, 4}));
  data.set({"nested", {"supernested", {"key"}}}, at::zeros({3, 4}));
  std::cout << "all zero: " << std::boolalpha
            << (data.get({"nested", "supernested", "key"}) == 0).all().item<bool>() << "\n";
  std::cout << data << "\n";

  Step("Non-tensor data");
  TensorDict with_string({{"a-tensor", at::randn({1, 2})}}, {1, 2});
  with_string.set("non-tensor", "a string!");
  std::cout << "non-tensor = " << with_string.get_non_tensor("non-tensor") << "\n";

  Step("Flatten and unflatten keys");
  TensorDict hierarchical(
      {{"key 1", at::ones({3, 4, 5})},
       {"key 2", TensorDict({{"sub-key", at::randn({3, 4, 5, 6})}}, {3, 4, 5})}},
      {3, 4});
  TensorDict flat = hierarchical.flatten_keys(".");
  std::cout << td::KeysRepr(flat.keys()) << "\n";
  std::cout << td::KeysRepr(flat.unflatten_keys(".").keys(td::KeysOptions().include_nested(true)))
            << "\n";

  Step("apply() runs a function over every leaf; returning no tensor drops the entry");
  TensorDict mixed({{"a", at::tensor(1.0)}, {"b", at::tensor(1)}}, {});
  TensorDict only_floats =
      mixed.apply([](const at::Tensor& x) { return x.is_floating_point() ? x : at::Tensor(); });
  std::cout << td::KeysRepr(only_floats.keys()) << "\n";

  Step("Lock the structure");
  data.lock_();
  try {
    data.set("new key", at::zeros({3, 4}));
  } catch (const td::LockedError& e) {
    std::cout << "LockedError: " << e.what_without_backtrace() << "\n";
  }
  data.unlock_();

  Step("state_dict() with dotted keys");
  for (const auto& item : hierarchical.state_dict()) {
    std::cout << item.key() << ": " << item.value().sizes() << "\n";
  }
  return 0;
}
