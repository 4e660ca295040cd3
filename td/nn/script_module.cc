#include "td/nn/script_module.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <typeindex>
#include <utility>

#include "td/core/dtype.h"

namespace td::nn {
namespace {

using JitModule = torch::jit::script::Module;
using ObjectPtr = c10::intrusive_ptr<c10::ivalue::Object>;

// ---- reading a scripted module's attributes ----------------------------------------------------

std::string TypeName(const ObjectPtr& obj) { return obj->type()->repr_str(); }

bool IsTensorList(const c10::TypePtr& type) {
  if (type->kind() != c10::TypeKind::ListType) return false;
  return type->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType;
}

// The names of the module's parameters, buffers and submodules (for error messages).
std::string Inventory(const ObjectPtr& obj) {
  std::vector<std::string> params, buffers, children;
  const c10::ClassTypePtr& type = obj->type();
  for (size_t i = 0; i < type->numAttributes(); ++i) {
    const std::string& name = type->getAttributeName(i);
    if (type->is_parameter(i)) {
      params.push_back(name);
    } else if (type->is_buffer(i)) {
      buffers.push_back(name);
    } else if (type->getAttribute(i)->is_module()) {
      children.push_back(name);
    }
  }
  return c10::str("its parameters are ", KeysRepr(params), ", buffers ", KeysRepr(buffers),
                  ", submodules ", KeysRepr(children));
}

// Re-points `slot` of `obj` to `value`, and every element of the object's List[Tensor]
// attributes that is the tensor being replaced (NOTE [ Swapping tensors into TorchScript
// modules ]). Returns those elements, so that they can be put back.
std::vector<std::pair<c10::List<at::Tensor>, size_t>> SetSlot(const ObjectPtr& obj, size_t slot,
                                                              const at::Tensor& value) {
  std::vector<std::pair<c10::List<at::Tensor>, size_t>> aliases;
  const c10::IValue current = obj->getSlot(slot);
  if (current.isTensor()) {
    const at::Tensor& old = current.toTensor();
    const c10::ClassTypePtr& type = obj->type();
    for (size_t j = 0; j < type->numAttributes(); ++j) {
      if (j == slot || !IsTensorList(type->getAttribute(j))) continue;
      const c10::IValue list_value = obj->getSlot(j);
      if (!list_value.isTensorList()) continue;
      c10::List<at::Tensor> list = list_value.toTensorList();
      for (size_t k = 0; k < list.size(); ++k) {
        if (list.get(k).is_same(old)) {
          list.set(k, value);
          aliases.emplace_back(list, k);
        }
      }
    }
  }
  obj->setSlot(slot, value);
  return aliases;
}

// ---- the mirror: the scripted module's tensors as a torch::nn::Module tree ---------------------

// Registers the same tensors as the scripted module (so parameters() and optimizers see them);
// to_module() on it writes through to the scripted module's slots (see the setter below).
class ScriptMirror : public torch::nn::Module {
 public:
  ScriptMirror(const JitModule& module) : torch::nn::Module(module.type()->repr_str()) {  // NOLINT
    object_ = module._ivalue();
    for (const auto& p : module.named_parameters(/*recurse=*/false)) {
      register_parameter(p.name, p.value, p.value.requires_grad());
    }
    for (const auto& b : module.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& c : module.named_children()) {
      auto child = std::make_shared<ScriptMirror>(c.value);
      if (!child->parameters().empty() || !child->buffers().empty()) {
        register_module(c.name, std::move(child));
      }
    }
  }
  const ObjectPtr& object() const { return object_; }

 private:
  ObjectPtr object_;
};

void RegisterMirrorSetter() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_tensor_members(
        std::type_index(typeid(ScriptMirror)),
        [](torch::nn::Module& module, const std::string& name, const at::Tensor& value) {
          const ObjectPtr& obj = dynamic_cast<ScriptMirror&>(module).object();
          auto slot = obj->type()->findAttributeSlot(name);
          if (!slot) return false;
          SetSlot(obj, *slot, value);
          return true;
        });
  });
}

// ---- calling a method ---------------------------------------------------------------------------

std::string OutKeyName(const NestedKey& key) {
  std::string name;
  for (const std::string& part : key) name += (name.empty() ? "" : ".") + part;
  return name;
}

void FlattenOutput(const c10::IValue& v, const std::string& schema, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) FlattenOutput(e, schema, out);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  } else {
    TD_FAIL(TypeError, "TorchScript method ", schema, " returned a ", v.tagKind(),
                    " (", v.type()->repr_str(), "); expected a Tensor, a tuple or list of "
                    "Tensors, or a Dict[str, Tensor]");
  }
}

// The callable script_module() wraps: the scripted method, its schema and the out keys.
struct ScriptCall {
  JitModule module;
  std::string method;
  std::string schema;
  std::vector<NestedKey> out_keys;

  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& inputs) {
    return call(std::vector<c10::IValue>(inputs.begin(), inputs.end()), {});
  }
  // How the TensorDictModule prints it (internal::CallableName in common.h).
  std::string td_callable_name() const {
    const auto& name = module.type()->name();  // repr_str() adds the compilation unit's address
    return "torch::jit::Module(" + (name ? name->qualifiedName() : module.type()->str()) + ")";
  }

  // Calls the method with positional `args` and keyword `kwargs`; the outputs in out_keys order.
  std::vector<at::Tensor> call(std::vector<c10::IValue> args, const torch::jit::Kwargs& kwargs) {
    c10::IValue result;
    try {
      result = module.get_method(method)(std::move(args), kwargs);
    } catch (c10::Error& e) {
      e.add_context(c10::str("calling TorchScript method ", schema));
      throw;
    } catch (const std::exception& e) {
      // The interpreter reports errors of the scripted code as std::runtime_error.
      TD_FAIL(c10::Error, "calling TorchScript method ", schema, " failed: ", e.what());
    }
    std::vector<at::Tensor> out;
    if (!result.isGenericDict()) {
      FlattenOutput(result, schema, out);
      return out;
    }
    const c10::Dict<c10::IValue, c10::IValue> dict = result.toGenericDict();
    out.reserve(out_keys.size());
    for (const NestedKey& k : out_keys) {
      if (k.size() == 1 && k[0] == "_") {
        out.emplace_back();
        continue;
      }
      const std::string name = OutKeyName(k);
      auto it = dict.find(c10::IValue(name));
      if (it == dict.end()) {
        std::vector<std::string> names;
        for (const auto& e : dict) names.push_back(e.key().isString() ? e.key().toStringRef()
                                                                      : e.key().tagKind());
        TD_FAIL(KeyError, "TorchScript method ", schema, " returned a dict without the entry '",
                       name, "' for out key ", k.repr(), "; its keys are ", KeysRepr(names));
      }
      if (!it->value().isTensor()) {
        TD_FAIL(TypeError, "TorchScript method ", schema, " returned a dict whose entry '", name,
                        "' is a ", it->value().tagKind(), ", not a Tensor");
      }
      out.push_back(it->value().toTensor());
    }
    return out;
  }
};

// The callable of script_module() with in_keys by name: the method called with keywords.
struct ScriptKwargsCall {
  ScriptCall call;

  std::vector<at::Tensor> operator()(const Kwargs& kwargs) {
    torch::jit::Kwargs named;
    for (const auto& [name, tensor] : kwargs) named.emplace(name, tensor);
    return call.call({}, named);
  }
  std::string td_callable_name() const { return call.td_callable_name(); }
};

// The method `options.method()` of `module` (ValueError naming the methods when it has none).
torch::jit::Method FindMethod(const JitModule& module, const ScriptModuleOptions& options) {
  auto method = module.find_method(options.method());
  if (!method) {
    std::vector<std::string> names;
    for (const torch::jit::Method& m : module.get_methods()) names.push_back(m.name());
    TD_FAIL(ValueError, "script_module: the TorchScript module ", module.type()->repr_str(),
                     " has no method '", options.method(), "'; its methods are ",
                     KeysRepr(names));
  }
  return *method;
}

void CheckTakesTensor(const c10::Argument& a, const std::string& schema_text,
                      const NestedKey& key) {
  if (!c10::TensorType::get()->isSubtypeOf(*a.type())) {
    TD_FAIL(TypeError, "script_module: argument '", a.name(), "' of ", schema_text, " has type ",
                    a.type()->repr_str(), ", which does not take a Tensor (in key ", key.repr(),
                    ")");
  }
}

TensorDictModule WithMirror(TensorDictModule result, const JitModule& module) {
  RegisterMirrorSetter();
  result->register_module("module", std::make_shared<ScriptMirror>(module));
  return result;
}

// ---- from_module ------------------------------------------------------------------------------

TensorDict FromScript(const JitModule& module, const FromModuleOptions& options) {
  TensorDict out;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) out.set(p.name, p.value);
  if (options.include_buffers()) {
    for (const auto& b : module.named_buffers(/*recurse=*/false)) out.set(b.name, b.value);
  }
  if (options.recurse()) {
    for (const auto& c : module.named_children()) {
      TensorDict sub = FromScript(c.value, options);
      if (!sub.is_empty() || options.keep_empty()) out.set(c.name, std::move(sub));
    }
  }
  return out;
}

}  // namespace

// ---- script_module --------------------------------------------------------------------------

TensorDictModule script_module(JitModule module, Keys in_list, Keys out_list,
                               const ScriptModuleOptions& options) {
  std::vector<NestedKey> in_keys = std::move(in_list).take();
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  const torch::jit::Method method = FindMethod(module, options);
  const c10::FunctionSchema& schema = method.function().getSchema();
  const std::string schema_text = c10::str(schema);
  // The first argument is `self`.
  const std::vector<c10::Argument>& args = schema.arguments();
  size_t required = 0, positional = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].kwarg_only()) continue;
    ++positional;
    if (!args[i].default_value()) required = positional;
  }
  if (in_keys.size() < required || in_keys.size() > positional) {
    TD_FAIL(ValueError, "script_module: ", schema_text, " takes ",
                     required == positional ? c10::str(required)
                                            : c10::str(required, " to ", positional),
                     " positional argument(s) but in_keys lists ", in_keys.size(), ": ",
                     KeysRepr(in_keys));
  }
  for (size_t i = 0; i < in_keys.size(); ++i) {
    CheckTakesTensor(args[i + 1], schema_text, in_keys[i]);
  }
  ScriptCall call{module, options.method(), schema_text, out_keys};
  return WithMirror(TensorDictModule(std::move(call), std::move(in_keys), std::move(out_keys),
                                     options.output()),
                    module);
}

TensorDictModule script_module(JitModule module, const InKeysByName& in_keys, Keys out_list,
                               const ScriptModuleOptions& options) {
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  const torch::jit::Method method = FindMethod(module, options);
  const c10::FunctionSchema& schema = method.function().getSchema();
  const std::string schema_text = c10::str(schema);
  const std::vector<c10::Argument>& args = schema.arguments();
  internal::ResolveByName(in_keys.entries(), {}, /*keyword=*/true);  // repeated keys or names
  std::vector<std::string> names;  // the arguments but `self`
  for (size_t i = 1; i < args.size(); ++i) names.push_back(args[i].name());
  std::vector<bool> given(args.size(), false);
  for (const auto& [key, name] : in_keys.entries()) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      TD_FAIL(ValueError, "script_module: ", schema_text, " has no argument named '", name,
                       "' (in key ", key.repr(), "); its arguments are ", KeysRepr(names));
    }
    const size_t i = static_cast<size_t>(it - names.begin()) + 1;
    CheckTakesTensor(args[i], schema_text, key);
    given[i] = true;
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (!given[i] && !args[i].default_value()) {
      std::vector<std::string> named;
      for (const auto& entry : in_keys.entries()) named.push_back(entry.second);
      TD_FAIL(ValueError, "script_module: argument '", args[i].name(), "' of ", schema_text,
                       " has no default and no in key fills it; in_keys name ",
                       KeysRepr(named));
    }
  }
  ScriptKwargsCall call{ScriptCall{module, options.method(), schema_text, out_keys}};
  return WithMirror(TensorDictModule(std::move(call), in_keys, std::move(out_keys),
                                     TensorDictModuleOptions().output(options.output())),
                    module);
}

namespace {

// What the first pickle opcode of a torch.save file's data.pkl says it holds (protocol 2, which
// torch.save uses by default: PROTO 2, then GLOBAL "module\nname\n" for an object, or an
// empty dict / list / tuple).
std::string PickledWhat(const uint8_t* p, size_t n) {
  if (n < 3 || p[0] != 0x80) return "a pickled object";
  if (p[2] == '}') return "a pickled dict (a state_dict?)";
  if (p[2] == ']') return "a pickled list";
  if (p[2] == ')' || p[2] == '(') return "a pickled tuple";
  if (p[2] != 'c') return "a pickled object";
  const std::string rest(reinterpret_cast<const char*>(p) + 3, std::min<size_t>(n - 3, 512));
  const size_t a = rest.find('\n');
  const size_t b = a == std::string::npos ? a : rest.find('\n', a + 1);
  if (b == std::string::npos) return "a pickled object";
  const std::string cls = rest.substr(0, a) + "." + rest.substr(a + 1, b - a - 1);
  if (cls == "torch._utils._rebuild_tensor_v2" || cls == "torch._utils._rebuild_parameter") {
    return "a pickled tensor";
  }
  if (cls == "collections.OrderedDict") return "a pickled OrderedDict (a state_dict?)";
  return "a pickled object of class " + cls + " (an eager module?)";
}

// Why `path` cannot be a TorchScript archive (a zip with constants.pkl, as torch.jit.save
// writes), or "" when it may be one. Reads nothing but the file's first bytes and, for a zip
// archive, its directory and data.pkl; never reads a device, a pipe or a directory.
std::string NotAnArchive(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return c10::str("unreadable (", std::strerror(errno), ")");
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a pipe";
  if (!S_ISREG(st.st_mode)) return "a special file";
  if (st.st_size == 0) return "an empty file";
  uint8_t head[8] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return c10::str("unreadable (", std::strerror(errno), ")");
  const ssize_t got = ::read(fd, head, sizeof(head));
  ::close(fd);
  if (got < 4 || !(head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4)) {
    if (got >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) {
      return "a pickle file (torch.save with _use_new_zipfile_serialization=False?)";
    }
    std::string bytes;
    for (ssize_t i = 0; i < got; ++i) {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned>(head[i]));
      bytes += (i ? " " : "") + std::string(hex);
    }
    return c10::str("not a zip archive (", st.st_size, " bytes starting with ", bytes, ")");
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (reader.hasRecord("constants.pkl")) return "";
    if (reader.hasRecord("data.pkl")) {
      auto [data, size] = reader.getRecord("data.pkl");
      return "a torch.save file holding " +
             PickledWhat(static_cast<const uint8_t*>(data.get()), size) + ", not a TorchScript " +
             "module";
    }
    std::string names;
    for (const std::string& r : reader.getAllRecords()) names += (names.empty() ? "" : ", ") + r;
    return "a zip archive without constants.pkl (records: " + names + ")";
  } catch (const c10::Error& e) {
    return c10::str("a zip archive LibTorch cannot read (", e.what_without_backtrace(), ")");
  }
}

JitModule LoadArchive(const std::string& path) {
  const std::string why = NotAnArchive(path);
  if (!why.empty()) {
    TD_FAIL(ValueError, "load_script_module: ", path, " is ", why, "; expected a TorchScript ",
            "archive written by torch.jit.save (torch.jit.script(model).save(path) in Python)");
  }
  try {
    return torch::jit::load(path);
  } catch (const c10::Error& e) {
    TD_FAIL(ValueError, "load_script_module: cannot load the TorchScript archive ", path, ": ",
            e.what_without_backtrace());
  } catch (const std::exception& e) {
    TD_FAIL(ValueError, "load_script_module: cannot load the TorchScript archive ", path, ": ",
            e.what());
  }
}

}  // namespace

TensorDictModule load_script_module(const std::string& path, Keys in_keys, Keys out_keys,
                                    const ScriptModuleOptions& options) {
  return script_module(LoadArchive(path), std::move(in_keys), std::move(out_keys), options);
}

TensorDictModule load_script_module(const std::string& path, const InKeysByName& in_keys,
                                    Keys out_keys, const ScriptModuleOptions& options) {
  return script_module(LoadArchive(path), in_keys, std::move(out_keys), options);
}

TensorDict from_module(const JitModule& module, const FromModuleOptions& options) {
  TensorDict out = FromScript(module, options);
  if (options.lock()) out.lock_();
  return out;
}

// ---- to_module ----------------------------------------------------------------------------------

class ScriptModuleSwapper {
 public:
  static ScriptModuleParamsGuard Swap(const TensorDict& params, JitModule& module,
                                      const ToModuleOptions& options) {
    ScriptModuleParamsGuard guard;
    guard.inplace_ = options.inplace();
    try {
      Level(params, module._ivalue(), {}, guard);
    } catch (...) {
      guard.restore_slots();
      throw;
    }
    return guard;
  }

 private:
  static NestedKey Path(const std::vector<std::string>& prefix, const std::string& k) {
    std::vector<std::string> parts = prefix;
    parts.push_back(k);
    return NestedKey(parts);
  }

  static std::string Where(const std::vector<std::string>& prefix, const ObjectPtr& obj) {
    return (prefix.empty() ? std::string("the root module")
                           : "submodule " + NestedKey(prefix).repr()) +
           " (" + TypeName(obj) + ")";
  }

  static void Level(const TensorDict& params, const ObjectPtr& obj,
                    const std::vector<std::string>& prefix, ScriptModuleParamsGuard& g) {
    const c10::ClassTypePtr& type = obj->type();
    params.for_each_entry([&](const std::string& k, const Value& entry) {
      const Value* v = &entry;
      const NestedKey path = Path(prefix, k);
      auto slot = type->findAttributeSlot(k);
      const bool is_tensor_slot = slot && (type->is_parameter(*slot) || type->is_buffer(*slot));
      const bool is_module_slot = slot && type->getAttribute(*slot)->is_module();
      if (!is_tensor_slot && !is_module_slot) {
        TD_FAIL(KeyError, "to_module: key ", path.repr(), " matches nothing in ", Where(prefix, obj),
                       ": ", Inventory(obj));
      }
      if (v->is_tensordict()) {
        if (!is_module_slot) {
          TD_FAIL(TypeError, "to_module: key ", path.repr(), " holds a TensorDict, but in ",
                          Where(prefix, obj), " it names a tensor, not a submodule");
        }
        std::vector<std::string> sub = prefix;
        sub.push_back(k);
        Level(v->tensordict(), obj->getSlot(*slot).toObject(), sub, g);
        return;
      }
      if (!v->is_tensor()) {
        TD_FAIL(TypeError, "to_module: key ", path.repr(),
                        " holds non-tensor data; only tensors can go into a module");
      }
      if (is_module_slot) {
        TD_FAIL(TypeError, "to_module: key ", path.repr(), " holds a Tensor, but in ",
                        Where(prefix, obj), " it names a submodule (expected a TensorDict)");
      }
      const bool buffer = type->is_buffer(*slot);
      const c10::IValue current = obj->getSlot(*slot);
      const at::Tensor& value = v->tensor();
      if (!current.isTensor()) {
        TD_FAIL(ValueError, "to_module: key ", path.repr(), " names the ",
                         buffer ? "buffer" : "parameter", " of ", Where(prefix, obj),
                         ", which is None; there is no tensor to replace");
      }
      const at::Tensor old = current.toTensor();
      if (old.sizes() != value.sizes()) {
        TD_FAIL(ValueError, "to_module: key ", path.repr(), " has shape ", SizeRepr(value.sizes()),
                         " but the ", buffer ? "buffer" : "parameter", " it replaces in ",
                         Where(prefix, obj), " has shape ", SizeRepr(old.sizes()));
      }
      if (old.scalar_type() != value.scalar_type()) {
        TD_FAIL(ValueError, "to_module: key ", path.repr(), " has dtype ",
                DtypeName(value.scalar_type()), " but the ", buffer ? "buffer" : "parameter",
                " it replaces in ", Where(prefix, obj), " has dtype ",
                DtypeName(old.scalar_type()), "; convert the TensorDict first");
      }
      ScriptModuleParamsGuard::Slot record{obj, *slot, path, old, {}};
      if (g.inplace_) {
        at::NoGradGuard no_grad;
        record.previous = old.detach().clone();
        g.slots_.push_back(std::move(record));
        old.copy_(value);
        return;
      }
      for (auto& [list, index] : SetSlot(obj, *slot, value)) {
        record.aliases.push_back({std::move(list), index});
      }
      g.slots_.push_back(std::move(record));
    });
  }
};

ScriptModuleParamsGuard to_module(const TensorDict& params, JitModule& module,
                                  const ToModuleOptions& options) {
  return ScriptModuleSwapper::Swap(params, module, options);
}

ScriptModuleParamsGuard::ScriptModuleParamsGuard(ScriptModuleParamsGuard&& other) noexcept
    : slots_(std::move(other.slots_)), inplace_(other.inplace_) {
  other.slots_.clear();
}

ScriptModuleParamsGuard& ScriptModuleParamsGuard::operator=(
    ScriptModuleParamsGuard&& other) noexcept {
  if (this != &other) {
    try {
      restore_slots();
    } catch (const std::exception& e) {
      std::cerr << "td::nn::ScriptModuleParamsGuard: restoring failed: " << e.what() << "\n";
    }
    slots_ = std::move(other.slots_);
    inplace_ = other.inplace_;
    other.slots_.clear();
  }
  return *this;
}

ScriptModuleParamsGuard::~ScriptModuleParamsGuard() {
  try {
    restore_slots();
  } catch (const std::exception& e) {
    std::cerr << "td::nn::ScriptModuleParamsGuard: restoring failed: " << e.what() << "\n";
  }
}

void ScriptModuleParamsGuard::restore() { restore_slots(); }

void ScriptModuleParamsGuard::restore_slots() {
  // Take the slots first so that a failure part-way cannot restore twice.
  std::vector<Slot> slots = std::move(slots_);
  slots_.clear();
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) {
    if (inplace_) {
      at::NoGradGuard no_grad;
      it->object->getSlot(it->slot).toTensor().copy_(it->previous);
      continue;
    }
    for (Alias& a : it->aliases) a.list.set(a.index, it->previous);
    it->object->setSlot(it->slot, it->previous);
  }
}

TensorDict ScriptModuleParamsGuard::release() {
  std::vector<Slot> slots = std::move(slots_);
  slots_.clear();
  TensorDict previous;
  for (const Slot& s : slots) previous.set(s.key, s.previous);
  return previous;
}

}  // namespace td::nn
