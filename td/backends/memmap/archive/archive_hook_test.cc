// TensorDict::load_memmap opens a memmap archive in a program that links
// //td/backends/memmap/archive and calls nothing of it (NOTE [ load_memmap of an archive ] in
// td/backends/memmap/archive_hook.h): the library is alwayslink, so its slot is filled whether or
// not the linker needs its symbols.
// The archive is written by testdata/archive_fixture.py (upstream's layout); needs
// /usr/bin/python3 (standard library only), skipped, saying so, without it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "td/backends/memmap/test_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

TEST(ArchiveHook, LoadMemmapOpensAnArchive) {
  if (std::system("/usr/bin/python3 -c 'import zipfile' 2>/dev/null") != 0) {
    GTEST_SKIP() << "no /usr/bin/python3";
  }
  const std::string path = testing_util::FreshDir("hook") + "/py.tdz";
  ASSERT_EQ(std::system(("/usr/bin/python3 td/backends/memmap/archive/testdata/archive_fixture.py "
                         "write " + path)
                            .c_str()),
            0);
  TensorDict got = TensorDict::load_memmap(path);
  EXPECT_EQ(got.batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_TRUE(got.get("obs").equal(at::arange(12, at::kFloat).view({4, 3})));
  EXPECT_TRUE(got.get({"next", "r"}).equal(at::tensor({10, 20, 30, 40}, at::kLong)));
  EXPECT_EQ(got.get_non_tensor("note"), "hi");
}

}  // namespace
}  // namespace td
