// An HDF5 TensorDict is a source like any other: memmap() writes it to a memmap directory,
// consolidate() into one buffer, both reading the file (a selection of its rows included).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/backends/h5/h5.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/consolidate/consolidate.h"
#include "td/core/testing.h"

namespace td {
namespace {

TensorDict Data() {
  return TensorDict({{"obs", at::arange(40, at::kFloat).view({10, 4})},
                     {"n", {{"a", at::arange(10, at::kLong)}}},
                     {"note", "text"}},
                    {10});
}

TEST(H5SourcesTest, MemmapAndConsolidateReadTheFile) {
  const std::string dir = testing_util::FreshDir("h5sources");
  h5::to_h5(Data(), dir + "/data.h5");
  const h5::H5TensorDict file = h5::open(dir + "/data.h5");

  TensorDict mapped = file.memmap(dir + "/mm");
  EXPECT_TRUE(mapped.is_memmap());
  assert_allclose(TensorDict::load_memmap(dir + "/mm").exclude({"note"}), Data().exclude({"note"}));
  EXPECT_EQ(TensorDict::load_memmap(dir + "/mm").get_non_tensor("note"), "text");

  const TensorDict rows = file.index({at::tensor({7, 2, 5}, at::kLong)});
  TensorDict rows_mapped = rows.memmap(dir + "/rows");
  assert_allclose(rows_mapped.exclude({"note"}),
                  Data().index({at::tensor({7, 2, 5}, at::kLong)}).exclude({"note"}));

  TensorDict c = consolidate(file.exclude({"note"}));
  EXPECT_TRUE(is_consolidated(c));
  assert_allclose(c, Data().exclude({"note"}));
  assert_allclose(consolidate(rows.exclude({"note"})),
                  Data().index({at::tensor({7, 2, 5}, at::kLong)}).exclude({"note"}));
}

}  // namespace
}  // namespace td
