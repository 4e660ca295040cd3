// Python <-> C++ TensorDicts for torch extensions built with pybind11: with this header included,
// a bound function taking or returning td::TensorDict (or a registered td::TensorClass) takes and
// returns Python tensordict objects.
//
//   #include "td/python/caster.h"
//
//   td::TensorDict double_it(td::TensorDict td) {
//     return td.apply([](const at::Tensor& x) { return x * 2; });
//   }
//   PYBIND11_MODULE(my_ext, m) {
//     td::python::bind(m);           // typed exceptions, set_tensordict_type, set_tensorclass_type
//     m.def("double_it", &double_it);
//   }
//
//   >>> import torch, my_ext
//   >>> out = my_ext.double_it(tensordict.TensorDict({"a": torch.ones(3)}, batch_size=[3]))
//
// NOTE [ Python TensorDict conversion ]
// Python -> C++ (`from_python`): any object with `batch_size` and either a `_tensordict` dict
// (Python tensordict's storage), or `items()`, becomes a TensorDict on the dense backend with
// the same batch size and device; an object with `tensordicts` and `stack_dim` (a
// LazyStackedTensorDict) becomes a td::lazy_stack of its members, converted the same way. Values:
//  * torch.Tensor: the same tensor (the same TensorImpl: storage shared, nothing copied);
//  * an object whose class has `_is_non_tensor` set (NonTensorData) -> td::NonTensorData of its
//    `.data`; a NonTensorStack (non-tensor and lazy) -> a JSON array of its `tolist()`; plain
//    None / bool / int / float / str / list / tuple values -> td::NonTensorData too. Non-tensor
//    data must be JSON (nested lists and str-keyed dicts of the above); anything else is a
//    TypeError naming the key;
//  * a TensorDict-like value (above) -> a nested TensorDict; a tensorclass instance (its class
//    has `_is_tensorclass`) -> a nested TensorDict of its fields: `_tensordict`'s entries plus
//    `_non_tensordict`'s values (non-tensor data; None, an unset field, is left out).
// The batch size, device, key and kind of every value are checked as td::TensorDict::set checks
// them (BatchSizeError naming the key and both shapes), `names` (dim names, str or None) are
// set with td::TensorDict::set_names, and an `is_locked` level is locked. The upstream
// attributes read, and where v0.4 and v0.14 differ: NOTE [ Upstream attribute layouts ] in
// caster.cc.
// C++ -> Python (`to_python`): a dense level becomes `cls(source, batch_size=[...], device=...)`
// (and `names=[...]` when a dim is named) with tensors (the same TensorImpl) and nested levels
// in `source`, then `set_non_tensor(key, value)` for each non-tensor entry and `lock_()` when
// locked; a lazy stack becomes `lazy_cls(*members, stack_dim=d)` (then `.names = [...]` when
// the stack dim is named). `cls` / `lazy_cls` are the classes registered with
// `set_tensordict_type` (below) or else Python tensordict's TensorDict / LazyStackedTensorDict
// (imported on first use; ImportError when neither is available).
// TensorClass: a C++ class C (td::TensorClass<C>) registered with `set_tensorclass_type(
// "C", py_cls)` comes back as `py_cls._from_tensordict(td, non_tensordict)` (Python
// tensorclass's own constructor from its two stores: tensors and nested TensorDicts in `td`,
// non-tensor fields in the `non_tensordict` dict); a Python tensorclass object passed for a C
// goes through C::from_tensordict (KeyError / TypeError for missing, extra or mistyped fields).
#pragma once

#include <pybind11/pybind11.h>
// torch's own casters (at::Tensor, at::Device, ...), as <torch/extension.h> brings them, so that
// every TU binding functions sees the same ones.
#include <torch/csrc/utils/pybind.h>

#include <string_view>
#include <type_traits>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/tensordict.h"
#include "td/tensorclass/tensorclass.h"

namespace td {
namespace python {

namespace py = pybind11;

// True when `obj` can be read as a TensorDict (see NOTE [ Python TensorDict conversion ]).
bool is_tensordict_like(py::handle obj);
// A TensorDict sharing `obj`'s tensors. Throws TypeError for a value that cannot be carried
// (naming the key), what TensorDict::set throws for one that does not fit (BatchSizeError ...).
TensorDict from_python(py::handle obj);
// A Python TensorDict (or LazyStackedTensorDict) sharing `td`'s tensors.
py::object to_python(const TensorDict& td);
// The registered Python class of TensorClass `class_name` built from `td` (its fields), or
// to_python(td) when no class is registered under that name.
py::object to_python_tensorclass(const TensorDict& td, std::string_view class_name);

// Adds to module `m`:
//   set_tensordict_type(cls, lazy_stack_cls=None)   the classes to_python builds (None: Python
//                                                   tensordict's, imported on first use)
//   set_tensorclass_type(name, cls)                 the Python class of C++ TensorClass `name`
//                                                   (its kClassName); cls None removes it
// and translates the library's errors raised by m's functions into Python exceptions carrying
// the message: td::KeyError -> KeyError, TypeError -> TypeError, ValueError (BatchSizeError,
// NestingError) -> ValueError, IndexError -> IndexError, other c10::Error (LockedError, ...)
// -> RuntimeError.
void bind(py::module_& m);

}  // namespace python
}  // namespace td

namespace pybind11 {
namespace detail {

template <>
struct type_caster<td::TensorDict> {
  PYBIND11_TYPE_CASTER(td::TensorDict, const_name("tensordict.TensorDict"));

  // False (pybind11 then tries the next overload) for objects that are not TensorDict-shaped;
  // a TensorDict-shaped object that cannot be converted raises the error.
  bool load(handle src, bool /*convert*/) {
    if (!td::python::is_tensordict_like(src)) return false;
    value = td::python::from_python(src);
    return true;
  }
  static handle cast(const td::TensorDict& td, return_value_policy, handle) {
    return td::python::to_python(td).release();
  }
};

template <>
struct type_caster<td::LazyStackedTensorDict> {
  PYBIND11_TYPE_CASTER(td::LazyStackedTensorDict,
                       const_name("tensordict.LazyStackedTensorDict"));
  type_caster() : value(td::lazy_stack({td::TensorDict()})) {}

  bool load(handle src, bool /*convert*/) {
    if (!td::python::is_tensordict_like(src)) return false;
    td::TensorDict td = td::python::from_python(src);
    std::optional<td::LazyStackedTensorDict> stack = td::LazyStackedTensorDict::from(td);
    if (!stack) return false;
    value = *std::move(stack);
    return true;
  }
  static handle cast(const td::LazyStackedTensorDict& td, return_value_policy, handle) {
    return td::python::to_python(td).release();
  }
};

// Any td::TensorClass: see NOTE [ Python TensorDict conversion ].
template <class T>
struct type_caster<T, std::enable_if_t<td::internal::tensorclass::kIsTensorClass<T>>> {
  PYBIND11_TYPE_CASTER(T, const_name("tensorclass"));
  type_caster() : value(T::unset({})) {}

  bool load(handle src, bool /*convert*/) {
    if (!td::python::is_tensordict_like(src)) return false;
    value = T::from_tensordict(td::python::from_python(src));
    return true;
  }
  static handle cast(const T& obj, return_value_policy, handle) {
    return td::python::to_python_tensorclass(obj.tensordict(), T::kClassName).release();
  }
};

}  // namespace detail
}  // namespace pybind11
