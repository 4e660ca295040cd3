// HDF5 files across languages, with Debian's python3-h5py: h5py writes a file in upstream's
// PersistentTensorDict layout (testdata/h5_fixture.py) that we read, and reads one we write. When
// /usr/bin/python3 has no h5py the tests are skipped, saying so (tools/install_deps.sh installs
// python3-h5py, so CI runs them).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"

#include "td/backends/h5/h5.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

const char kScript[] = "td/backends/h5/testdata/h5_fixture.py";

// "/usr/bin/python3" when it imports h5py, else "".
std::string PythonWithH5py() {
  return std::system("/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null") == 0
             ? "/usr/bin/python3"
             : "";
}

#define TD_REQUIRE_H5PY(py)                                                                    \
  const std::string py = PythonWithH5py();                                                     \
  if (py.empty()) {                                                                            \
    GTEST_SKIP() << "/usr/bin/python3 cannot import h5py (Debian: apt-get install python3-h5py)"; \
  }

// h5_fixture.py's complex non-tensor [1+2j, -0.5j] as the description the h5 backend reads an
// opaque dataset it cannot decode as (NOTE [ HDF5 opaque data ] in npy_opaque.h).
nlohmann::json ComplexDescription() {
  const double parts[] = {1.0, 2.0, -0.0, -0.5};  // numpy's <c16: (real, imag) pairs
  std::string bytes(sizeof(parts), '\0');
  std::memcpy(bytes.data(), parts, sizeof(parts));
  return {{"hdf5_opaque",
           {{"tag", "NUMPY:<c16"}, {"shape", nlohmann::json::array({2})}, {"item_size", 16},
            {"base64", absl::Base64Escape(bytes)}}}};
}

// What h5_fixture.py's expected() holds.
TensorDict Expected() {
  TensorDict td({{"a", at::arange(12, at::kFloat).view({3, 4})},
                     {"b", at::arange(3, at::kLong) * 7},
                     {"n",
                      {{"x", at::arange(30, at::kDouble).view({3, 2, 5}) / 4},
                       {"h", at::full({3, 3}, 1.5, at::kHalf)}}},
                     {"flag", at::tensor({1, 0, 1}, at::kLong).to(at::kBool)},
                     {"pix", at::arange(6, at::kByte).view({3, 2})},
                     {"odd", at::arange(3, at::kShort)},
                     {"note", "hello"}},
                    {3});
  // Non-tensor data upstream v0.14 stores as numpy's bytes in tagged opaque datasets.
  td.set_non_tensor("count", 5);
  td.set_non_tensor("neg", -3);
  td.set_non_tensor("ratio", 1.5);
  td.set_non_tensor("done", true);
  td.set_non_tensor("ids", nlohmann::json::array({1, 2, 3}));
  td.set_non_tensor("grid", nlohmann::json::array({nlohmann::json::array({1, 2}),
                                                   nlohmann::json::array({3, 4})}));
  td.set_non_tensor("names", nlohmann::json::array({"a", "bc"}));
  td.set_non_tensor("z", ComplexDescription());
  return td;
}

void ExpectEqual(const TensorDict& got, const TensorDict& want) {
  EXPECT_EQ(got.batch_size(), want.batch_size());
  for (const NestedKey& k : want.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    Value w = want.get_value(k);
    if (w.is_non_tensor()) {
      const nlohmann::json g = got.get_non_tensor(k);
      EXPECT_EQ(g, w.non_tensor()) << k;
      // The int 5 reads as an int, not as the float 5.0 (or the string "5").
      EXPECT_EQ(g.type(), w.non_tensor().type() == nlohmann::json::value_t::number_unsigned
                              ? nlohmann::json::value_t::number_integer
                              : w.non_tensor().type())
          << k;
      continue;
    }
    at::Tensor g = got.get(k);
    EXPECT_EQ(g.scalar_type(), w.tensor().scalar_type()) << k;
    EXPECT_TRUE(at::equal(g, w.tensor())) << k;
  }
  EXPECT_EQ(got.keys(KeysOptions().include_nested(true)).size(),
            want.keys(KeysOptions().include_nested(true)).size());
}

TEST(H5FileCompat, H5pyWritesWeRead) {
  TD_REQUIRE_H5PY(py);
  const std::string path = testing_util::FreshDir("h5compat") + "/py.h5";
  ASSERT_EQ(std::system((py + " " + kScript + " write " + path).c_str()), 0);
  h5::H5TensorDict in = h5::open(path);
  ExpectEqual(in, Expected());  // batch [3] inferred as upstream's from_h5 does
  // h5py's groups keep no creation order: name order, as h5py lists them.
  EXPECT_EQ(in.keys(), (std::vector<NestedKey>{"a", "b", "count", "done", "flag", "grid", "ids",
                                               "n", "names", "neg", "note", "odd", "pix", "ratio",
                                               "z"}));
  EXPECT_EQ(in.attrs()["env_args"], R"({"env_name": "Lift", "type": 1})");
  EXPECT_EQ(in.attrs()["total"], 3);
  EXPECT_EQ(in.attrs("n")["scale"], 0.25);
  EXPECT_EQ(in.attrs("a")["ids"], nlohmann::json::array({4, 5, 6}));
  ExpectEqual(in.index({at::tensor({2, 0}, at::kLong)}), Expected().index({at::tensor({2, 0}, at::kLong)}));
  ExpectEqual(h5::from_h5(path), Expected());
}

TEST(H5FileCompat, WeWriteH5pyReads) {
  TD_REQUIRE_H5PY(py);
  const std::string path = testing_util::FreshDir("h5compat") + "/cc.h5";
  {
    h5::H5TensorDict out = h5::to_h5(Expected(), path);
    out.set_attr("env", "Lift");
  }  // closed before h5py opens it (HDF5 locks files open for writing)
  EXPECT_EQ(std::system((py + " " + kScript + " check " + path).c_str()), 0);
  // gzip-compressed datasets read the same in h5py.
  {
    h5::H5TensorDict out = h5::to_h5(
        Expected(), path, h5::ToH5Options().datasets(h5::DatasetOptions().compression("gzip")));
    out.set_attr("env", "Lift");
  }
  EXPECT_EQ(std::system((py + " " + kScript + " check " + path).c_str()), 0);
}

TEST(H5FileCompat, RobomimicFileOpensByGroup) {
  TD_REQUIRE_H5PY(py);
  const std::string path = testing_util::FreshDir("h5compat") + "/robomimic.hdf5";
  ASSERT_EQ(std::system((py + " " + kScript + " robomimic " + path + " 3 10").c_str()), 0);
  h5::H5TensorDict whole = h5::open(path);
  EXPECT_EQ(whole.get_non_tensor({"mask", "train"}),
            nlohmann::json::array({"demo_0", "demo_1", "demo_2"}));
  h5::H5TensorDict demo = h5::open(path, h5::OpenOptions().group("data/demo_1"));
  EXPECT_EQ(demo.batch_size(), at::IntArrayRef({13}));
  EXPECT_EQ(demo.attrs()["num_samples"], 13);
  EXPECT_EQ(demo.get({"obs", "img"}).sizes(), at::IntArrayRef({13, 4, 4}));
  EXPECT_TRUE(demo.get("actions").equal(at::ones({13, 2}, at::kDouble)));
  EXPECT_EQ(demo.get("dones")[12].item<int64_t>(), 1);
}

}  // namespace
}  // namespace td
