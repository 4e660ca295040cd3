// TorchScript models in td::nn: a scripted module (trained in Python, saved with
// `torch.jit.script(model).save(path)`, loaded with torch::jit::load) as a TensorDictModule, and
// from_module / to_module on scripted modules, so that parameters saved from Python with
// `TensorDict.from_module(model).memmap(dir)` go into the scripted model in C++.
//
//   torch::jit::script::Module policy = torch::jit::load("policy.pt");
//   td::nn::TensorDictModule actor = td::nn::script_module(policy, {"obs"}, {"action"});
//   actor(data);                                          // data["action"] = policy(data["obs"])
//   auto gru = td::nn::script_module(policy, td::nn::by_name({{"h0", "hidden"}, {"o", "obs"}}),
//                                    {"action"});             // keys placed by argument name
//
//   td::TensorDict ckpt = td::TensorDict::load_memmap("ckpt");   // written by Python
//   {
//     auto guard = td::nn::to_module(ckpt, policy);      // the scripted model computes with ckpt
//     actor(data);
//   }                                                     // and gets its own tensors back here
//
// This is the only td::nn target that includes <torch/script.h> (Bazel: //td/nn:script, for
// consumers @tensordict//td/nn:script); programs that do not deploy TorchScript do not pay for it.
//
// NOTE [ Swapping tensors into TorchScript modules ]
// A scripted module keeps every parameter and buffer in one attribute slot of its object
// (`torch::jit::Object`); compiled methods read them with prim::GetAttr, so re-pointing the slot
// (`setAttr`) is all the eager version's registry + member swap does (NOTE [ Swapping tensors
// into LibTorch modules ] in functional.h), with the same autograd semantics: forward() uses the
// swapped-in tensors themselves. One exception: scripted RNN/LSTM/GRU also read their weights
// from a `List[Tensor]` attribute (`_flat_weights`) holding the same tensors. to_module therefore
// also re-points, in every List[Tensor] attribute of the same module, the elements that are the
// very tensor being replaced (is_same), and the guard puts them back. A frozen module
// (torch.jit.freeze) has its parameters folded into the code as constants: from_module finds
// none and to_module refuses every key, rather than swapping tensors forward() never reads.
// The TensorDictModule made by script_module() exposes the scripted module's parameters as
// parameters() (the same tensors, for optimizers) through a mirror torch::nn::Module whose
// tensors to_module() on the TensorDictModule swaps into the scripted module's slots as well.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/script.h>

#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/nn/functional.h"

namespace td::nn {

struct ScriptModuleOptions {
  // The method of the scripted module to call.
  TORCH_ARG(std::string, method) = "forward";
  // Where the outputs are written (see OutputMode).
  TORCH_ARG(OutputMode, output) = OutputMode::kInput;
};

// A TensorDictModule that calls `module`'s method (forward by default) with the `in_keys` entries
// as its positional arguments, in order. What the method returns fills `out_keys`: a Tensor fills
// one key; a tuple (nested tuples flattened) or a List[Tensor] fills them in order; a
// Dict[str, Tensor] fills each out key with the dict entry of that name (a nested out key
// {"a", "b"} reads the entry "a.b"). "_" discards an output. The module is shared, not copied:
// to_module(params, module) affects it. parameters() of the result are the scripted module's.
// Throws ValueError naming the method and its schema when the module has no such method, when
// in_keys has fewer entries than the method's arguments without defaults or more than all its
// arguments; TypeError naming the argument and the schema when an argument does not take a
// Tensor. At call time: TypeError naming the schema when the method returns something else than
// the above, KeyError naming the dict's keys when a dict output lacks an out key, and the
// TorchScript error with the schema and the keys added when the method itself fails.
//   auto policy = td::nn::script_module(torch::jit::load("gru.pt"), {"obs", "hidden"},
//                                       {"action", {"next", "hidden"}});
TensorDictModule script_module(torch::jit::script::Module module, Keys in_keys, Keys out_keys,
                               const ScriptModuleOptions& options = {});

// Python's in_keys={"obs": "x", "hidden": "h"} for a scripted method: its schema knows the
// argument names, so each key fills the argument it names (a keyword call), whatever the order
// of the pairs; arguments no key names must have defaults. in_keys() lists the keys, in order;
// in_key_args() the names. Throws ValueError naming an argument name the schema lacks (with the
// schema and its argument names), a required argument no key fills, or a repeated key or name;
// TypeError naming an argument that does not take a Tensor; at call time, KeyError naming a
// missing key and its argument, then as script_module above.
//   auto policy = td::nn::script_module(torch::jit::load("gru.pt"),
//                                       td::nn::by_name({{"h0", "hidden"}, {"o", "obs"}}),
//                                       {"action", {"next", "hidden"}});
TensorDictModule script_module(torch::jit::script::Module module, const InKeysByName& in_keys,
                               Keys out_keys, const ScriptModuleOptions& options = {});

// torch::jit::load(path) + script_module(). The file is looked at first: when it is not a
// TorchScript archive (a torch.save file of a tensor, a state_dict or an eager module, other
// bytes, an empty file, a directory, a device: never read) ValueError names the file, what it is
// and what was expected (a torch.jit.save archive); an archive torch::jit::load refuses is a
// ValueError naming the file with LibTorch's message. Then throws what script_module throws.
//   auto actor = td::nn::load_script_module("policy.pt", {"obs"}, {"action"});
TensorDictModule load_script_module(const std::string& path, Keys in_keys, Keys out_keys,
                                    const ScriptModuleOptions& options = {});
// The same with in_keys by argument name.
//   auto actor = td::nn::load_script_module("policy.pt", td::nn::by_name({{"o", "obs"}}), {"a"});
TensorDictModule load_script_module(const std::string& path, const InKeysByName& in_keys,
                                    Keys out_keys, const ScriptModuleOptions& options = {});

// The scripted module's parameters and buffers as a nested TensorDict with batch size [], named
// as from_module names an eager module's (and as Python's TensorDict.from_module does): a
// submodule's tensors under its name, "0.weight" -> {"0", "weight"}; parameters before buffers;
// submodules without tensors left out unless keep_empty. The leaves are the module's own
// tensors (no copy). Throws nothing beyond what the TensorDict calls throw.
//   td::TensorDict params = td::nn::from_module(torch::jit::load("mlp.pt"));
//   params.get({"0", "weight"}).sizes();   // [32, 4]
TensorDict from_module(const torch::jit::script::Module& module,
                       const FromModuleOptions& options = {});

// Restores the tensors a to_module() call put into a scripted module: in its destructor, in
// restore(), or never if release() is called. Movable, not copyable.
class [[nodiscard]] ScriptModuleParamsGuard {
 public:
  ScriptModuleParamsGuard() = default;
  ScriptModuleParamsGuard(ScriptModuleParamsGuard&& other) noexcept;
  ScriptModuleParamsGuard& operator=(ScriptModuleParamsGuard&& other) noexcept;
  ScriptModuleParamsGuard(const ScriptModuleParamsGuard&) = delete;
  ScriptModuleParamsGuard& operator=(const ScriptModuleParamsGuard&) = delete;
  // Restores (never throws; an error while restoring is reported on stderr).
  ~ScriptModuleParamsGuard();

  // Puts the previous tensors back now. A second call does nothing.
  void restore();
  // Keeps the new tensors in the module and returns the previous ones, laid out like the
  // TensorDict given to to_module (batch size []). The guard becomes inactive.
  TensorDict release();
  // Number of tensors swapped (0 once restored or released).
  size_t size() const { return slots_.size(); }
  bool active() const { return !slots_.empty(); }

 private:
  friend class ScriptModuleSwapper;
  struct Alias {  // an element of a List[Tensor] attribute that was the replaced tensor
    c10::List<at::Tensor> list;
    size_t index = 0;
  };
  struct Slot {
    c10::intrusive_ptr<c10::ivalue::Object> object;
    size_t slot = 0;
    NestedKey key;
    at::Tensor previous;
    std::vector<Alias> aliases;
  };
  void restore_slots();

  std::vector<Slot> slots_;
  bool inplace_ = false;
};

// Puts every tensor of `params` into the scripted `module` (a nested key names a submodule path,
// the last component a parameter or buffer; see NOTE [ Swapping tensors into TorchScript
// modules ]) until the returned guard is destroyed; entries `params` does not mention are left
// alone. ToModuleOptions().inplace(true) copies the values into the module's tensors instead.
// Throws, with nothing swapped: KeyError naming the path and the module's parameters, buffers
// and submodules for a key that matches none; ValueError naming the key and both shapes (or
// both dtypes) when a shape (or dtype) differs from the one it replaces, in both modes; TypeError
// for a TensorDict where a tensor is, a tensor where a submodule is, or non-tensor data.
//   td::TensorDict ckpt = td::TensorDict::load_memmap("ckpt");
//   {
//     auto guard = td::nn::to_module(ckpt, policy);
//     policy.forward({obs});
//   }
ScriptModuleParamsGuard to_module(const TensorDict& params, torch::jit::script::Module& module,
                                  const ToModuleOptions& options = {});

}  // namespace td::nn
