// The extension module td/python/testing/caster_test.py drives: functions over td::TensorDict
// and a td::TensorClass, bound with pybind11 through //td/python's caster.
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <pybind11/stl.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/python/caster.h"

namespace {

namespace py = pybind11;

class Step : public td::TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (std::string, tag))
};

td::NestedKey key_of(const std::vector<std::string>& parts) { return td::NestedKey(parts); }

// The sub-TensorDict at `parts` ([] for td itself).
td::TensorDict level(const td::TensorDict& td, const std::vector<std::string>& parts) {
  return parts.empty() ? td : td.get_tensordict(key_of(parts));
}

// A TensorDict made in C++: batch [2, 3] on the CPU, nested, non-tensor data, a lazy stack of
// two members with a ragged leaf.
td::TensorDict make() {
  td::TensorDict a({{"obs", at::zeros({3, 4})}}, {3}, at::Device("cpu"));
  td::TensorDict b({{"obs", at::ones({3, 5})}}, {3}, at::Device("cpu"));
  td::TensorDict out({{"x", at::ones({2, 3})},
                      {"nested", {{"y", at::zeros({2, 3, 7})}, {"label", "cpp"}}},
                      {"numbers", td::NonTensorData(nlohmann::json::parse(
                                      R"({"n": 3, "l": [1, 2.5, "s", null, true]})"))}},
                     {2, 3}, at::Device("cpu"));
  out.set("stack", td::lazy_stack({a, b}, 0));
  return out;
}

}  // namespace

PYBIND11_MODULE(td_python_test_ext, m) {
  td::python::bind(m);
  m.def("identity", [](td::TensorDict td) { return td; });
  m.def("identity_lazy", [](td::LazyStackedTensorDict td) { return td; });
  m.def("backend", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return std::string(level(td, key).backend());
  });
  m.def("batch_size", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    auto bs = level(td, key).batch_size();
    return std::vector<int64_t>(bs.begin(), bs.end());
  });
  m.def("names", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return level(td, key).names();
  });
  m.def("device", [](const td::TensorDict& td) -> std::optional<std::string> {
    if (!td.device()) return std::nullopt;
    return td.device()->str();
  });
  m.def("is_locked", [](const td::TensorDict& td) { return td.is_locked(); });
  m.def("keys", [](const td::TensorDict& td) {
    std::vector<std::string> out;
    for (const td::NestedKey& k :
         td.keys(td::KeysOptions().include_nested(true).leaves_only(true))) {
      std::string s;
      for (const std::string& p : k) s += (s.empty() ? "" : ".") + p;
      out.push_back(s);
    }
    return out;
  });
  m.def("data_ptr", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return reinterpret_cast<intptr_t>(td.get(key_of(key)).data_ptr());
  });
  m.def("non_tensor", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return td.get_non_tensor(key_of(key)).dump();
  });
  m.def("non_tensor_kind", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return std::string(td.get_value(key_of(key)).kind());
  });
  m.def("index", [](const td::TensorDict& td, int64_t i) { return td.index({i}); });
  // A NonTensorStack made in C++ (and a MetaData with `meta`).
  m.def("make_with_stack", [](bool meta) {
    td::TensorDict t({{"obs", at::zeros({3, 2})}}, {3});
    t.set("task", td::NonTensorData::stack({"walk", "run", nlohmann::json{{"k", 1}}}));
    if (meta) t.set("robot", td::NonTensorData::meta("franka"));
    return t;
  });
  m.def("stack_info", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    td::LazyStackedTensorDict s(level(td, key));
    return std::make_pair(static_cast<int64_t>(s.tensordicts().size()), s.stack_dim());
  });
  m.def("member_data_ptr", [](const td::TensorDict& td, const std::vector<std::string>& key,
                              int64_t member, const std::string& leaf) {
    td::LazyStackedTensorDict s(level(td, key));
    return reinterpret_cast<intptr_t>(
        s.tensordicts().at(static_cast<size_t>(member)).get(leaf).data_ptr());
  });
  m.def("get", [](const td::TensorDict& td, const std::vector<std::string>& key) {
    return td.get(key_of(key));
  });
  m.def("set", [](td::TensorDict td, const std::vector<std::string>& key, const at::Tensor& t) {
    td.set(key_of(key), t);
    return td;
  });
  m.def("scale", [](const td::TensorDict& td, double factor) {
    return td.apply([factor](const at::Tensor& x) { return x.mul(factor); });
  });
  // In place on the caller's tensors (they are shared, not copied).
  m.def("add_one_", [](td::TensorDict td) { td.add_(1); });
  m.def("make", &make);
  // make() with the batch dims named ["env", "time"] (the nested levels too: the lazy stack's
  // stack dim is "env", its members' dim "time").
  m.def("make_named", [] { return make().set_names({"env", "time"}); });
  // A TensorDict whose non-tensor entry ("n", "deep") is a JSON array nested `depth` deep (built
  // by moves: nlohmann's copy recurses once per level).
  m.def("deep_json", [](int64_t depth) {
    nlohmann::json j = nullptr;
    for (int64_t i = 0; i < depth; ++i) {
      nlohmann::json a = nlohmann::json::array();
      a.push_back(std::move(j));
      j = std::move(a);
    }
    td::TensorDict out({}, {});
    out.set({"n", "deep"}, td::NonTensorData(std::move(j)));
    return out;
  });
  m.def("shift_step", [](const Step& s) {
    return Step(s.obs().add(1), s.tag() + "+1", s.batch_size());
  });
  m.def("torch_version", [] {
    return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  });
}
