// @tensordict//td/core:dtype alone.
#include <vector>

#include "alone/check.h"
#include "td/core/dtype.h"

int main() {
  REQUIRE(td::DtypeName(c10::ScalarType::Float) == "torch.float32");
  REQUIRE(td::SizeRepr(std::vector<int64_t>{3, 4}) == "torch.Size([3, 4])");
  return 0;
}
