#include "td/nn/aoti/aoti_module.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "nlohmann/json.hpp"
#include "td/compat/aoti.h"
#include "td/core/dtype.h"
#include "td/nn/internal/wrap.h"

namespace td::nn {
namespace internal {

// What the package says about itself, read once when it is loaded; shared by the module and
// the copies of it (TensorDictModuleBase is copied by clone() before reset() reloads).
struct AotiPackage {
  std::unique_ptr<compat::AotiLoader> loader;
  std::vector<std::string> args;  // the keyword arguments, in call order
  size_t num_outputs = 0;
  std::unordered_map<std::string, std::string> metadata;
  std::string device;  // AOTI_DEVICE_KEY
  c10::DeviceType device_kind = c10::DeviceType::CPU;  // `device`, parsed once for the checks
  std::optional<nlohmann::json> signature;
  std::mutex constants_mutex;  // load_constants: one update of the inactive buffer at a time
};

}  // namespace internal

namespace {

using json = nlohmann::json;
constexpr const char* kSignatureKey = "tensordict.signature";
constexpr const char* kFoldedPrefix = "_FOLDED_CONST_";

bool IsLeaf(const json& spec) { return spec.contains("type") && spec["type"].is_null(); }

size_t CountLeaves(const json& spec) {
  if (IsLeaf(spec)) return 1;
  size_t n = 0;
  for (const json& c : spec.at("children_spec")) n += CountLeaves(c);
  return n;
}

// Parses the call spec [in_spec, out_spec] (pytree JSON: [version, tree]) into the keyword
// argument names and the number of outputs.
void ReadCallSpec(const std::string& path, internal::AotiPackage& p) {
  std::vector<std::string> spec = p.loader->get_call_spec();
  auto bad = [&](const std::string& why) {
    TD_FAIL(ValueError, "AotiModule: ", path, ": ", why, " (call spec: ",
            spec.empty() ? std::string("none") : spec[0], "); td::nn::AotiModule runs packages ",
            "exported with torch.export.export(model, args=(), kwargs={name: tensor, ...}) ",
            "(docs/nn.md, 'AOTInductor packages')");
  };
  if (spec.size() != 2) bad("the call spec is not [in_spec, out_spec]");
  try {
    const json in = json::parse(spec[0]).at(1);
    const json out = json::parse(spec[1]).at(1);
    const json& children = in.at("children_spec");
    if (in.at("type") != "builtins.tuple" || children.size() != 2) {
      bad("the inputs are not (args, kwargs)");
    }
    if (!children[0].at("children_spec").empty()) {
      bad(c10::str("the package takes ", children[0].at("children_spec").size(),
                   " positional argument(s), which have no names to map keys to"));
    }
    const json& kwargs = children[1];
    if (kwargs.at("type") != "builtins.dict") bad("the keyword arguments are not a dict");
    p.args = json::parse(kwargs.at("context").get<std::string>()).get<std::vector<std::string>>();
    const json& leaves = kwargs.at("children_spec");
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!IsLeaf(leaves[i])) {
        bad("keyword argument '" + (i < p.args.size() ? p.args[i] : "?") +
            "' is a container, not a tensor");
      }
    }
    p.num_outputs = CountLeaves(out);
  } catch (const json::exception& e) {
    bad(std::string("cannot read the call spec: ") + e.what());
  }
}

std::string ErrorText(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

std::shared_ptr<internal::AotiPackage> LoadPackage(const std::string& path,
                                                   const AotiModuleOptions& options) {
  auto p = std::make_shared<internal::AotiPackage>();
  try {
    p->loader = compat::MakeAotiLoader(path, options.model_name(),
                                       options.run_single_threaded(), options.device_index());
    if (!p->loader) {
      TD_FAIL(ValueError, "AotiModule: ", path, ": this LibTorch's package loader takes no ",
              "run_single_threaded or device_index; leave them at false and -1");
    }
    p->metadata = p->loader->get_metadata();
  } catch (const std::exception& e) {
    TD_FAIL(ValueError, "AotiModule: cannot load the AOTInductor package ", path, " (model '",
            options.model_name(), "'): ", ErrorText(e));
  }
  ReadCallSpec(path, *p);
  auto dev = p->metadata.find("AOTI_DEVICE_KEY");
  p->device = dev == p->metadata.end() ? "cpu" : dev->second;
  try {
    p->device_kind = c10::Device(p->device).type();
  } catch (const std::exception& e) {
    TD_FAIL(ValueError, "AotiModule: ", path, ": the package's AOTI_DEVICE_KEY '", p->device,
            "' is not a device type: ", ErrorText(e));
  }
  auto sig = p->metadata.find(kSignatureKey);
  if (sig != p->metadata.end()) {
    try {
      json s = json::parse(sig->second);
      if (s.at("version") != 1) {
        TD_FAIL(ValueError, "AotiModule: ", path, ": metadata ", kSignatureKey, " has version ",
                s.at("version").dump(), "; this library reads version 1");
      }
      p->signature = std::move(s);
    } catch (const json::exception& e) {
      TD_FAIL(ValueError, "AotiModule: ", path, ": cannot read metadata ", kSignatureKey, ": ",
              e.what());
    }
  }
  return p;
}

NestedKey KeyOf(const json& parts) {
  return NestedKey(parts.get<std::vector<std::string>>());
}

NestedKey SplitKey(const std::string& name, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == sep) {
      parts.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  }
  // "a__b" or a leading "_" would give an empty part: keep such a name whole.
  for (const std::string& part : parts) {
    if (part.empty()) return NestedKey(name);
  }
  return NestedKey(parts);
}

std::string ShapeRepr(const std::vector<std::optional<int64_t>>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + (shape[i] ? std::to_string(*shape[i]) : std::string("*"));
  }
  return s + "]";
}

}  // namespace

AotiModuleImpl::AotiModuleImpl(std::string path, Keys in_keys, Keys out_keys,
                               AotiModuleOptions options)
    : path_(std::move(path)), options_(std::move(options)) {
  package_ = LoadPackage(path_, options_);
  map_keys(std::move(in_keys).take(), std::move(out_keys).take());
}

void AotiModuleImpl::map_keys(std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys) {
  const internal::AotiPackage& p = *package_;
  const std::string args_repr = KeysRepr(p.args);
  inputs_.clear();
  for (const std::string& arg : p.args) inputs_.push_back(AotiInput{NestedKey(arg), arg, {}, {}});
  std::vector<bool> filled(p.args.size(), false);
  auto fill = [&](const NestedKey& key, const std::string& arg, const char* from) {
    auto it = std::find(p.args.begin(), p.args.end(), arg);
    if (it == p.args.end()) {
      TD_FAIL(ValueError, "AotiModule: ", path_, ": in key ", key.repr(), " (", from,
              ") names the argument '", arg, "', which the package does not take; its ",
              "arguments are ", args_repr, " (a nested key's parts joined by \"_\")");
    }
    const size_t i = static_cast<size_t>(it - p.args.begin());
    if (filled[i]) {
      TD_FAIL(ValueError, "AotiModule: ", path_, ": in key ", key.repr(),
              " fills argument '", arg, "', which in key ", inputs_[i].key.repr(),
              " already fills");
    }
    filled[i] = true;
    inputs_[i].key = key;
  };
  if (!in_keys.empty()) {
    for (const NestedKey& k : in_keys) fill(k, k.join("_"), "given");
  } else if (p.signature) {
    for (const json& in : p.signature->at("inputs")) {
      fill(KeyOf(in.at("key")), in.at("arg").get<std::string>(), "from the signature");
    }
  } else {
    for (const std::string& arg : p.args) {
      fill(options_.split_names() ? SplitKey(arg, '_') : NestedKey(arg), arg, "from the name");
    }
  }
  for (size_t i = 0; i < filled.size(); ++i) {
    if (!filled[i]) {
      TD_FAIL(ValueError, "AotiModule: ", path_, ": no in key fills argument '", p.args[i],
              "'; the package's arguments are ", args_repr, ", the in keys ",
              KeysRepr(in_keys));
    }
  }
  // Dtypes and shapes from the signature, by argument name.
  if (p.signature) {
    try {
      for (const json& in : p.signature->at("inputs")) {
        const std::string arg = in.at("arg").get<std::string>();
        auto it = std::find(p.args.begin(), p.args.end(), arg);
        if (it == p.args.end()) continue;  // not an argument: the call spec decides
        AotiInput& input = inputs_[static_cast<size_t>(it - p.args.begin())];
        if (in.contains("dtype")) {
          const std::string name = "torch." + in.at("dtype").get<std::string>();
          input.dtype = ParseDtypeName(name);
          if (!input.dtype) {
            TD_FAIL(ValueError, "AotiModule: ", path_, ": the signature gives argument '", arg,
                    "' the dtype ", name, ", which this LibTorch does not know");
          }
        }
        if (in.contains("shape")) {
          std::vector<std::optional<int64_t>> shape;
          for (const json& d : in.at("shape")) {
            shape.push_back(d.is_null() ? std::nullopt : std::optional<int64_t>(d.get<int64_t>()));
          }
          input.shape = std::move(shape);
        }
      }
    } catch (const json::exception& e) {
      TD_FAIL(ValueError, "AotiModule: ", path_, ": cannot read metadata ", kSignatureKey, ": ",
              e.what());
    }
  }
  if (out_keys.empty() && p.signature && p.signature->contains("out_keys")) {
    for (const json& k : p.signature->at("out_keys")) out_keys.push_back(KeyOf(k));
  }
  if (out_keys.empty() && p.num_outputs > 0) {
    TD_FAIL(ValueError, "AotiModule: ", path_, ": the package has ", p.num_outputs,
            " output(s) and no ", kSignatureKey, " metadata naming their keys; give out_keys");
  }
  if (out_keys.size() != p.num_outputs) {
    TD_FAIL(ValueError, "AotiModule: ", path_, ": the package returns ", p.num_outputs,
            " tensor(s) but out_keys lists ", out_keys.size(), ": ", KeysRepr(out_keys),
            " (\"_\" discards an output)");
  }
  in_keys_.clear();
  for (const AotiInput& in : inputs_) in_keys_.push_back(in.key);
  out_keys_ = out_keys;
  out_keys_source_ = std::move(out_keys);
}

bool AotiModuleImpl::has_signature() const { return package_->signature.has_value(); }
const std::string& AotiModuleImpl::device_type() const { return package_->device; }
const std::unordered_map<std::string, std::string>& AotiModuleImpl::metadata() const {
  return package_->metadata;
}

at::Tensor AotiModuleImpl::checked(const at::Tensor& t, size_t i) const {
  const AotiInput& in = inputs_[i];
  auto where = [&] {
    return c10::str("AotiModule(", path_, "): input key ", in.key.repr(), " (argument '", in.arg,
                    "')");
  };
  if (!t.defined()) TD_FAIL(TypeError, where(), " is an undefined tensor");
  if (t.device().type() != package_->device_kind) {
    TD_FAIL(ValueError, where(), ": expected a tensor on ", package_->device,
            " (the package was compiled for it), found one on ", t.device().str());
  }
  if (in.dtype && t.scalar_type() != *in.dtype) {
    TD_FAIL(TypeError, where(), ": expected dtype ", DtypeRepr(*in.dtype), ", found ",
            DtypeRepr(t.scalar_type()));
  }
  if (in.shape) {
    const auto& shape = *in.shape;
    bool ok = static_cast<size_t>(t.dim()) == shape.size();
    for (size_t d = 0; ok && d < shape.size(); ++d) {
      ok = !shape[d] || *shape[d] == t.size(static_cast<int64_t>(d));
    }
    if (!ok) {
      TD_FAIL(ValueError, where(), ": expected shape ", ShapeRepr(shape), " (", shape.size(),
              " dims, * any size), found ", SizeRepr(t.sizes()));
    }
  }
  return t.contiguous();
}

std::vector<at::Tensor> AotiModuleImpl::run(std::vector<at::Tensor> inputs) const {
  try {
    return compat::AotiRun(*package_->loader, std::move(inputs));
  } catch (const std::exception& e) {
    TD_FAIL(c10::Error, "AotiModule(", path_, "): the package's run failed on in keys ",
            KeysRepr(in_keys_), ": ", ErrorText(e));
  }
}

TensorDict AotiModuleImpl::forward(const TensorDict& td) {
  return forward_into(td, OutputTarget(td, options_.output()));
}

TensorDict AotiModuleImpl::forward_into(const TensorDict& td, TensorDict out) {
  if (skip_into(td, out, /*module_default=*/false)) return out;
  std::vector<at::Tensor> inputs;
  inputs.reserve(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    std::optional<Value> v = td.find(inputs_[i].key);
    if (!v) {
      TD_FAIL(KeyError, "AotiModule(", path_, "): input key ", inputs_[i].key.repr(),
              " (argument '", inputs_[i].arg, "') is missing from the TensorDict; it has keys ",
              KeysRepr(td.keys(KeysOptions().include_nested(true).leaves_only(true))));
    }
    if (!v->is_tensor()) {
      TD_FAIL(TypeError, "AotiModule(", path_, "): input key ", inputs_[i].key.repr(),
              " (argument '", inputs_[i].arg, "') is a ", v->kind(), ", not a Tensor");
    }
    inputs.push_back(checked(v->tensor(), i));
  }
  std::vector<at::Tensor> result = run(std::move(inputs));
  if (result.size() != out_keys_source_.size()) {
    TD_FAIL(c10::Error, "AotiModule(", path_, "): the package returned ", result.size(),
            " tensor(s) where its call spec says ", out_keys_source_.size());
  }
  internal::WriteTransaction tx;
  for (size_t i = 0; i < result.size(); ++i) {
    if (writes_out_key(out_keys_source_[i])) tx.set(out, out_keys_source_[i], std::move(result[i]));
  }
  tx.commit();
  return out;
}

std::vector<at::Tensor> AotiModuleImpl::forward_tensors(const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != inputs_.size()) {
    TD_FAIL(ValueError, "AotiModule(", path_, "): got ", inputs.size(),
            " input tensor(s) but the package takes ", inputs_.size(), ": in keys ",
            KeysRepr(in_keys_));
  }
  std::vector<at::Tensor> args;
  args.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) args.push_back(checked(inputs[i], i));
  std::vector<at::Tensor> result = run(std::move(args));
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < result.size() && i < out_keys_source_.size(); ++i) {
    if (writes_out_key(out_keys_source_[i])) out.push_back(std::move(result[i]));
  }
  return out;
}

// ---- constants ----------------------------------------------------------------------------------

namespace {

// The package's constants by original FQN ("net.0.weight"), without the folded ones (which the
// package computes from the others).
std::map<std::string, at::Tensor> ConstantsByFqn(internal::AotiPackage& p) {
  torch::inductor::AOTIModelContainerRunner* runner = p.loader->get_runner();
  const std::unordered_map<std::string, std::string> to_fqn =
      runner->getConstantNamesToOriginalFQNs();
  std::optional<std::unordered_map<std::string, at::Tensor>> constants =
      compat::AotiConstants(*runner);
  if (!constants) {
    TD_FAIL(ValueError, "AotiModule: this LibTorch's package loader does not give the values ",
            "of a package's constants (LibTorch 2.6; td/compat/aoti.h), so constants() and ",
            "load_constants() are unavailable; its constants are named ",
            KeysRepr(p.loader->get_constant_fqns()));
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, tensor] : *constants) {
    auto it = to_fqn.find(name);
    const std::string fqn = it == to_fqn.end() || it->second.empty() ? name : it->second;
    if (fqn.rfind(kFoldedPrefix, 0) == 0 || name.rfind(kFoldedPrefix, 0) == 0) continue;
    out.emplace(fqn, tensor);
  }
  return out;
}

std::string FqnList(const std::map<std::string, at::Tensor>& constants) {
  std::vector<std::string> names;
  for (const auto& entry : constants) names.push_back(entry.first);
  return KeysRepr(names);
}

}  // namespace

bool AotiModuleImpl::constants_available() { return compat::kAotiGivesConstants; }

TensorDict AotiModuleImpl::constants() const {
  TensorDict out;
  for (const auto& [fqn, tensor] : ConstantsByFqn(*package_)) out.set(SplitKey(fqn, '.'), tensor);
  return out;
}

void AotiModuleImpl::load_constants(const TensorDict& params) {
  internal::AotiPackage& p = *package_;
  std::lock_guard<std::mutex> lock(p.constants_mutex);
  const std::map<std::string, at::Tensor> current = ConstantsByFqn(p);
  std::unordered_map<std::string, at::Tensor> update;
  for (const auto& [fqn, tensor] : current) update.emplace(fqn, tensor);
  for (const NestedKey& key : params.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    const std::string fqn = key.join(".");
    auto it = current.find(fqn);
    if (it == current.end()) {
      TD_FAIL(KeyError, "AotiModule(", path_, ")::load_constants: key ", key.repr(), " ('", fqn,
              "') is not a constant of the package; its constants are ", FqnList(current),
              " (a parameter inductor folded at compile time is not one: docs/nn.md)");
    }
    const Value v = params.get_value(key);
    if (!v.is_tensor()) {
      TD_FAIL(TypeError, "AotiModule(", path_, ")::load_constants: key ", key.repr(), " holds a ",
              v.kind(), ", not a Tensor");
    }
    const at::Tensor& t = v.tensor();
    const at::Tensor& old = it->second;
    if (t.sizes() != old.sizes()) {
      TD_FAIL(ValueError, "AotiModule(", path_, ")::load_constants: key ", key.repr(),
              " has shape ", SizeRepr(t.sizes()), "; the package's '", fqn, "' has shape ",
              SizeRepr(old.sizes()));
    }
    if (t.scalar_type() != old.scalar_type()) {
      TD_FAIL(ValueError, "AotiModule(", path_, ")::load_constants: key ", key.repr(),
              " has dtype ", DtypeRepr(t.scalar_type()), "; the package's '", fqn,
              "' has dtype ", DtypeRepr(old.scalar_type()));
    }
    if (t.device() != old.device()) {
      TD_FAIL(ValueError, "AotiModule(", path_, ")::load_constants: key ", key.repr(),
              " is on ", t.device().str(), "; the package's '", fqn, "' is on ",
              old.device().str());
    }
    // A copy: the package must not see later in-place changes of the caller's tensor.
    update[fqn] = t.detach().clone(at::MemoryFormat::Contiguous);
  }
  try {
    p.loader->load_constants(update, /*use_inactive=*/true, /*check_full_update=*/false);
    torch::inductor::AOTIModelContainerRunner* runner = p.loader->get_runner();
    runner->run_const_fold(/*use_inactive=*/true);
    runner->swap_constant_buffer();
  } catch (const std::exception& e) {
    TD_FAIL(c10::Error, "AotiModule(", path_, ")::load_constants: the package refused the ",
            "update: ", ErrorText(e));
  }
}

void AotiModuleImpl::reset() {
  std::shared_ptr<internal::AotiPackage> previous = package_;
  package_ = LoadPackage(path_, options_);
  std::vector<NestedKey> in_keys = in_keys_, selected = out_keys_;
  map_keys(std::move(in_keys), out_keys_source_);
  out_keys_ = std::move(selected);
  // The copy keeps the constants load_constants() put in the original (where the loader gives
  // their values: td/compat/aoti.h).
  if (previous && compat::AotiConstants(*previous->loader->get_runner())) {
    TensorDict values;
    for (const auto& [fqn, t] : ConstantsByFqn(*previous)) values.set(SplitKey(fqn, '.'), t);
    load_constants(values);
  }
}

void AotiModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::AotiModule(path=" << path_ << ", in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

}  // namespace td::nn
