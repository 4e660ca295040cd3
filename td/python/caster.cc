// Python <-> C++ TensorDict conversion: NOTE [ Python TensorDict conversion ] in caster.h.
#include "td/python/caster.h"

#include <torch/csrc/Device.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "td/core/errors.h"
#include "td/core/internal/non_tensor_stack.h"

namespace td {
namespace python {
namespace {

// The classes to_python builds and the registered tensorclasses. Heap-allocated and never freed:
// its Python references must not be released after the interpreter is gone (at process exit).
// Only touched with the GIL held.
struct Registry {
  py::object td_type;    // set_tensordict_type, or tensordict.TensorDict once imported
  py::object lazy_type;  // set_tensordict_type's lazy_stack_cls, or tensordict.LazyStackedTensorDict
  bool registered = false;
  std::map<std::string, py::object, std::less<>> tensorclasses;
  // NonTensorData, MetaData and NonTensorStack of td_type's package (tensordict, or the module
  // defining the registered class); None where it has no such class.
  py::object data_type, meta_type, stack_type;
};

// `name` of `mod`, or None.
py::object AttrOrNone(const py::module_& mod, const char* name) {
  return py::hasattr(mod, name) ? py::object(mod.attr(name)) : py::none();
}

void SetNonTensorClasses(Registry& r, const py::module_& mod) {
  r.data_type = AttrOrNone(mod, "NonTensorData");
  r.meta_type = AttrOrNone(mod, "MetaData");
  r.stack_type = AttrOrNone(mod, "NonTensorStack");
}

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// NOTE [ Upstream attribute layouts ]
// Every attribute of Python tensordict the caster reads or calls, in one place. Checked against
// v0.4.0 and v0.14.0 (docs/python.md, "Tests, versions checked"); where the two differ:
//  * a tensorclass's non-tensor fields: 0.4 keeps them as plain values in `_non_tensordict`;
//    0.14 keeps a set one as NonTensorData in `_tensordict` and only None (unset) fields in
//    `_non_tensordict`. The caster reads both stores, so either layout crosses. Back to Python,
//    `_from_tensordict(td, non_tensordict)` (same signature in both) is given them in the dict;
//    0.14 accepts that layout too (attribute reads, indexing, clone, stack, to_tensordict);
//  * NonTensorData: 0.4 stores `data` as an attribute, 0.14 in its own `_non_tensordict` behind
//    a `data` property; the caster reads `.data`. 0.14 adds MetaData, a NonTensorData kind
//    (`_is_non_tensor`), which crosses as NonTensorData and comes back as NonTensorData;
//  * dim names: both have `names` (a list, None for an unnamed dim) and a `names=` constructor
//    argument; a lazy stack's `names` raises ValueError (both versions) when its members' names
//    differ, which the caster reads as "unnamed" (C++ lazy_stack drops them too).
// Names shared by both: `batch_size`, `device`, `_tensordict` (a dict; 0.14's _StringOnlyDict
// is dict), `items()`, `tensordicts` / `stack_dim` (LazyStackedTensorDict and NonTensorStack),
// the class flags `_is_non_tensor` / `_is_tensorclass`, `tolist()`, `is_locked`, `lock_()`,
// `set_non_tensor(key, value)`, `_from_tensordict`, and the constructors
// `TensorDict(source, batch_size=, device=, names=)` / `LazyStackedTensorDict(*tds,
// stack_dim=)`.
struct Names {
  py::str batch_size{"batch_size"}, device{"device"}, tensordict{"_tensordict"},
      non_tensordict{"_non_tensordict"}, items{"items"}, tensordicts{"tensordicts"},
      stack_dim{"stack_dim"}, is_non_tensor{"_is_non_tensor"},
      is_tensorclass{"_is_tensorclass"}, data{"data"}, tolist{"tolist"}, is_locked{"is_locked"},
      set_non_tensor{"set_non_tensor"}, lock{"lock_"}, from_tensordict{"_from_tensordict"},
      dim_names{"names"};
};

const Names& names() {
  static const Names* n = new Names();
  return *n;
}

// Where a value sits, for error messages: a chain of keys from the root, rendered on error only.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;
  std::string str() const {
    std::vector<std::string_view> parts;
    for (const Path* p = this; p != nullptr && p->parent != nullptr; p = p->parent) {
      parts.push_back(p->key);
    }
    if (parts.empty()) return "the TensorDict itself";
    std::string out = "key ";
    if (parts.size() > 1) out += "(";
    for (size_t i = parts.size(); i-- > 0;) {
      out += "'" + std::string(parts[i]) + "'";
      if (i > 0) out += ", ";
    }
    if (parts.size() > 1) out += ")";
    return out;
  }
};

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

bool class_flag(py::handle obj, const py::str& name) {
  PyObject* flag = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())), name.ptr());
  if (flag == nullptr) {
    PyErr_Clear();
    return false;
  }
  int truth = PyObject_IsTrue(flag);
  Py_DECREF(flag);
  if (truth < 0) throw py::error_already_set();
  return truth == 1;
}

bool is_lazy_like(py::handle obj) {
  return py::hasattr(obj, names().tensordicts) && py::hasattr(obj, names().stack_dim);
}

// getattr(obj, name), or nullopt when it has none.
std::optional<py::object> attr(py::handle obj, const py::str& name) {
  PyObject* v = PyObject_GetAttr(obj.ptr(), name.ptr());
  if (v == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
    PyErr_Clear();
    return std::nullopt;
  }
  return py::reinterpret_steal<py::object>(v);
}

// Raises Python's OverflowError with `message` (no td:: type maps to it; pybind11 passes a set
// Python error through unchanged).
[[noreturn]] void throw_overflow(const std::string& message) {
  PyErr_SetString(PyExc_OverflowError, message.c_str());
  throw py::error_already_set();
}

// `v` as an int64 (a Python int), else TypeError; OverflowError past 64 bits.
// `what` names the value in the messages ("<path>: batch_size [...]").
int64_t read_int64(py::handle v, const std::string& what) {
  if (!PyLong_Check(v.ptr())) {
    TD_FAIL(TypeError, what, " holds ", py::repr(v).cast<std::string>(), " (a ", type_name(v),
            "); expected an int");
  }
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0) {
    throw_overflow(what + " holds " + py::repr(v).cast<std::string>() +
                   ", which does not fit in a 64-bit int");
  }
  return static_cast<int64_t>(i);
}

// An iterator over `obj`; TypeError naming `what` when it is not iterable.
py::iterator iterate(py::handle obj, const std::string& what) {
  PyObject* it = PyObject_GetIter(obj.ptr());
  if (it == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    TD_FAIL(TypeError, what, " is a ", type_name(obj), ", which is not iterable");
  }
  return py::reinterpret_steal<py::iterator>(it);
}

// ---- JSON <-> Python --------------------------------------------------------------------------

nlohmann::json to_json(py::handle v, const Path& path, int depth) {
  if (depth > kMaxNestingDepth) {
    TD_FAIL(NestingError, path.str(), ": non-tensor data nests deeper than ", kMaxNestingDepth,
            " levels");
  }
  PyObject* o = v.ptr();
  if (o == Py_None) return nullptr;
  if (PyBool_Check(o)) return o == Py_True;
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
      return static_cast<int64_t>(i);
    }
    if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (!PyErr_Occurred()) return static_cast<uint64_t>(u);
      PyErr_Clear();
    }
    TD_FAIL(TypeError, path.str(), ": the int ", py::str(v).cast<std::string>(),
            " does not fit in 64 bits, so it cannot be carried as non-tensor data");
  }
  if (PyFloat_Check(o)) return PyFloat_AS_DOUBLE(o);
  if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &size);
    if (s == nullptr) throw py::error_already_set();
    return std::string(s, static_cast<size_t>(size));
  }
  if (PyList_Check(o) || PyTuple_Check(o)) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle item : v) out.push_back(to_json(item, path, depth + 1));
    return out;
  }
  if (PyDict_Check(o)) {
    nlohmann::json out = nlohmann::json::object();
    PyObject *k = nullptr, *item = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &item)) {
      if (!PyUnicode_Check(k)) {
        TD_FAIL(TypeError, path.str(), ": non-tensor data holds a dict with the ", type_name(k),
                " key ", py::repr(k).cast<std::string>(), "; only str keys can be carried");
      }
      out[py::reinterpret_borrow<py::str>(k).cast<std::string>()] = to_json(item, path, depth + 1);
    }
    return out;
  }
  if (class_flag(v, names().is_non_tensor)) return to_json(v.attr(names().data), path, depth + 1);
  TD_FAIL(TypeError, path.str(), ": a value of Python type '", type_name(v),
          "' cannot be carried to C++ as non-tensor data (expected JSON data: None, bool, int, "
          "float, str, and lists or str-keyed dicts of these)");
}

// Recursive, so bounded as to_json is: a JSON value nested deeper than kMaxNestingDepth (C++ can
// hold one; Python's recursion would refuse it too) is a NestingError naming the key.
py::object from_json(const nlohmann::json& j, const Path& path, int depth) {
  if (depth > kMaxNestingDepth) {
    TD_FAIL(NestingError, path.str(), ": non-tensor data nests deeper than ", kMaxNestingDepth,
            " levels, so it cannot be carried to Python");
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out(j.size());
      for (size_t i = 0; i < j.size(); ++i) out[i] = from_json(j[i], path, depth + 1);
      return py::reinterpret_steal<py::object>(out.release());
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = from_json(v, path, depth + 1);
      return py::reinterpret_steal<py::object>(out.release());
    }
    default:
      TD_FAIL(TypeError, path.str(), ": non-tensor data of JSON type '", j.type_name(),
              "' has no Python counterpart");
  }
}

// ---- Python -> C++ ----------------------------------------------------------------------------

TensorDict convert(py::handle obj, const Path& path, int depth);

// Sets the entry `key` of `out` from the Python value `v` (a child of `path`).
void put(TensorDict& out, py::handle key, py::handle v, const Path& path, int depth,
         bool plain_data_ok) {
  if (!PyUnicode_Check(key.ptr())) {
    TD_FAIL(TypeError, path.str(), " holds the ", type_name(key), " key ",
            py::repr(key).cast<std::string>(), "; TensorDict keys are str");
  }
  Py_ssize_t size = 0;
  const char* s = PyUnicode_AsUTF8AndSize(key.ptr(), &size);
  if (s == nullptr) throw py::error_already_set();
  std::string k(s, static_cast<size_t>(size));
  Path here{&path, k};
  PyObject* o = v.ptr();
  if (THPVariable_Check(o)) {
    out.set(NestedKey(std::move(k)), THPVariable_Unpack(o));
  } else if (class_flag(v, names().is_non_tensor)) {
    // NonTensorData / MetaData carry `.data`; NonTensorStack (lazy) lists its members' data,
    // nested as its batch size, and becomes a NonTensorStack over this level's batch dims
    // (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h).
    if (is_lazy_like(v)) {
      absl::StatusOr<NonTensorData> stack = internal::StackFromFile(
          to_json(v.attr(names().tolist)(), here, depth + 1), out.batch_size());
      if (!stack.ok()) TD_FAIL(ValueError, here.str(), ": ", stack.status().message());
      out.set(NestedKey(std::move(k)), *std::move(stack));
    } else {
      nlohmann::json data = to_json(v.attr(names().data), here, depth + 1);
      const bool meta = type_name(v).rfind("MetaData", 0) == 0;
      out.set(NestedKey(std::move(k)), meta ? NonTensorData::meta(std::move(data))
                                            : NonTensorData(std::move(data)));
    }
  } else if (is_tensordict_like(v)) {
    out.set(NestedKey(std::move(k)), convert(v, here, depth + 1));
  } else if (plain_data_ok || o == Py_None || PyBool_Check(o) || PyLong_Check(o) ||
             PyFloat_Check(o) || PyUnicode_Check(o) || PyList_Check(o) || PyTuple_Check(o)) {
    out.set(NestedKey(std::move(k)), NonTensorData(to_json(v, here, depth + 1)));
  } else {
    TD_FAIL(TypeError, here.str(), ": a value of Python type '", type_name(v),
            "' cannot be carried to C++ (expected a torch.Tensor, a TensorDict, a tensorclass, "
            "NonTensorData or JSON data)");
  }
}

std::vector<int64_t> read_batch_size(py::handle obj, const Path& path) {
  py::object bs = obj.attr(names().batch_size);
  const std::string what = path.str() + ": batch_size " + py::repr(bs).cast<std::string>();
  std::vector<int64_t> out;
  int64_t numel = 1;
  for (py::handle d : iterate(bs, what)) {
    const int64_t n = read_int64(d, what);
    if (n < 0) TD_FAIL(ValueError, what, " has the negative size ", n);
    if (n > 0 && __builtin_mul_overflow(numel, n, &numel)) {
      TD_FAIL(BatchSizeError, what, ": the product of its sizes does not fit in int64");
    }
    out.push_back(n);
  }
  return out;
}

std::optional<at::Device> read_device(py::handle obj, const Path& path) {
  std::optional<py::object> dev = attr(obj, names().device);
  if (!dev || dev->is_none()) return std::nullopt;
  if (THPDevice_Check(dev->ptr())) return reinterpret_cast<THPDevice*>(dev->ptr())->device;
  if (PyUnicode_Check(dev->ptr())) {
    try {
      return at::Device(dev->cast<std::string>());
    } catch (c10::Error& e) {
      e.add_context("while reading the device of " + path.str());
      throw;
    }
  }
  TD_FAIL(TypeError, path.str(), ": device ", py::repr(*dev).cast<std::string>(),
          " is neither None, a torch.device nor a str");
}

// `obj.names` as DimNames, or nullopt when it has none or names no dim (NOTE [ Upstream
// attribute layouts ]). `lenient`: a ValueError raised by the property (a lazy stack whose
// members' names differ) reads as unnamed.
std::optional<DimNames> read_dim_names(py::handle obj, const Path& path, bool lenient) {
  PyObject* v = PyObject_GetAttr(obj.ptr(), names().dim_names.ptr());
  if (v == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) &&
        !(lenient && PyErr_ExceptionMatches(PyExc_ValueError))) {
      throw py::error_already_set();
    }
    PyErr_Clear();
    return std::nullopt;
  }
  py::object dn = py::reinterpret_steal<py::object>(v);
  if (dn.is_none()) return std::nullopt;
  const std::string what = path.str() + ": names " + py::repr(dn).cast<std::string>();
  DimNames out;
  bool any = false;
  for (py::handle n : iterate(dn, what)) {
    if (n.is_none()) {
      out.emplace_back();
    } else if (PyUnicode_Check(n.ptr())) {
      out.emplace_back(n.cast<std::string>());
      any = true;
    } else {
      TD_FAIL(TypeError, what, " holds ", py::repr(n).cast<std::string>(), " (a ", type_name(n),
              "); a dim name is a str or None");
    }
  }
  if (!any) return std::nullopt;
  return out;
}

// td.set_names(dim_names), naming `path` in the error (a wrong count, a repeated name).
void set_dim_names(TensorDict& td, const DimNames& dim_names, const Path& path) {
  try {
    td.set_names(dim_names);
  } catch (c10::Error& e) {
    e.add_context("while naming the batch dims of " + path.str());
    throw;
  }
}

void lock_if_locked(TensorDict& out, py::handle obj) {
  std::optional<py::object> locked = attr(obj, names().is_locked);
  if (locked && py::bool_(*locked)) out.lock_();
}

TensorDict convert(py::handle obj, const Path& path, int depth) {
  if (depth > kMaxNestingDepth) {
    TD_FAIL(NestingError, path.str(), ": TensorDicts nest deeper than ", kMaxNestingDepth,
            " levels (or a TensorDict contains itself)");
  }
  if (class_flag(obj, names().is_tensorclass)) {
    // A tensorclass: its TensorDict, plus the non-tensor fields it keeps apart. Unset fields
    // (None) are left out.
    TensorDict out = convert(obj.attr(names().tensordict), path, depth);
    std::optional<py::object> rest = attr(obj, names().non_tensordict);
    if (rest && PyDict_Check(rest->ptr())) {
      PyObject *k = nullptr, *v = nullptr;
      Py_ssize_t pos = 0;
      while (PyDict_Next(rest->ptr(), &pos, &k, &v)) {
        if (v != Py_None) put(out, k, v, path, depth, /*plain_data_ok=*/true);
      }
    }
    return out;
  }
  if (is_lazy_like(obj)) {
    py::object members = obj.attr(names().tensordicts);
    const int64_t stack_dim =
        read_int64(obj.attr(names().stack_dim), path.str() + ": the lazy stack's stack_dim");
    std::vector<TensorDict> tds;
    std::vector<std::string> index_keys;
    std::vector<py::object> member_list;
    for (py::handle m : iterate(members, path.str() + ": the lazy stack's tensordicts")) {
      member_list.push_back(py::reinterpret_borrow<py::object>(m));
    }
    index_keys.reserve(member_list.size());  // Paths point into it: no reallocation below
    for (py::handle m : member_list) {
      index_keys.push_back("<member " + std::to_string(tds.size()) + ">");
      Path member{&path, index_keys.back()};
      if (!is_tensordict_like(m)) {
        TD_FAIL(TypeError, member.str(), " of a lazy stack is a ", type_name(m),
                ", not a TensorDict");
      }
      tds.push_back(convert(m, member, depth + 1));
    }
    TensorDict out;
    try {
      out = lazy_stack(tds, stack_dim);
    } catch (c10::Error& e) {
      e.add_context("while stacking the members of " + path.str() + " (stack_dim " +
                    std::to_string(stack_dim) + ")");
      throw;
    }
    // The members' names are the stack's already; the stack dim's own name is only upstream's.
    if (std::optional<DimNames> dn = read_dim_names(obj, path, /*lenient=*/true)) {
      if (*dn != out.names()) set_dim_names(out, *dn, path);
    }
    lock_if_locked(out, obj);
    return out;
  }
  TensorDict out({}, read_batch_size(obj, path), read_device(obj, path));
  if (std::optional<DimNames> dn = read_dim_names(obj, path, /*lenient=*/false)) {
    set_dim_names(out, *dn, path);
  }
  std::optional<py::object> store = attr(obj, names().tensordict);
  if (store && PyDict_Check(store->ptr())) {
    PyObject *k = nullptr, *v = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(store->ptr(), &pos, &k, &v)) put(out, k, v, path, depth, false);
  } else {
    const std::string what = path.str() + ": items()";
    size_t index = 0;
    for (py::handle item : iterate(obj.attr(names().items)(), what)) {
      // As dict(items()) reads them: each element a (key, value) pair.
      if (!PyTuple_Check(item.ptr()) && !PyList_Check(item.ptr())) {
        TD_FAIL(TypeError, what, " element #", index, " is a ", type_name(item),
                ", not a (key, value) pair");
      }
      py::sequence kv = py::reinterpret_borrow<py::sequence>(item);
      if (kv.size() != 2) {
        TD_FAIL(ValueError, what, " element #", index, " has length ", kv.size(),
                "; a (key, value) pair has 2");
      }
      put(out, kv[0], kv[1], path, depth, false);
      ++index;
    }
  }
  lock_if_locked(out, obj);
  return out;
}

// ---- C++ -> Python ----------------------------------------------------------------------------

// The classes to build: the registered ones, else Python tensordict's.
const Registry& classes() {
  Registry& r = registry();
  if (r.registered || r.td_type) return r;
  py::module_ mod;
  try {
    mod = py::module_::import("tensordict");
  } catch (py::error_already_set& e) {
    throw py::import_error(
        std::string("td::python: cannot build a Python TensorDict: Python tensordict is not "
                    "importable (") +
        e.what() + ") and no class was registered with set_tensordict_type");
  }
  r.td_type = mod.attr("TensorDict");
  r.lazy_type = mod.attr("LazyStackedTensorDict");
  SetNonTensorClasses(r, mod);
  return r;
}

py::object wrap(const at::Tensor& t) {
  PyObject* o = THPVariable_Wrap(t);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

py::object device_object(const std::optional<at::Device>& device) {
  if (!device) return py::none();
  PyObject* o = THPDevice_New(*device);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

py::list batch_size_list(const TensorDict& td) {
  py::list out;
  for (int64_t d : td.batch_size()) out.append(d);
  return out;
}

// `names` as a Python list (None for an unnamed dim).
py::list dim_names_list(const DimNames& dim_names) {
  py::list out;
  for (const std::optional<std::string>& n : dim_names) {
    if (n) {
      out.append(py::str(*n));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

// cls(source, batch_size=[...], device=..., names=[...]); names= only when a dim is named, so
// that a registered class without the argument still works for unnamed TensorDicts.
py::object make_dense(const py::object& cls, const py::dict& source, const TensorDict& td) {
  py::dict kwargs;
  kwargs["batch_size"] = batch_size_list(td);
  kwargs["device"] = device_object(td.device());
  if (td.has_names()) kwargs["names"] = dim_names_list(td.names());
  return cls(source, **kwargs);
}

// A dense level's entries: tensors and nested levels into `source`, non-tensor data apart.
void split_entries(const TensorDict& td, const Path& path, py::dict& source,
                   std::vector<std::pair<std::string, NonTensorData>>* non_tensor);

// A Python NonTensorStack of `values` nested as `batch` (stack_dim 0 at every level, members
// NonTensorData of batch size [] for the last dim), as upstream's NonTensorStack.from_list lays
// out a list; values that are lists themselves stay values.
py::object build_stack(const Registry& r, const nlohmann::json& values, at::IntArrayRef batch,
                       const Path& path) {
  py::tuple members(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string element = "<element " + std::to_string(i) + ">";
    const Path here{&path, element};
    if (batch.size() == 1) {
      py::dict kwargs;
      kwargs["data"] = from_json(values[i], here, 0);
      kwargs["batch_size"] = py::list();
      members[i] = r.data_type(**kwargs);
    } else {
      members[i] = build_stack(r, values[i], batch.slice(1), here);
    }
  }
  py::dict kwargs;
  kwargs["stack_dim"] = 0;
  return r.stack_type(*members, **kwargs);
}

// Sets a non-tensor entry of `out` (a Python TensorDict of batch size `batch`) in its kind:
// NonTensorData through set_non_tensor, MetaData and NonTensorStack as objects of the package's
// classes (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h).
void set_non_tensor_entry(const Registry& r, py::object& out, const std::string& k,
                          const NonTensorData& d, at::IntArrayRef batch, const Path& path) {
  const Path here{&path, k};
  if (d.kind == NonTensorData::Kind::kData) {
    out.attr(names().set_non_tensor)(py::str(k), from_json(d.data, here, 0));
    return;
  }
  const py::object& cls = d.is_stack() ? r.stack_type : r.meta_type;
  if (!cls || cls.is_none() || (d.is_stack() && (!r.data_type || r.data_type.is_none()))) {
    TD_FAIL(TypeError, here.str(), ": cannot build a Python ",
            d.is_stack() ? "NonTensorStack" : "MetaData",
            ": the module of the TensorDict class has no such class");
  }
  py::object value;
  if (d.is_stack()) {
    value = build_stack(r, d.data, batch, here);
  } else {
    py::dict kwargs;
    kwargs["data"] = from_json(d.data, here, 0);
    kwargs["batch_size"] = py::cast(batch.vec());
    value = cls(**kwargs);
  }
  out.attr("__setitem__")(py::str(k), value);
}

py::object build(const TensorDict& td, const Path& path) {
  const Registry& r = classes();
  py::object out;
  if (const std::optional<LazyStackedTensorDict> stack = LazyStackedTensorDict::from(td)) {
    if (!r.lazy_type) {
      throw py::type_error(
          "td::python: cannot build a Python lazy stack: set_tensordict_type was given no "
          "lazy_stack_cls");
    }
    const std::vector<TensorDict>& members = stack->tensordicts();
    py::tuple args(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string key = "<member " + std::to_string(i) + ">";
      args[i] = build(members[i], Path{&path, key});
    }
    py::dict kwargs;
    kwargs["stack_dim"] = stack->stack_dim();
    out = r.lazy_type(*args, **kwargs);
    // The members carry their names; the stack dim's own name is set on the stack.
    if (td.has_names() && td.names()[static_cast<size_t>(stack->stack_dim())]) {
      py::setattr(out, names().dim_names, dim_names_list(td.names()));
    }
  } else {
    py::dict source;
    std::vector<std::pair<std::string, NonTensorData>> non_tensor;
    split_entries(td, path, source, &non_tensor);
    out = make_dense(r.td_type, source, td);
    for (const auto& [k, d] : non_tensor) {
      set_non_tensor_entry(r, out, k, d, td.batch_size(), path);
    }
  }
  if (td.is_locked()) out.attr(names().lock)();
  return out;
}

void split_entries(const TensorDict& td, const Path& path, py::dict& source,
                   std::vector<std::pair<std::string, NonTensorData>>* non_tensor) {
  td.for_each_entry([&](const std::string& k, const Value& v) {
    if (v.is_tensor()) {
      source[py::str(k)] = wrap(v.tensor());
    } else if (v.is_tensordict()) {
      source[py::str(k)] = build(v.tensordict(), Path{&path, k});
    } else {
      non_tensor->emplace_back(k, v.non_tensor_data());
    }
  });
}

}  // namespace

bool is_tensordict_like(py::handle obj) {
  if (!obj || THPVariable_Check(obj.ptr())) return false;
  const Names& n = names();
  if (!py::hasattr(obj, n.batch_size)) return false;
  return py::hasattr(obj, n.tensordict) || is_lazy_like(obj) || py::hasattr(obj, n.items);
}

TensorDict from_python(py::handle obj) {
  Path root;
  return convert(obj, root, 0);
}

py::object to_python(const TensorDict& td) {
  Path root;
  return build(td, root);
}

py::object to_python_tensorclass(const TensorDict& td, std::string_view class_name) {
  const Registry& r = registry();
  auto it = r.tensorclasses.find(class_name);
  Path root;
  if (it == r.tensorclasses.end()) return build(td, root);
  // Python tensorclass keeps tensors and nested TensorDicts in a TensorDict and the other fields
  // in a dict: build those two and hand them to its _from_tensordict.
  const Registry& c = classes();
  py::dict source;
  std::vector<std::pair<std::string, NonTensorData>> non_tensor;
  split_entries(td, root, source, &non_tensor);
  py::object inner = make_dense(c.td_type, source, td);
  py::dict rest;
  for (const auto& [k, d] : non_tensor) rest[py::str(k)] = from_json(d.data, Path{&root, k}, 0);
  return it->second.attr(names().from_tensordict)(inner, rest);
}

void bind(py::module_& m) {
  // THPVariable_Check / THPVariable_Wrap need torch's Python classes.
  py::module_::import("torch");
  m.def(
      "set_tensordict_type",
      [](py::object cls, py::object lazy_cls) {
        Registry& r = registry();
        if (cls.is_none()) {
          Registry fresh;
          fresh.tensorclasses = std::move(r.tensorclasses);
          r = std::move(fresh);
          return;
        }
        r.td_type = std::move(cls);
        r.lazy_type = lazy_cls.is_none() ? py::object() : std::move(lazy_cls);
        r.registered = true;
        SetNonTensorClasses(
            r, py::module_::import("sys").attr("modules")[r.td_type.attr("__module__")]);
      },
      py::arg("cls"), py::arg("lazy_stack_cls") = py::none(),
      "The classes C++ TensorDicts are returned as: cls(source_dict, batch_size=[...], "
      "device=...) with set_non_tensor(key, value) and lock_(), and lazy_stack_cls(*members, "
      "stack_dim=d). None restores Python tensordict's TensorDict / LazyStackedTensorDict.");
  m.def(
      "set_tensorclass_type",
      [](const std::string& name, py::object cls) {
        Registry& r = registry();
        if (cls.is_none()) {
          r.tensorclasses.erase(name);
        } else {
          r.tensorclasses[name] = std::move(cls);
        }
      },
      py::arg("name"), py::arg("cls"),
      "The Python tensorclass C++ TensorClass `name` is returned as "
      "(cls._from_tensordict(td, non_tensordict)); None removes it.");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const td::KeyError& e) {
      PyErr_SetString(PyExc_KeyError, e.what_without_backtrace());
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

}  // namespace python
}  // namespace td
