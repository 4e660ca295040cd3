// @tensordict//td/tensorclass:data alone: ClassBatchLoader hands out batches of a class.
#include <ATen/ATen.h>

#include <cstdint>

#include "alone/check.h"
#include "td/tensorclass/data.h"

class Step : public td::TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs))
};

int main() {
  Step data(at::arange(10), {10});
  td::data::ClassBatchLoader loader(data, td::data::BatchOptions(4).shuffle(true));
  int64_t rows = 0;
  for (const Step& batch : loader) rows += batch.obs().size(0);
  REQUIRE(rows == 10);
  return 0;
}
