// The seeds' README TensorClass example, in C++: a typed class with fields image / mask / label
// and methods of its own, which keeps every TensorDict operation.
//   bazel run //examples:tensorclass
//
// Prints (as the seeds show):
//   MyData(
//       image=Tensor(shape=torch.Size([11, 3, 64, 64]), device=cpu, dtype=torch.float32, is_shared=False),
//       label=Tensor(shape=torch.Size([11]), device=cpu, dtype=torch.int64, is_shared=False),
//       mask=Tensor(shape=torch.Size([11, 1, 64, 64]), device=cpu, dtype=torch.bool, is_shared=False),
//       batch_size=torch.Size([11]),
//       device=None,
//       is_shared=False)
//   [100, 6117]
//   MyData(
//       image=Tensor(shape=torch.Size([10, 10, 3, 64, 64]), device=cpu, dtype=torch.float32, is_shared=False),
//       ...
//       batch_size=torch.Size([10, 10]),
//       device=None,
//       is_shared=False)
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <vector>

#include "td/tensorclass/tensorclass.h"

// @tensorclass
// class MyData:
//     image: torch.Tensor
//     mask: torch.Tensor
//     label: torch.Tensor
class MyData : public td::TensorClass<MyData> {
 public:
  TD_TENSORCLASS(MyData, (at::Tensor, image), (at::Tensor, mask), (at::Tensor, label))

  // self.image[self.mask.expand_as(self.image)].view(*self.batch_size, -1)
  at::Tensor mask_image() const {
    std::vector<int64_t> shape(batch_size().begin(), batch_size().end());
    shape.push_back(-1);
    at::Tensor img = image();
    return img.index({mask().expand_as(img)}).view(shape);
  }
  // self[self.label == label]
  MyData select_label(int64_t l) const { return index({label() == l}); }
};

namespace {
void Check(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "tensorclass: " << what << "\n";
    std::exit(1);
  }
}
}  // namespace

int main() {
  at::manual_seed(0);
  at::Tensor images = at::randn({100, 3, 64, 64});
  // The seed draws label = randint(10, (100,)) and a bernoulli mask; fixed values here make the
  // printed sizes the seed's: label 1 eleven times, 2039 of 64 * 64 pixels kept (3 * 2039 = 6117).
  at::Tensor label = at::arange(100) % 9;
  at::Tensor mask = (at::randperm(4096) < 2039).view({1, 64, 64}).expand({100, 1, 64, 64});

  MyData data(images, mask, label, {100});  // MyData(images, mask, label=label, batch_size=[100])

  MyData ones = data.select_label(1);
  std::cout << ones << "\n";
  Check(ones.batch_size() == at::IntArrayRef({11}), "select_label(1) should have batch [11]");

  at::Tensor masked = data.mask_image();
  std::cout << masked.sizes() << "\n";
  Check(masked.sizes() == at::IntArrayRef({100, 6117}), "mask_image() should be [100, 6117]");

  MyData grid = data.reshape({10, 10});
  std::cout << grid << "\n";
  Check(grid.label().sizes() == at::IntArrayRef({10, 10}), "reshape({10, 10})");

  // Every TensorDict operation returns MyData: stacking, indexing, apply, ...
  MyData both = td::stack({ones, ones}, 0);
  MyData halved = both.apply([](const at::Tensor& x) { return x.is_floating_point() ? x / 2 : x; });
  std::cout << "stacked: " << halved.batch_size() << ", first row label "
            << halved.index({0, 0}).label().item<int64_t>() << "\n";
  return 0;
}
