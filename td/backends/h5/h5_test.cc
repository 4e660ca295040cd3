// The h5 backend: round trips, lazy reads of selected rows, writes to the file, read-only mode,
// attributes, and the named errors of bad files (NOTE [ HDF5 errors ] in h5_io.h).
#include "td/backends/h5/h5.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/backends/h5/h5_io.h"
#include "td/backends/memmap/test_util.h"
#include "td/compat/dtypes.h"
#include "td/core/storage.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::Slice;
using h5::internal::Guard;
using h5::internal::Hid;
using h5::internal::Lock;

std::string FreshFile(const std::string& name) {
  return testing_util::FreshDir("h5") + "/" + name + ".h5";
}

TensorDict Sample() {
  return TensorDict({{"obs", at::arange(24, at::kFloat).view({6, 4})},
                     {"action", at::arange(6, at::kLong) * 3},
                     {"done", at::tensor({0, 0, 1, 0, 0, 1}, at::kLong).to(at::kBool)},
                     {"half", (at::arange(12, at::kFloat) / 4).to(at::kHalf).view({6, 2})},
                     {"pix", at::arange(18, at::kByte).view({6, 3})},
                     {"next", {{"obs", at::arange(60, at::kDouble).view({6, 2, 5}) / 7},
                               {"reward", at::ones({6}, at::kInt)}}},
                     {"note", "hello"}},
                    {6});
}

void ExpectSame(const TensorDict& got, const TensorDict& want) {
  for (const NestedKey& k : want.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    const Value w = want.get_value(k);
    if (w.is_non_tensor()) {
      EXPECT_EQ(got.get_non_tensor(k), w.non_tensor()) << k;
      continue;
    }
    const at::Tensor g = got.get(k);
    EXPECT_EQ(g.scalar_type(), w.tensor().scalar_type()) << k;
    EXPECT_TRUE(at::equal(g, w.tensor())) << k << ": " << g << " vs " << w.tensor();
  }
}

TEST(H5Test, RoundTripKeepsKeysOrderDtypesAndValues) {
  const std::string path = FreshFile("rt");
  TensorDict data = Sample();
  data.set("meta", NonTensorData(nlohmann::json{{"env", "Lift"}, {"n", 3}}));
  {
    h5::H5TensorDict out = h5::to_h5(data, path);
    EXPECT_EQ(out.backend(), "h5");
    EXPECT_EQ(out.filename(), path);
    EXPECT_EQ(out.mode(), h5::Mode::kReadWrite);
  }
  h5::H5TensorDict in = h5::open(path);
  EXPECT_EQ(in.mode(), h5::Mode::kReadOnly);
  EXPECT_EQ(in.batch_size(), at::IntArrayRef({6}));
  EXPECT_EQ(in.keys(), data.keys());  // creation order
  EXPECT_EQ(in.get_tensordict("next").batch_size(), at::IntArrayRef({6}));
  ExpectSame(in, data);
  EXPECT_EQ(in.get_non_tensor("meta")["env"], "Lift");
  TensorDict dense = h5::from_h5(path);
  EXPECT_EQ(dense.backend(), "dense");
  ExpectSame(dense, data);
  EXPECT_FALSE(h5::H5TensorDict::from(dense).has_value());
  EXPECT_EQ(h5::H5TensorDict::from(in.get_tensordict("next"))->group(), "/next");
}

// copy_ / update_ from a TensorDict holding the same non-tensor values leave those entries
// where they are: the file's key order (creation order) does not change.
TEST(H5Test, CopyKeepsKeyOrder) {
  const std::string path = FreshFile("order");
  const TensorDict data = Sample();
  {
    h5::H5TensorDict out = h5::to_h5(data, path);
    out.copy_(data.apply([](const at::Tensor& t) { return t.clone(); }));
    out.update_(data);
    EXPECT_EQ(out.keys(), data.keys());
  }
  EXPECT_EQ(h5::open(path).keys(), data.keys());
  h5::H5TensorDict rw = h5::open(path, h5::OpenOptions().mode(h5::Mode::kReadWrite));
  TensorDict changed = data.clone();
  changed.set("note", "bye");  // a new value is rewritten (and moves last in the file)
  rw.update_(changed);
  EXPECT_EQ(rw.get_non_tensor("note"), "bye");
}

TEST(H5Test, BatchSizeIsStoredGivenOrInferred) {
  const std::string path = FreshFile("batch");
  TensorDict data({{"x", at::zeros({4, 3, 2})}, {"n", {{"y", at::zeros({4, 3, 5})}}}}, {4});
  h5::to_h5(data, path);
  EXPECT_EQ(h5::open(path).batch_size(), at::IntArrayRef({4}));  // the stored one
  {
    h5::H5TensorDict given =
        h5::open(path, h5::OpenOptions().batch_size(std::vector<int64_t>{4, 3}));
    EXPECT_EQ(given.batch_size(), at::IntArrayRef({4, 3}));
    EXPECT_EQ(given.get_tensordict("n").batch_size(), at::IntArrayRef({4, 3}));
  }  // closed: HDF5 opens a file read-write only when no handle has it read-only
  // Without the attribute (as h5py writes): upstream's inference, the longest common prefix.
  {
    Guard guard(Lock());
    Hid f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Adelete(f.get(), h5::internal::kMetaAttr);
    H5Adelete_by_name(f.get(), "n", h5::internal::kMetaAttr, H5P_DEFAULT);
  }
  h5::H5TensorDict inferred = h5::open(path);
  EXPECT_EQ(inferred.batch_size(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(inferred.get_tensordict("n").batch_size(), at::IntArrayRef({4, 3, 5}));
  TD_EXPECT_THROW_MSG(h5::open(path, h5::OpenOptions().batch_size(std::vector<int64_t>{3})),
                      h5::H5Error, {path, "'n/y'", "[4, 3, 5]", "[3]"});
}

// A gzip chunk of one row is destroyed on disk: reading the other rows through an index still
// works, so an index reads only its rows; reading the broken row or the whole key fails by name.
TEST(H5Test, IndexReadsOnlyTheSelectedRows) {
  const std::string path = FreshFile("rows");
  TensorDict data({{"x", at::arange(40, at::kFloat).view({10, 4})}}, {10});
  h5::to_h5(data, path, h5::ToH5Options().datasets(
                            h5::DatasetOptions().compression("gzip").chunk_rows(1)));
  haddr_t addr = 0;
  hsize_t size = 0;
  {
    Guard guard(Lock());
    Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Hid ds(H5Dopen2(f.get(), "/x", H5P_DEFAULT));
    const hsize_t offset[2] = {5, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(ds.get(), offset, &mask, &addr, &size), 0);
  }
  ASSERT_GT(size, 0u);
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::vector<char> junk(size, '\x5a');
  ASSERT_EQ(::pwrite(fd, junk.data(), size, static_cast<off_t>(addr)), static_cast<ssize_t>(size));
  ::close(fd);

  h5::H5TensorDict in = h5::open(path);
  TensorDict rows = in.index({at::tensor({7, 3, 9, 3}, at::kLong)});
  EXPECT_EQ(rows.backend(), "h5");
  EXPECT_TRUE(h5::H5TensorDict::from(rows)->is_selection());
  EXPECT_TRUE(rows.get("x").equal(data.get("x").index({at::tensor({7, 3, 9, 3}, at::kLong)})));
  EXPECT_TRUE(in.index({Slice(6, 10, 2)}).get("x").equal(data.get("x").index({Slice(6, 10, 2)})));
  EXPECT_TRUE(in.index({Slice(0, 5)}).index({-1}).get("x").equal(data.get("x")[4]));
  TD_EXPECT_THROW_MSG(in.index({5}).get("x"), h5::H5Error, {path, "'x'"});
  TD_EXPECT_THROW_MSG(in.get("x"), h5::H5Error, {path, "'x'"});
}

TEST(H5Test, WritesGoToTheFile) {
  const std::string path = FreshFile("writes");
  TensorDict data = Sample();
  {
    h5::H5TensorDict f = h5::to_h5(data, path);
    f.set_("obs", at::full({6, 4}, 2.0));
    f.index_put_({at::tensor({4, 1}, at::kLong)}, TensorDict({{"action", at::tensor({40, 10}, at::kLong)}}, {2}));
    f.index({Slice(0, 2)}).set_({"next", "reward"}, at::full({2}, 9, at::kInt));
    f.index({3}).set("fresh", at::ones({2}));  // a new key through a selection: full size
    f.set("pix", at::zeros({6, 5}, at::kDouble));  // replaced: another shape and dtype
    f.del_("half");
    f.rename_key_("done", "terminal");
    f.set("note", "bye");
    f.set_attr("env", "Lift");
    f.set_attr("ids", nlohmann::json::array({1, 2, 3}), "obs");
  }
  h5::H5TensorDict in = h5::open(path);
  EXPECT_TRUE(in.get("obs").equal(at::full({6, 4}, 2.0)));
  EXPECT_TRUE(in.get("action").equal(at::tensor({0, 10, 6, 9, 40, 15}, at::kLong)));
  EXPECT_TRUE(in.get({"next", "reward"}).equal(at::tensor({9, 9, 1, 1, 1, 1}, at::kInt)));
  at::Tensor fresh = at::zeros({6, 2});
  fresh[3] = 1;
  EXPECT_TRUE(in.get("fresh").equal(fresh));
  EXPECT_EQ(in.get("pix").scalar_type(), at::kDouble);
  EXPECT_FALSE(in.contains("half"));
  EXPECT_TRUE(in.get("terminal").equal(data.get("done")));
  EXPECT_EQ(in.get_non_tensor("note"), "bye");
  EXPECT_EQ(in.attrs()["env"], "Lift");
  EXPECT_EQ(in.attrs("obs")["ids"], nlohmann::json::array({1, 2, 3}));
  TD_EXPECT_THROW_MSG(in.attrs("zz"), KeyError, {"'zz'", path});
}

TEST(H5Test, ReadOnlyRefusesEveryWrite) {
  const std::string path = FreshFile("ro");
  h5::to_h5(Sample(), path);
  h5::H5TensorDict in = h5::open(path);
  EXPECT_FALSE(in.storage().capabilities().has(Capability::kInPlaceWrite));
  TD_EXPECT_THROW_MSG(in.set("z", at::zeros({6})), KeyError, {"'z'", "'h5'", "new keys"});
  TD_EXPECT_THROW_MSG(in.set_("obs", at::zeros({6, 4})), c10::ValueError, {"'obs'", "read-only"});
  TD_EXPECT_THROW_MSG(in.del_("obs"), c10::ValueError, {"'obs'", "read-only"});
  TD_EXPECT_THROW_MSG(in.set_attr("a", 1), c10::ValueError, {"read-only"});
  EXPECT_TRUE(in.get("obs").equal(Sample().get("obs")));
}

// Creates `path` with the raw HDF5 API: a dataset "x" [4, 2] plus what `add` makes.
template <class Fn>
void MakeFile(const std::string& path, Fn add) {
  Guard guard(Lock());
  Hid f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  const hsize_t dims[2] = {4, 2};
  Hid space(H5Screate_simple(2, dims, nullptr));
  Hid ds(H5Dcreate2(f.get(), "x", H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                    H5P_DEFAULT));
  add(f.get());
}

TEST(H5Test, BadFilesAreNamedErrors) {
  const std::string missing = FreshFile("missing");
  TD_EXPECT_THROW_MSG(h5::open(missing), h5::H5Error, {missing, "does not exist"});
  const std::string text = FreshFile("text");
  testing_util::WriteText(text, "not an HDF5 file at all");
  TD_EXPECT_THROW_MSG(h5::open(text), h5::H5Error, {text, "cannot open"});
  // Truncated: HDF5 compares the end of file with the one its superblock records.
  const std::string cut = FreshFile("cut");
  h5::to_h5(TensorDict({{"x", at::zeros({1000, 8})}}, {1000}), cut);
  ASSERT_EQ(::truncate(cut.c_str(), testing_util::FileSizeOf(cut) / 2), 0);
  TD_EXPECT_THROW_MSG(h5::open(cut), h5::H5Error, {cut, "truncated"});
  // Leading dims that disagree with the stored batch size.
  const std::string mismatch = FreshFile("mismatch");
  MakeFile(mismatch, [](hid_t f) {
    const hsize_t d = 3;
    Hid space(H5Screate_simple(1, &d, nullptr));
    Hid ds(H5Dcreate2(f, "y", H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT));
    ASSERT_TRUE(h5::internal::WriteBatchAttr(f, "/", {4}).ok());
  });
  TD_EXPECT_THROW_MSG(h5::open(mismatch), h5::H5Error, {mismatch, "'y'", "[3]", "[4]"});
  TD_EXPECT_THROW_MSG(h5::open(mismatch, h5::OpenOptions().group("nope")), h5::H5Error,
                      {mismatch, "no group '/nope'"});
  // Unsupported dtypes: a variable-length sequence and a compound (h5py's complex) in a tensor's
  // place; an unsigned 32-bit integer where LibTorch has no uint32.
  const std::string vlen = FreshFile("vlen");
  MakeFile(vlen, [](hid_t f) {
    const hsize_t d = 4;
    Hid space(H5Screate_simple(1, &d, nullptr));
    Hid type(H5Tvlen_create(H5T_NATIVE_INT));
    Hid ds(H5Dcreate2(f, "seq", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  TD_EXPECT_THROW_MSG(h5::open(vlen), h5::H5Error, {vlen, "'seq'", "variable-length", "[4]"});
  const std::string compound = FreshFile("compound");
  MakeFile(compound, [](hid_t f) {
    const hsize_t d = 4;
    Hid space(H5Screate_simple(1, &d, nullptr));
    Hid type(H5Tcreate(H5T_COMPOUND, 8));
    H5Tinsert(type.get(), "r", 0, H5T_NATIVE_FLOAT);
    H5Tinsert(type.get(), "i", 4, H5T_NATIVE_FLOAT);
    Hid ds(H5Dcreate2(f, "z", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  TD_EXPECT_THROW_MSG(h5::open(compound), h5::H5Error, {compound, "'z'", "compound"});
  const std::string u32 = FreshFile("u32");
  MakeFile(u32, [](hid_t f) {
    const hsize_t d = 4;
    Hid space(H5Screate_simple(1, &d, nullptr));
    Hid ds(H5Dcreate2(f, "u", H5T_NATIVE_UINT32, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT));
  });
  if (std::optional<at::ScalarType> uint32 = compat::NewerDtype("torch.uint32")) {
    EXPECT_EQ(h5::from_h5(u32).get("u").scalar_type(), *uint32);
  } else {
    // NOTE [ Dtypes by LibTorch version ] in td/compat/dtypes.h.
    TD_EXPECT_THROW_MSG(h5::open(u32), h5::H5Error,
                        {u32, "'u'", "unsigned 32-bit",
                         compat::NoSuchDtypeMessage(*compat::FindNewerDtype("torch.uint32"))});
  }
  // Links: external (leaves the file), soft and dangling, a hard link cycle.
  const std::string ext = FreshFile("ext");
  MakeFile(ext, [](hid_t f) {
    H5Lcreate_external("other.h5", "/data", f, "outside", H5P_DEFAULT, H5P_DEFAULT);
  });
  TD_EXPECT_THROW_MSG(h5::open(ext), h5::H5Error, {ext, "'outside'", "other.h5", "external"});
  const std::string soft = FreshFile("soft");
  MakeFile(soft, [](hid_t f) {
    H5Lcreate_soft("/nowhere", f, "dangling", H5P_DEFAULT, H5P_DEFAULT);
  });
  TD_EXPECT_THROW_MSG(h5::open(soft), h5::H5Error, {soft, "'dangling'", "/nowhere", "dangles"});
  const std::string cycle = FreshFile("cycle");
  MakeFile(cycle, [](hid_t f) {
    Hid g(H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Lcreate_hard(f, "/g", g.get(), "back", H5P_DEFAULT, H5P_DEFAULT);
  });
  TD_EXPECT_THROW_MSG(h5::open(cycle), h5::H5Error, {cycle, "'g/back'", "cycle"});
  // A soft link inside the file is followed.
  const std::string good = FreshFile("good");
  MakeFile(good, [](hid_t f) { H5Lcreate_soft("/x", f, "alias", H5P_DEFAULT, H5P_DEFAULT); });
  EXPECT_EQ(h5::open(good).keys(), (std::vector<NestedKey>{"alias", "x"}));  // name order
}

TEST(H5Test, StringsAreNonTensorData) {
  const std::string path = FreshFile("strings");
  MakeFile(path, [](hid_t f) {
    Hid type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), 5);
    const hsize_t d = 2;
    Hid space(H5Screate_simple(1, &d, nullptr));
    Hid ds(H5Dcreate2(f, "names", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT));
    const char data[] = "demo0demo1";
    H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  });
  h5::H5TensorDict in = h5::open(path);
  EXPECT_EQ(in.batch_size(), at::IntArrayRef({4, 2}));  // strings take no part in the batch size
  EXPECT_EQ(in.get_non_tensor("names"), nlohmann::json::array({"demo0", "demo1"}));
  // In a tensor's place they are a TypeError naming the key.
  TD_EXPECT_THROW_MSG(in.get("names"), c10::TypeError, {"'names'"});
}

TEST(H5Test, NonTensorDataIsStoredInUpstreamsForm) {
  // NOTE [ HDF5 layout ] in h5.h: strings as strings, numpy-able values as h5py's tagged opaque
  // data (NOTE [ HDF5 opaque data ] in npy_opaque.h), the rest as JSON text.
  const std::string path = FreshFile("nontensor");
  const std::vector<std::pair<std::string, nlohmann::json>> values = {
      {"int", 5}, {"float", 1.5}, {"bool", false}, {"ints", nlohmann::json::parse("[1, 2, 3]")},
      {"mixed", nlohmann::json::parse("[1, 2.5]")},
      {"strs", nlohmann::json::parse(R"(["a", "b\u00e9"])")}, {"str", "text"},
      {"dict", nlohmann::json::parse(R"({"a": [1, null]})")}, {"null", nullptr},
      {"ragged", nlohmann::json::parse("[[1], [2, 3]]")}};
  const std::map<std::string, std::string> tags = {
      {"int", "NUMPY:<i8"}, {"float", "NUMPY:<f8"}, {"bool", "NUMPY:|b1"},
      {"ints", "NUMPY:<i8"}, {"mixed", "NUMPY:<f8"}, {"strs", "NUMPY:<U2"}};
  {
    h5::H5TensorDict out = h5::to_h5(TensorDict({{"x", at::zeros({2})}}, {2}), path);
    for (const auto& [k, v] : values) {
      out.set_non_tensor(k, v);
      EXPECT_EQ(out.get_non_tensor(k), v) << k;  // through the open file's own tree
    }
  }
  h5::H5TensorDict in = h5::open(path);
  EXPECT_EQ(in.batch_size(), at::IntArrayRef({2}));
  for (const auto& [k, v] : values) EXPECT_EQ(in.get_non_tensor(k), v) << k;
  EXPECT_TRUE(in.get_non_tensor("int").is_number_integer());
  Guard guard(Lock());
  Hid f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  for (const auto& [k, v] : values) {
    Hid ds(H5Dopen2(f.get(), k.c_str(), H5P_DEFAULT));
    Hid type(H5Dget_type(ds.get()));
    const auto tag = tags.find(k);
    if (tag == tags.end()) {
      EXPECT_EQ(H5Tget_class(type.get()), H5T_STRING) << k;
      EXPECT_EQ(H5Aexists(ds.get(), "tensordict_json") > 0, k != "str") << k;
      continue;
    }
    ASSERT_EQ(H5Tget_class(type.get()), H5T_OPAQUE) << k;
    char* got = H5Tget_tag(type.get());
    EXPECT_EQ(std::string(got), tag->second) << k;
    H5free_memory(got);
  }
}

TEST(H5Test, FactoryOpensANewFileById) {
  const std::string path = FreshFile("byid");
  TensorDict t = MakeTensorDict("h5", StorageSpec().batch_size({3}).path(path));
  t.set("x", at::ones({3, 2}));
  t.set({"n", "y"}, at::zeros({3}));
  EXPECT_EQ(h5::H5TensorDict::from(t)->filename(), path);
  t = TensorDict();
  ExpectSame(h5::open(path), TensorDict({{"x", at::ones({3, 2})}, {"n", {{"y", at::zeros({3})}}}},
                                        {3}));
  TD_EXPECT_THROW_MSG(MakeTensorDict("h5", StorageSpec().batch_size({3}).path(path)), c10::Error,
                      {path, "exists"});
}

}  // namespace
}  // namespace td
