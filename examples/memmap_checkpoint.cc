// "TensorDict for parameter serialization" from the Python README, in C++: save a model's
// parameters with memmap (leaves written in parallel), load them back, put them on the model,
// and load only a slice of the checkpoint for one submodule.
//   bazel run //examples:memmap_checkpoint [-- /path/to/saved/folder]
#include <stdlib.h>
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/tensordict.h"
#include "td/nn/functional.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "memmap_checkpoint: " << what << "\n";
    std::exit(1);
  }
}

std::string Folder(int argc, char** argv) {
  if (argc > 1) return argv[1];
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/td_checkpoint_XXXXXX";
  Check(::mkdtemp(base.data()) != nullptr, "mkdtemp failed");
  return base + "/saved";
}

}  // namespace

int main(int argc, char** argv) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::Linear(4, 3));
  const std::string folder = Folder(argc, argv);
  torch::Tensor x = torch::randn({10, 3});
  torch::Tensor expected = model->forward(x).detach();

  // params = TensorDict.from_module(model); params.memmap(folder, num_threads=16)
  td::TensorDict params = td::nn::from_module(*model);
  params.memmap(folder, td::MemmapOptions().num_threads(16));
  std::cout << "saved to " << folder << ":\n" << params << "\n";

  // Scramble the model, then load the checkpoint and put it back on the model.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.zero_();
  }
  Check(!model->forward(x).allclose(expected), "the scrambled model still gives the old output");
  td::TensorDict loaded = td::TensorDict::load_memmap(folder);
  Check(td::MemoryMappedTensor::is_memory_mapped(loaded.get({"0", "weight"})),
        "loaded parameters are not memory-mapped");
  {
    auto guard = td::nn::to_module(loaded, *model);  // params.to_module(model)
    Check(model->forward(x).allclose(expected), "the loaded parameters give another output");
  }

  // Only the slice needed: TensorDict.load_memmap(folder + "/0") onto model[0].
  td::TensorDict params0 = td::TensorDict::load_memmap(folder, td::LoadMemmapOptions().sub_path("0"));
  td::TensorDict old0 = td::nn::swap_into_module(params0, *model->ptr(0));
  // (params' leaves are the model's own tensors, zeroed above; the checkpoint holds the values.)
  Check(model->ptr(0)->named_parameters()["weight"].equal(loaded.get({"0", "weight"})),
        "model[0] did not receive the slice");
  std::cout << "loaded the slice '0' onto model[0]:\n" << params0 << "\n";
  std::cout << "checkpoint round trip OK\n";
  return 0;
}
