// Tensorclass directories on disk: the layout TensorClass::memmap / memmap_ / memmap_like /
// load_memmap (td/tensorclass/tensorclass.h) write and read, and loading a directory whose class
// is known only at run time through a registry of Python class names (load_memmap_any). Part
// of //td/tensorclass; the files themselves are written and mapped by the memmap backend, so
// link //td/backends/memmap too (without it the calls throw an error naming that target).
//
// NOTE [ Tensorclass directory layout ]
// Python tensordict's tensorclass._memmap_ / _load_memmap (tensordict/tensorclass.py, mirrored
// upstream main a1a061e, Aug 2026) write and read:
//   <prefix>/meta.json       {"_type": "<class 'module.QualName'>", <non-tensor field>: <JSON>...}
//   <prefix>/_tensordict/    the fields as a memmap TensorDict (NOTE [ Memmap directory format ]
//                            in td/backends/memmap/format.h)
//   <prefix>/other.pickle    non-JSON non-tensor fields (pickled; refused here, never executed)
// Upstream stores a string field set on a tensorclass as NonTensorData inside _tensordict (only
// None-valued fields and non-tensor fields of older releases go to the top-level meta.json), and
// so does this implementation: every field, non-tensor ones included, is written by
// TensorDict::memmap into _tensordict; meta.json holds only "_type". On load, top-level JSON
// fields are accepted too: null means "not set" and any other value becomes the field's
// non-tensor data. meta.json is written after _tensordict, through a temporary file that is
// fsynced and renamed over the old one, so a crash leaves the previous meta.json or the new one;
// a directory whose meta.json survives from an older class with a new _tensordict fails
// from_tensordict's check (missing/extra fields) rather than loading wrong data.
// "_type" is Python's str(cls): "<class '__main__.MyData'>" unless the class defines
// `static std::string python_type()` returning its qualified Python name, which Python needs to
// find the class (a Python script's own classes live in __main__).
#pragma once

#include <any>
#include <functional>
#include <optional>
#include <string>
#include <typeinfo>

#include "td/core/errors.h"
#include "td/core/tensordict.h"
#include "td/tensorclass/tensorclass.h"

namespace td {

// A directory opened by load_memmap_any: a registered TensorClass, or a TensorDict.
class LoadedMemmap {
 public:
  LoadedMemmap(std::string python_type, TensorDict td, std::any object)
      : python_type_(std::move(python_type)), td_(std::move(td)), object_(std::move(object)) {}
  // The class named by meta.json's "_type" ("__main__.MyData", "tensordict._td.TensorDict").
  const std::string& python_type() const { return python_type_; }
  // True when the directory's class is registered (then get<Class>() returns it).
  bool is_tensorclass() const { return object_.has_value(); }
  template <class D>
  bool holds() const {
    return object_.has_value() && object_.type() == typeid(D);
  }
  // The loaded object. Throws TypeError naming the directory's class when it is not a D.
  //   MyData d = td::load_memmap_any("/data/x").get<MyData>();
  template <class D>
  D get() const {
    if (!holds<D>()) {
      TD_FAIL(TypeError, "the memmap directory holds a ", python_type_,
                      is_tensorclass() ? "" : " (no C++ class registered under that name)",
                      ", not a ", D::kClassName);
    }
    return std::any_cast<D>(object_);
  }
  // The TensorDict of the fields (a registered class), or the loaded TensorDict itself.
  const TensorDict& tensordict() const { return td_; }

 private:
  std::string python_type_;
  TensorDict td_;
  std::any object_;
};

namespace internal::tensorclass {
using ClassFactory = std::function<std::any(TensorDict)>;
void RegisterClass(const std::string& python_name, const std::type_info& type,
                   const char* cls, ClassFactory factory);
}  // namespace internal::tensorclass

// Registers D for load_memmap_any under its Python name (D::python_type() by default). Throws
// ValueError when another type is registered under the same name. Thread-safe.
//   td::register_tensorclass<MyData>();                  // "__main__.MyData"
//   td::register_tensorclass<MyData>("my_pkg.data.MyData");
template <class D>
void register_tensorclass(std::optional<std::string> python_name = std::nullopt) {
  internal::tensorclass::RegisterClass(python_name ? *python_name : D::python_type(), typeid(D),
                           D::kClassName,
                           [](TensorDict td) { return std::any(D::from_tensordict(std::move(td))); });
}

// Opens a memmap directory whatever it holds: a tensorclass directory whose "_type" is
// registered (looked up by qualified name, then by the last component alone) becomes that class
// (checked as from_tensordict); an unregistered tensorclass directory gives the TensorDict of its
// fields; a TensorDict directory gives the TensorDict. Throws MemmapError naming the file for
// anything else, and the errors of TensorDict::load_memmap.
//   td::LoadedMemmap x = td::load_memmap_any("/data/x");
//   if (x.holds<MyData>()) use(x.get<MyData>()); else use(x.tensordict());
LoadedMemmap load_memmap_any(const std::string& prefix,
                             const LoadMemmapOptions& options = {});

}  // namespace td

// Registers Class for load_memmap_any at program start (at namespace scope, once per class).
#define TD_REGISTER_TENSORCLASS(Class)                          \
  static const bool td_tensorclass_registered_##Class = [] {   \
    ::td::register_tensorclass<Class>();                        \
    return true;                                                \
  }()
