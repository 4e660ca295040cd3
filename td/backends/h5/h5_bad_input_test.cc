// The h5 backend on input that other writers (or a hostile file) can produce: keys that are not
// one HDF5 name, the layout's reserved attribute names, h5py bools holding other bytes, empty
// attributes, JSON nested deep enough to exhaust a recursive parser, opaque data of any tag and
// size, shapes of any size. Each is read faithfully or refused with an error naming the file and
// the key.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "td/backends/h5/h5.h"
#include "td/backends/h5/h5_io.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

using h5::internal::Guard;
using h5::internal::Hid;
using h5::internal::Lock;
using at::indexing::Slice;

std::string FreshFile(const std::string& name) {
  return testing_util::FreshDir("h5bad") + "/" + name + ".h5";
}

// A new file with what `add` writes through the HDF5 API.
template <class Fn>
void MakeFile(const std::string& path, Fn add) {
  Guard guard(Lock());
  Hid f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(f.ok());
  add(f.get());
}

// h5py's bool type: an enum of int8 {FALSE = 0, TRUE = 1}.
Hid BoolType() {
  Hid t(H5Tenum_create(H5T_NATIVE_INT8));
  int8_t v = 0;
  H5Tenum_insert(t.get(), "FALSE", &v);
  v = 1;
  H5Tenum_insert(t.get(), "TRUE", &v);
  return t;
}

TEST(H5BadInput, KeysThatAreNotOneHdf5NameAreRefused) {
  const std::string path = FreshFile("slash");
  h5::H5TensorDict f = h5::to_h5(TensorDict({{"a", {{"x", at::zeros({2})}}}}, {2}), path);
  // Written unescaped, "a/y" would land in the group "a" and read back as ('a', 'y').
  TD_EXPECT_THROW_MSG(f.set("a/y", at::ones({2})), ValueError, {path, "'a/y'", "'/'"});
  TD_EXPECT_THROW_MSG(f.set(NestedKey({"a", "."}), at::ones({2})), ValueError,
                      {"('a', '.')"});
  TD_EXPECT_THROW_MSG(f.rename_key_("a", "b/c"), ValueError, {"'b/c'"});
  EXPECT_EQ(f.get_tensordict("a").keys(), (std::vector<NestedKey>{"x"}));
  f.flush();
  EXPECT_EQ(h5::open(path).keys(KeysOptions().include_nested(true)),
            (std::vector<NestedKey>{"a", {"a", "x"}}));
  // to_h5 refuses it before leaving a file behind.
  const std::string other = FreshFile("slash2");
  TD_EXPECT_THROW_MSG(h5::to_h5(TensorDict({{"p/q", at::zeros({2})}}, {2}), other), ValueError,
                      {"'p/q'"});
  EXPECT_FALSE(testing_util::Exists(other));
}

TEST(H5BadInput, ReservedAttributeNamesAreRefused) {
  const std::string path = FreshFile("reserved");
  h5::H5TensorDict f = h5::to_h5(TensorDict({{"x", at::zeros({2})}}, {2}), path);
  TD_EXPECT_THROW_MSG(f.set_attr("__tensordict__", "x"), ValueError,
                      {"'__tensordict__'", path, "reserved"});
  TD_EXPECT_THROW_MSG(f.set_attr("tensordict_json", 1, "x"), ValueError, {"'tensordict_json'"});
  f.flush();
  EXPECT_EQ(h5::open(path).batch_size().vec(), std::vector<int64_t>{2});  // still opens
}

TEST(H5BadInput, BoolsHoldingOtherBytesReadAsTrue) {
  const std::string path = FreshFile("bools");
  MakeFile(path, [](hid_t f) {
    Hid type = BoolType();
    const hsize_t d = 4;
    Hid space(H5Screate_simple(1, &d, nullptr));
    const int8_t raw[4] = {0, 1, 5, -1};  // written as they are: the memory type is the file's
    Hid ds(H5Dcreate2(f, "flag", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw), 0);
    Hid attr(H5Acreate2(f, "b", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(attr.get(), type.get(), raw), 0);
  });
  h5::H5TensorDict f = h5::open(path);
  const at::Tensor flag = f.get("flag");
  ASSERT_EQ(flag.scalar_type(), at::kBool);
  // The bytes of the bool tensor: 0 or 1 only.
  EXPECT_TRUE(flag.view(at::kByte).equal(at::tensor({0, 1, 1, 1}, at::kByte)));
  EXPECT_TRUE(f.index({at::tensor({2, 0})}).get("flag").view(at::kByte).equal(
      at::tensor({1, 0}, at::kByte)));
  EXPECT_EQ(f.attrs()["b"], nlohmann::json::array({false, true, true, true}));
}

TEST(H5BadInput, EmptyAttributesReadAsNull) {
  const std::string path = FreshFile("empty");
  MakeFile(path, [](hid_t f) {
    Hid space(H5Screate(H5S_NULL));
    Hid a(H5Acreate2(f, "nothing", H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    Hid s(H5Tcopy(H5T_C_S1));
    H5Tset_size(s.get(), H5T_VARIABLE);
    Hid b(H5Acreate2(f, "no_text", s.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  });
  EXPECT_EQ(h5::open(path).attrs(), (nlohmann::json{{"no_text", nullptr}, {"nothing", nullptr}}));
  // And null writes one.
  h5::H5TensorDict f = h5::open(path, h5::OpenOptions().mode(h5::Mode::kReadWrite));
  f.set_attr("written", nullptr);
  EXPECT_TRUE(f.attrs().contains("written"));
  EXPECT_TRUE(f.attrs()["written"].is_null());
}

TEST(H5BadInput, DeeplyNestedJsonIsRefused) {
  // Well-formed: nlohmann/json parses it, then its dump and copies recurse once per level.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string attr = FreshFile("deep_attr");
  MakeFile(attr, [&](hid_t f) {
    const std::string meta = "{\"batch_size\": [], \"x\": " + deep + "}";
    ASSERT_TRUE(h5::internal::WriteAttr(f, "/", h5::internal::kMetaAttr, meta).ok());
  });
  TD_EXPECT_THROW_MSG(h5::open(attr), h5::H5Error, {attr, "__tensordict__", "nested deeper"});
  const std::string data = FreshFile("deep_data");
  MakeFile(data, [&](hid_t f) {
    ASSERT_TRUE(h5::internal::WriteNonTensor(f, "/j", nlohmann::json(deep)).ok());
    ASSERT_TRUE(h5::internal::WriteAttr(f, "/j", h5::internal::kJsonAttr, 1).ok());
  });
  h5::H5TensorDict f = h5::open(data);
  TD_EXPECT_THROW_MSG(f.get_non_tensor("j"), h5::H5Error, {data, "'j'", "nested deeper"});
}

// An opaque dataset of `n` items of 4 bytes tagged `tag` ("" for none), unwritten (zeros).
void AddOpaque(hid_t f, const char* name, const char* tag, hsize_t n) {
  Hid type(H5Tcreate(H5T_OPAQUE, 4));
  if (tag[0] != '\0') {
    ASSERT_GE(H5Tset_tag(type.get(), tag), 0);
  }
  Hid space(H5Screate_simple(1, &n, nullptr));
  Hid ds(H5Dcreate2(f, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(ds.ok());
}

TEST(H5BadInput, OpaqueDataOfAnyTagOpensTheFile) {
  // Before NOTE [ HDF5 opaque data ] (npy_opaque.h), any opaque dataset refused the whole file.
  const std::string path = FreshFile("opaque");
  MakeFile(path, [](hid_t f) {
    Hid x(H5Dcreate2(f, "x", H5T_NATIVE_FLOAT, Hid(H5Screate(H5S_SCALAR)).get(), H5P_DEFAULT,
                     H5P_DEFAULT, H5P_DEFAULT));
    AddOpaque(f, "i4", "NUMPY:<i4", 2);
    AddOpaque(f, "raw", "", 1);                      // no tag: h5py's np.void
    AddOpaque(f, "odd", "NUMPY:<i8", 1);             // 4 bytes for an int64
    AddOpaque(f, "huge", "NUMPY:<i4", hsize_t{20} << 20);  // 80 MiB, never allocated
  });
  h5::H5TensorDict f = h5::open(path);
  EXPECT_EQ(f.batch_size().vec(), std::vector<int64_t>{});  // non-tensor data is left out
  EXPECT_EQ(f.get_non_tensor("i4"), nlohmann::json::array({0, 0}));
  const nlohmann::json raw = f.get_non_tensor("raw");
  EXPECT_EQ(raw["hdf5_opaque"]["tag"], "");
  EXPECT_EQ(raw["hdf5_opaque"]["base64"], "AAAAAA==");
  EXPECT_EQ(f.get_non_tensor("odd")["hdf5_opaque"]["item_size"], 4);
  TD_EXPECT_THROW_MSG(f.get_non_tensor("huge"), h5::H5Error,
                      {path, "'huge'", "NUMPY:<i4", "[20971520]", "64 MiB"});
}

TEST(H5BadInput, MalformedOpaqueDescriptionsAreRefusedKeepingTheEntry) {
  const std::string path = FreshFile("describe");
  h5::H5TensorDict f = h5::to_h5(TensorDict({{"x", at::zeros({2})}}, {2}), path);
  f.set_non_tensor("n", 5);
  const nlohmann::json bad = {{"hdf5_opaque", {{"tag", "NUMPY:<i8"}, {"shape", {1}}}}};
  TD_EXPECT_THROW_MSG(f.set_non_tensor("n", bad), ValueError, {path, "'n'", "hdf5_opaque",
                                                                "\"item_size\""});
  EXPECT_EQ(f.get_non_tensor("n"), 5);
  f.flush();
  EXPECT_EQ(h5::open(path).get_non_tensor("n"), 5);
}

// A float32 dataset of `dims`, chunked and never written: HDF5 stores no element of it.
void AddHuge(hid_t f, const char* name, const std::vector<hsize_t>& dims) {
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  std::vector<hsize_t> chunk;
  for (hsize_t d : dims) chunk.push_back(std::min<hsize_t>(d, 1024));
  ASSERT_GE(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), 0);
  Hid ds(H5Dcreate2(f, name, H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  ASSERT_TRUE(ds.ok());
}

// The structure rules are structure::Builder's (NOTE [ HDF5 errors ] in h5_io.h): sizes in
// [0, 2^63-1] whose bytes fit in int64, at most 64 dims, a sub-group's batch size starting with
// its parent's. The walk had its own bounds before (a stored batch size of at most 64 dims, each
// at most 2^40; a dataset's shape none).
TEST(H5BadInput, ShapesAndBatchSizesFollowTheSharedRules) {
  // 2^50 rows of float32 (4 PiB, none stored): the file opens and reads by rows; a read of all of
  // it is refused before anything is allocated.
  const std::string rows = FreshFile("rows");
  MakeFile(rows, [](hid_t f) { AddHuge(f, "x", {hsize_t{1} << 50}); });
  h5::H5TensorDict in = h5::open(rows);
  EXPECT_EQ(in.batch_size().vec(), std::vector<int64_t>{int64_t{1} << 50});
  EXPECT_TRUE(in.index({Slice(5, 8)}).get("x").equal(at::zeros({3})));
  EXPECT_TRUE(in.index({(int64_t{1} << 50) - 1}).get("x").equal(at::zeros({})));
  TD_EXPECT_THROW_MSG(in.get("x"), h5::H5Error,
                      {rows, "'x'", "[1125899906842624] x 4 bytes", "memory"});
  // A stored batch dim of 2^41 (past the walk's old 2^40).
  const std::string big = FreshFile("big");
  MakeFile(big, [](hid_t f) {
    AddHuge(f, "x", {hsize_t{1} << 41, 2});
    ASSERT_TRUE(h5::internal::WriteBatchAttr(f, "/", {int64_t{1} << 41}).ok());
  });
  EXPECT_EQ(h5::open(big).batch_size().vec(), std::vector<int64_t>{int64_t{1} << 41});
  // 2^40 x 2^40 floats: bytes past int64 (HDF5's own element count wraps to 0).
  const std::string wrap = FreshFile("wrap");
  MakeFile(wrap, [](hid_t f) { AddHuge(f, "x", {hsize_t{1} << 40, hsize_t{1} << 40}); });
  TD_EXPECT_THROW_MSG(h5::open(wrap), h5::H5Error,
                      {wrap, "'x'", "[1099511627776, 1099511627776]", "fit in int64"});
  // A stored batch size of 65 dims, a given one of 65 dims, a negative stored one.
  const std::string dims = FreshFile("dims");
  MakeFile(dims, [](hid_t f) {
    ASSERT_TRUE(h5::internal::WriteBatchAttr(f, "/", std::vector<int64_t>(65, 1)).ok());
  });
  TD_EXPECT_THROW_MSG(h5::open(dims), h5::H5Error, {dims, "__tensordict__", "65 dims", "64"});
  const std::string none = FreshFile("none");
  MakeFile(none, [](hid_t) {});
  TD_EXPECT_THROW_MSG(
      h5::open(none, h5::OpenOptions().batch_size(std::vector<int64_t>(65, 1))), h5::H5Error,
      {none, "the batch size has 65 dims", "64"});
  MakeFile(dims, [](hid_t f) {
    ASSERT_TRUE(h5::internal::WriteAttr(f, "/", h5::internal::kMetaAttr,
                                        "{\"batch_size\": [2, -1]}").ok());
  });
  TD_EXPECT_THROW_MSG(h5::open(dims), h5::H5Error, {dims, "__tensordict__", "-1", "[0, 2^63-1]"});
  // A sub-group whose stored batch size does not start with the root's.
  const std::string sub = FreshFile("sub");
  MakeFile(sub, [](hid_t f) {
    ASSERT_TRUE(h5::internal::WriteBatchAttr(f, "/", {4}).ok());
    ASSERT_TRUE(h5::internal::CreateGroup(f, "/g", {3}).ok());
  });
  TD_EXPECT_THROW_MSG(h5::open(sub), h5::H5Error, {sub, "'g'", "[3]", "[4]", "opened group"});
}

// Strings and attributes of a claimed shape too large for memory, in 2 KB of file: read, they
// are refused by name before a buffer is allocated for them (a count of 2^44 strings of 1 MiB
// once sized a buffer of 1 byte, and HDF5 counts the elements of [2^32, 2^32] as 0).
TEST(H5BadInput, HugeStringsAndAttributesAreNamedErrors) {
  const std::string path = FreshFile("huge_strings");
  MakeFile(path, [](hid_t f) {
    auto add = [&](const char* name, hid_t type, std::vector<hsize_t> dims) {
      Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
      Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
      const std::vector<hsize_t> chunk(dims.size(), 16);
      ASSERT_GE(H5Pset_chunk(dcpl.get(), static_cast<int>(dims.size()), chunk.data()), 0);
      ASSERT_TRUE(Hid(H5Dcreate2(f, name, type, space.get(), H5P_DEFAULT, dcpl.get(),
                                 H5P_DEFAULT)).ok());
    };
    Hid fixed(H5Tcopy(H5T_C_S1));
    H5Tset_size(fixed.get(), 1 << 20);
    add("fixed", fixed.get(), {hsize_t{1} << 44});
    Hid vlen(H5Tcopy(H5T_C_S1));
    H5Tset_size(vlen.get(), H5T_VARIABLE);
    const std::vector<hsize_t> wrap = {hsize_t{1} << 32, hsize_t{1} << 32};
    add("vlen", vlen.get(), wrap);
    Hid space(H5Screate_simple(2, wrap.data(), nullptr));
    ASSERT_TRUE(Hid(H5Acreate2(f, "ints", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                               H5P_DEFAULT)).ok());
  });
  h5::H5TensorDict in = h5::open(path);  // non-tensor data: nothing is read when opening
  TD_EXPECT_THROW_MSG(in.get_non_tensor("fixed"), h5::H5Error,
                      {path, "'fixed'", "[17592186044416] x 1048576 bytes", "memory"});
  TD_EXPECT_THROW_MSG(in.get_non_tensor("vlen"), h5::H5Error,
                      {path, "'vlen'", "[4294967296, 4294967296]", "memory"});
  TD_EXPECT_THROW_MSG(in.attrs(), h5::H5Error, {path, "'ints'", "[4294967296, 4294967296]"});
}

}  // namespace
}  // namespace td
