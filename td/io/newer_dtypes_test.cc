// uint16/32/64 and float8 leaves in every file format (NOTE [ Dtypes by LibTorch version ] in
// td/compat/dtypes.h), against testdata/newer_dtypes_fixture.py, which writes them as Python
// tensordict 0.14 does from raw bytes (so /usr/bin/python3 with LibTorch 1.13's torch can):
//  * where this LibTorch has the dtype: Python's files load bit-exact, ours read bit-exact in
//    Python, and every format round-trips it; float8 in a consolidated file, Zarr or HDF5 (which
//    Python tensordict 0.14 cannot write either) is a TypeError naming the key and the dtype;
//  * where it does not (LibTorch 1.13): each of Python's files is refused naming the dtype and
//    that this LibTorch has no such dtype (compat::NoSuchDtypeMessage).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/backends/h5/h5.h"
#include "td/backends/memmap/archive/archive.h"
#include "td/backends/memmap/test_util.h"
#include "td/compat/dtypes.h"
#include "td/consolidate/file.h"
#include "td/core/tensordict.h"
#include "td/io/io.h"
#include "td/io/zarr.h"

namespace td {
namespace {

const char kScript[] = "td/io/testdata/newer_dtypes_fixture.py";

// newer_dtypes_fixture.py's DTYPES, in its order (the payload depends on the index).
struct Case {
  std::string name;  // "uint16"
  int64_t size;
  bool numpy;        // numpy has it: Zarr, HDF5 and consolidated files hold it
};
const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"uint16", 2, true},           {"uint32", 4, true},           {"uint64", 8, true},
      {"float8_e5m2", 1, false},     {"float8_e4m3fn", 1, false},   {"float8_e5m2fnuz", 1, false},
      {"float8_e4m3fnuz", 1, false}, {"float8_e8m0fnu", 1, false},
  };
  return cases;
}

const compat::NewerDtypeInfo& Info(const Case& c) {
  const compat::NewerDtypeInfo* d = compat::FindNewerDtype("torch." + c.name);
  TORCH_CHECK(d != nullptr, c.name);
  return *d;
}

// The fixture's payload(index, size): bytes 0x81 + 37 i + 11 index.
at::Tensor PayloadBytes(size_t index, int64_t size) {
  at::Tensor b = at::empty({6 * size}, at::kByte);
  for (int64_t i = 0; i < 6 * size; ++i) {
    b.data_ptr<uint8_t>()[i] = static_cast<uint8_t>((0x81 + 37 * i + 11 * index) & 0xFF);
  }
  return b;
}

// The leaf "x" of batch [2] every fixture store holds, in this LibTorch's dtype.
TensorDict Fixture(size_t index, at::ScalarType dtype) {
  const Case& c = Cases()[index];
  return TensorDict({{"x", PayloadBytes(index, c.size).view(dtype).view({2, 3})}}, {2});
}

// `got`'s leaf "x" has the dtype, shape and bytes of Fixture(index), and its batch size (an
// HDF5 file Python wrote has none stored: from_h5 infers [2, 3], as upstream's does).
void ExpectBitExact(const TensorDict& got, size_t index, at::ScalarType dtype,
                    const std::string& what) {
  SCOPED_TRACE(what);
  const bool inferred = what.rfind("h5 py ", 0) == 0;
  const std::vector<int64_t> batch =
      inferred ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{2};
  ASSERT_EQ(got.batch_size().vec(), batch);
  const at::Tensor x = got.get("x");
  EXPECT_EQ(x.scalar_type(), dtype);
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(at::equal(x.contiguous().view(at::kByte).reshape({-1}),
                        PayloadBytes(index, Cases()[index].size)));
}

// `f` throws naming the dtype and that this LibTorch has no such dtype.
template <class F>
void ExpectNoSuchDtype(F&& f, const Case& c, const std::string& what) {
  SCOPED_TRACE(what);
  try {
    f();
    ADD_FAILURE() << "loaded";
  } catch (const c10::Error& e) {
    const std::string m = e.what_without_backtrace();
    EXPECT_NE(m.find(compat::NoSuchDtypeMessage(Info(c))), std::string::npos) << m;
  }
}

template <class F>
void ExpectTypeError(F&& f, const Case& c, const std::string& what) {
  SCOPED_TRACE(what);
  try {
    f();
    ADD_FAILURE() << "written";
  } catch (const c10::TypeError& e) {
    const std::string m = e.what_without_backtrace();
    EXPECT_NE(m.find("torch." + c.name), std::string::npos) << m;
    EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  }
}

bool HavePython() {
  return std::system("/usr/bin/python3 -c 'import numpy, h5py' 2>/dev/null") == 0;
}

// The fixture's files, written once; or, by hand, files Python tensordict itself wrote under the
// same names (TD_NEWER_DTYPES_PY_DIR, e.g. `--test_env=TD_NEWER_DTYPES_PY_DIR=/tmp/py`).
const std::string& PythonDir() {
  static const std::string* dir = [] {
    if (const char* given = std::getenv("TD_NEWER_DTYPES_PY_DIR")) return new std::string(given);
    auto* d = new std::string(testing_util::FreshDir("py"));
    const std::string cmd = std::string("/usr/bin/python3 ") + kScript + " write " + *d;
    if (std::system(cmd.c_str()) != 0) d->clear();
    return d;
  }();
  return *dir;
}

TEST(NewerDtypes, PythonWritesWeRead) {
  if (!HavePython()) GTEST_SKIP() << "no /usr/bin/python3 with numpy and h5py";
  const std::string dir = PythonDir();
  ASSERT_FALSE(dir.empty());
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    const std::optional<at::ScalarType> dtype = Info(c).type;
    const std::string memmap = dir + "/memmap/" + c.name;
    const std::string archive = testing_util::FreshDir("tdz" + c.name) + "/a.tdz";
    std::vector<std::pair<std::string, std::function<TensorDict()>>> loads = {
        {"memmap " + c.name, [&] { return TensorDict::load_memmap(memmap); }},
        {"tdz " + c.name, [&] {
           pack_memmap(memmap, archive);
           return load(archive);
         }},
    };
    if (c.numpy) {
      const std::string base = dir + "/" + c.name;
      loads.push_back({"consolidated " + c.name, [=] { return load_consolidated(base + ".td"); }});
      loads.push_back({"zarr 3 " + c.name, [=] { return from_zarr(base + ".zarr"); }});
      loads.push_back({"zarr 2 " + c.name, [=] { return from_zarr(base + ".v2.zarr"); }});
      loads.push_back({"h5 py " + c.name, [=] { return h5::from_h5(base + ".h5"); }});
    }
    for (const auto& [what, f] : loads) {
      if (dtype) {
        ExpectBitExact(f(), i, *dtype, what);
      } else {
        ExpectNoSuchDtype(f, c, what);
      }
    }
  }
}

TEST(NewerDtypes, WeWritePythonReads) {
  if (!HavePython()) GTEST_SKIP() << "no /usr/bin/python3 with numpy and h5py";
  // TD_NEWER_DTYPES_OUT_DIR keeps what we write, for Python tensordict itself to read by hand.
  const char* keep = std::getenv("TD_NEWER_DTYPES_OUT_DIR");
  const std::string out = keep ? keep : testing_util::FreshDir("ours");
  int written = 0;
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    const std::optional<at::ScalarType> dtype = Info(c).type;
    if (!dtype) continue;
    const TensorDict t = Fixture(i, *dtype);
    t.memmap(out + "/memmap/" + c.name);
    if (c.numpy) {
      save_consolidated(t, out + "/" + c.name + ".td");
      to_zarr(t, out + "/" + c.name + ".zarr");
      h5::to_h5(t, out + "/" + c.name + ".h5");
    }
    ++written;
  }
  if (written == 0) GTEST_SKIP() << compat::NoSuchDtypeMessage(Info(Cases()[0]));
  const std::string cmd = std::string("/usr/bin/python3 ") + kScript + " check " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(NewerDtypes, RoundTripInEveryFormat) {
  int tested = 0;
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    const std::optional<at::ScalarType> dtype = Info(c).type;
    if (!dtype) continue;
    ++tested;
    const TensorDict t = Fixture(i, *dtype);
    const std::string dir = testing_util::FreshDir("rt" + c.name);
    t.memmap(dir + "/m");
    ExpectBitExact(TensorDict::load_memmap(dir + "/m"), i, *dtype, "memmap " + c.name);
    ExpectBitExact(load(pack_memmap(dir + "/m", dir + "/a.tdz")), i, *dtype, "tdz " + c.name);
    const std::string td_file = dir + "/c.td", zarr = dir + "/s.zarr", h5 = dir + "/f.h5";
    if (c.numpy) {
      save_consolidated(t, td_file);
      ExpectBitExact(load_consolidated(td_file), i, *dtype, "consolidated " + c.name);
      to_zarr(t, zarr);
      ExpectBitExact(from_zarr(zarr), i, *dtype, "zarr " + c.name);
      h5::to_h5(t, h5);
      ExpectBitExact(h5::from_h5(h5), i, *dtype, "h5 " + c.name);
    } else {
      // Python tensordict 0.14 cannot write (nor read) float8 in these formats: refused by name,
      // with no file left behind.
      ExpectTypeError([&] { save_consolidated(t, td_file); }, c, "consolidated " + c.name);
      ExpectTypeError([&] { to_zarr(t, zarr); }, c, "zarr " + c.name);
      ExpectTypeError([&] { h5::to_h5(t, h5); }, c, "h5 " + c.name);
      EXPECT_FALSE(testing_util::Exists(td_file));
    }
  }
  if (tested == 0) GTEST_SKIP() << compat::NoSuchDtypeMessage(Info(Cases()[0]));
}

}  // namespace
}  // namespace td
