// TensorClasses shared by the td/tensorclass tests: the seeds' MyData, a class with every kind
// of field (nested class, TensorDict, non-tensor, optional), and their sample values.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/tensorclass/tensorclass.h"

namespace td {
namespace test {

class MyData : public TensorClass<MyData> {
 public:
  TD_TENSORCLASS(MyData, (at::Tensor, image), (at::Tensor, mask), (at::Tensor, label))

  at::Tensor mask_image() const {
    std::vector<int64_t> shape(batch_size().begin(), batch_size().end());
    shape.push_back(-1);
    at::Tensor img = image();
    return img.index({mask().expand_as(img)}).view(shape);
  }
  MyData select_label(int64_t l) const { return index({label() == l}); }
};

// The seed's data: 100 images [3, 64, 64], a mask [1, 64, 64] with exactly 2039 true pixels
// expanded over the batch, and labels 0..8 repeating (label 1 eleven times), so that
// select_label(1) has batch [11] and mask_image() shape [100, 3 * 2039 = 6117] as printed in
// the seeds' README.
struct SeedData {
  at::Tensor images, mask, label;
};
inline SeedData MakeSeedData() {
  at::manual_seed(0);
  SeedData d;
  d.images = at::randn({100, 3, 64, 64});
  d.label = at::arange(100) % 9;
  d.mask = (at::randperm(4096) < 2039).view({1, 64, 64}).expand({100, 1, 64, 64});
  return d;
}

// A nested class: batch [B, 2] inside Episode's [B].
class Step : public TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (std::string, tag))
};

class Episode : public TensorClass<Episode> {
 public:
  TD_TENSORCLASS(Episode, (at::Tensor, reward), (Step, step), (TensorDict, extra),
                 (std::string, name), (int64_t, seed), (double, gamma), (bool, done),
                 (nlohmann::json, info), (std::optional<at::Tensor>, weight))
  static std::string python_type() { return "my_pkg.Episode"; }
};

// Number fields of narrow types (values outside their range are refused, never wrapped).
class Counts : public TensorClass<Counts> {
 public:
  TD_TENSORCLASS(Counts, (int32_t, count), (uint8_t, small), (float, scale))
};

// Batch [4]: reward [4, 3], step batch [4, 2] (obs [4, 2, 5], tag "s"), extra {"x": [4]},
// name "ep", seed 7, gamma 0.5, done true, info {"k": [1, 2]}, no weight.
inline Episode SampleEpisode() {
  at::manual_seed(0);
  Step step(at::randn({4, 2, 5}), "s", {4, 2});
  return Episode(at::randn({4, 3}), step, TensorDict({{"x", at::arange(4.0)}}, {4}), "ep", 7, 0.5,
                 true, nlohmann::json{{"k", {1, 2}}}, std::nullopt, {4});
}

}  // namespace test
}  // namespace td
