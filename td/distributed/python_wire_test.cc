// A C++ process and a Python process (Debian's python3-torch running python_peer.py,
// which follows Python tensordict's send / recv / isend / irecv) exchanging TensorDicts with
// Python tensordict's protocol (td/distributed/python_wire.h).
#include "td/distributed/python_wire.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "td/core/testing.h"
#include "td/distributed/multiprocess_testing.h"

namespace td {
namespace distributed {
namespace {

const char kPeer[] = "td/distributed/python_peer.py";
const char kPython[] = "/usr/bin/python3";

bool HavePython() {
  return std::system("/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null") == 0;
}

struct Spec {
  NestedKey key;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};

// python_peer.py's SPEC, in the same insertion order.
const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {"z", at::kFloat, {4, 3}},         {{"b", "y"}, at::kLong, {4}},
      {{"b", "x"}, at::kBool, {4, 2}},   {{"b", "n", "deep"}, at::kDouble, {4, 1, 2}},
      {"a", at::kByte, {4, 5}},          {"i8", at::kChar, {4}},
      {"i16", at::kShort, {4, 3}},       {"i32", at::kInt, {4}},
      {"f16", at::kHalf, {4, 2}},        {"bf16", at::kBFloat16, {4, 2}},
      {"c64", at::kComplexFloat, {4}},   {"empty", at::kFloat, {4, 0}},
  };
  return specs;
}

// python_peer.py's leaf_value.
at::Tensor ValueOf(int64_t k, at::ScalarType dtype, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  at::Tensor base = at::remainder(at::arange(n, at::kLong) * 3 + 7 * k, 61);
  at::Tensor v;
  if (dtype == at::kBool) {
    v = at::remainder(base, 2) == 1;
  } else if (dtype == at::kByte) {
    v = base.to(at::kByte);
  } else if (dtype == at::kComplexFloat) {
    v = at::complex((base - 20).to(at::kFloat), at::ones({n}, at::kFloat));
  } else {
    v = (base - 20).to(dtype);
  }
  return v.reshape(shape);
}

TensorDict MakeTd(std::optional<double> fill = std::nullopt) {
  TensorDict td({}, {4});
  for (size_t k = 0; k < Specs().size(); ++k) {
    const Spec& s = Specs()[k];
    td.set(s.key, fill ? at::full(s.shape, *fill, at::TensorOptions().dtype(s.dtype))
                       : ValueOf(static_cast<int64_t>(k), s.dtype, s.shape));
  }
  return td;
}

void ExpectValues(const TensorDict& td) {
  for (size_t k = 0; k < Specs().size(); ++k) {
    const Spec& s = Specs()[k];
    at::Tensor got = td.get(s.key);
    EXPECT_TRUE(at::equal(got, ValueOf(static_cast<int64_t>(k), s.dtype, s.shape)))
        << s.key.repr() << ": " << got;
  }
}

// Rank 0 runs `fn` in C++; rank 1 becomes python_peer.py with `args` (exec'd in the forked child
// before it would join the group, so the Python process joins in its place).
void RunWithPython(const std::vector<std::string>& args,
                   const std::function<void(const ProcessGroupPtr&)>& fn,
                   bool final_barrier = true) {
  auto status = test::RunRanks(
      // The Python process joins the group once torch is imported, which on a loaded machine
      // takes long: rendezvous and waits get 60 s, the run 150 s.
      test::RunOptions()
          .world_size(2)
          .final_barrier(final_barrier)
          .group_timeout(std::chrono::seconds(60))
          .deadline(std::chrono::seconds(150))
          .group_options(
          [args, final_barrier](int rank, GroupOptions& g) {
            if (rank != 1) return;
            std::vector<std::string> argv = {kPython, kPeer, g.file_store_path(), "1", "2"};
            argv.insert(argv.end(), args.begin(), args.end());
            argv.push_back(final_barrier ? "barrier=1" : "barrier=0");
            std::vector<char*> c;
            for (auto& a : argv) c.push_back(a.data());
            c.push_back(nullptr);
            ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
            ::execv(kPython, c.data());
            std::_Exit(127);
          }),
      [&](int rank, const ProcessGroupPtr& pg) {
        if (rank == 0) fn(pg);
      });
  test::ExpectAllPassed(status);
}


#define SKIP_WITHOUT_PYTHON() \
  if (!HavePython()) GTEST_SKIP() << "no /usr/bin/python3 with torch and numpy (Debian: apt-get install python3-torch)"

// tensordict.utils.int_generator's docstring: the chain from 10.
TEST(PythonWire, IntGeneratorDocstringChain) {
  std::vector<int> got;
  int64_t v = 10;
  for (int i = 0; i < 10; ++i) got.push_back(static_cast<int>(v = python_int_generator(v)));
  EXPECT_EQ(got, (std::vector<int>{6756, 1717, 4410, 9740, 9611, 9716, 5397, 7745, 4521, 7523}));
  TD_EXPECT_THROW_MSG(python_int_generator(-1), ValueError, {"seed -1"});
}

// The order and tags of the leaves on the wire: sorted keys depth first ("i16" < "i32" < "i8"),
// tags from init_tag; consolidated: insertion order, 8-byte padding.
TEST(PythonWire, Plan) {
  TensorDict td = MakeTd();
  auto plan = python_wire_plan(td, PythonWire().init_tag(100));
  std::vector<std::string> keys;
  std::vector<int> tags;
  for (const auto& l : plan) {
    keys.push_back(l.key.repr());
    tags.push_back(l.tag);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"'a'", "('b', 'n', 'deep')", "('b', 'x')",
                                            "('b', 'y')", "'bf16'", "'c64'", "'empty'", "'f16'",
                                            "'i16'", "'i32'", "'i8'", "'z'"}));
  EXPECT_EQ(tags, (std::vector<int>{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111}));
  auto rand = python_wire_plan(td, PythonWire().pseudo_rand(true));
  int64_t t = -1;
  for (const auto& l : rand) {
    t = python_int_generator(t + 1);
    EXPECT_EQ(l.tag, t) << l.key.repr();
  }
  auto cons = python_wire_plan(td, PythonWire().consolidated(true));
  ASSERT_EQ(cons.size(), Specs().size());
  int64_t offset = 0;
  for (size_t i = 0; i < cons.size(); ++i) {
    EXPECT_EQ(cons[i].key, Specs()[i].key);
    EXPECT_EQ(cons[i].offset, offset);
    offset += (cons[i].nbytes + 7) / 8 * 8;
  }
  // z 48, b.y 32, b.x 8, deep 64, a 20->24, i8 4->8, i16 24, i32 16, f16 16, bf16 16, c64 32.
  EXPECT_EQ(python_consolidated_nbytes(td), 288);
  EXPECT_EQ(offset, 288);
}

// numpy's int_generator over 2000+ seeds (sent by Python with the protocol) equals ours.
TEST(PythonWire, IntGeneratorMatchesNumpy) {
  SKIP_WITHOUT_PYTHON();
  RunWithPython({"intgen"}, [](const ProcessGroupPtr& pg) {
    const int64_t n = 2001 + 6;
    TensorDict got({{"seeds", at::zeros({n}, at::kLong)}, {"values", at::zeros({n}, at::kLong)}},
                   {});
    recv_py(pg, got, 1);
    at::Tensor seeds = got.get("seeds");
    at::Tensor values = got.get("values");
    EXPECT_EQ(seeds[2006].item<int64_t>(), (int64_t{1} << 40) + 3);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = seeds[i].item<int64_t>();
      if (python_int_generator(s) != values[i].item<int64_t>() && ++bad < 5) {
        ADD_FAILURE() << "seed " << s << ": numpy " << values[i].item<int64_t>() << ", ours "
                      << python_int_generator(s);
      }
    }
  });
}

struct Case {
  const char* name;
  std::vector<std::string> args;  // python_peer.py options
  PythonWire wire;
  bool async;
};

std::vector<Case> Cases() {
  return {
      {"plain", {}, PythonWire(), false},
      {"init_tag", {"init_tag=37"}, PythonWire().init_tag(37), false},
      {"pseudo_rand", {"pseudo_rand=1", "init_tag=5"}, PythonWire().pseudo_rand(true).init_tag(5),
       false},
      {"async", {"mode=async", "init_tag=3"}, PythonWire().init_tag(3), true},
      {"async_pseudo_rand", {"mode=async", "pseudo_rand=1"}, PythonWire().pseudo_rand(true), true},
      {"consolidated", {"mode=consolidated"}, PythonWire().consolidated(true), false},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PythonWireForm : public ::testing::TestWithParam<Case> {};

// Python sends (td.send / isend), C++ receives (recv_py / irecv_py) into zeros: every dtype,
// nested keys, a zero-size leaf.
TEST_P(PythonWireForm, PythonSendsCppReceives) {
  SKIP_WITHOUT_PYTHON();
  const Case& c = GetParam();
  std::vector<std::string> args = {"send"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  RunWithPython(args, [&](const ProcessGroupPtr& pg) {
    TensorDict td = MakeTd(0.0);
    if (c.async) {
      Work w = irecv_py(pg, td, 1, c.wire);
      w.wait();
    } else {
      recv_py(pg, td, 1, c.wire);
    }
    ExpectValues(td);
  });
}

// C++ sends (send_py / isend_py), Python receives (td.recv / irecv) and checks every leaf.
TEST_P(PythonWireForm, CppSendsPythonReceives) {
  SKIP_WITHOUT_PYTHON();
  const Case& c = GetParam();
  std::vector<std::string> args = {"recv"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  RunWithPython(args, [&](const ProcessGroupPtr& pg) {
    TensorDict td = MakeTd();
    if (c.async) {
      Work w = isend_py(pg, td, 1, c.wire);
      td.get("z").fill_(-99);  // isend_py copied the leaves before returning
      w.wait();
    } else {
      send_py(pg, td, 1, c.wire);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Forms, PythonWireForm, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// The sender's structure given with `expect` differs from the receiving TensorDict: ValueError
// naming the key and both shapes / dtypes before anything is received; the TensorDict keeps its
// values, and the messages are still there for the next (matching) receive.
TEST(PythonWire, ExpectedStructureMismatchNamesKey) {
  SKIP_WITHOUT_PYTHON();
  RunWithPython({"send"}, [](const ProcessGroupPtr& pg) {
    TensorDict sender = MakeTd(0.0);
    TensorDict td = MakeTd(3.0);
    td.set({"b", "y"}, at::full({4, 2}, 3, at::kLong));  // shape [4, 2] instead of [4]
    TD_EXPECT_THROW_MSG(recv_py(pg, td, 1, PythonWire().expect(sender)), ValueError,
                        {"key ('b', 'y'): Long [4] (sender) vs Long [4, 2] (receiver)", "nothing was received"});
    TensorDict td2 = MakeTd(3.0);
    td2.set("i32", at::full({4}, 3, at::kFloat));  // dtype
    TD_EXPECT_THROW_MSG(recv_py(pg, td2, 1, PythonWire().expect(sender)), ValueError,
                        {"key 'i32': Int [4] (sender) vs Float [4] (receiver)"});
    TensorDict td3 = MakeTd(3.0);
    td3.pop("z");  // a key the sender has
    TD_EXPECT_THROW_MSG(recv_py(pg, td3, 1, PythonWire().expect(sender)), ValueError,
                        {"key 'z' (Float [4, 3]) is present on the sender side but not on the "
                         "receiver side"});
    EXPECT_TRUE(test::AllEqual(td, 3.0));
    EXPECT_TRUE(test::AllEqual(td2, 3.0));
    TensorDict good = MakeTd(3.0);
    recv_py(pg, good, 1, PythonWire().expect(sender));
    ExpectValues(good);
  });
}

// Python sends one leaf fewer than the receiver holds (its last in sorted order, 'z'): the
// receive of that leaf never completes; the error names the key, dtype, shape and tag, and
// nothing is written. Gloo closes the connection after a timeout: no final barrier.
TEST(PythonWire, MissingLeafNamesKeyAndWritesNothing) {
  SKIP_WITHOUT_PYTHON();
  RunWithPython(
      {"send", "skip=z"},
      [](const ProcessGroupPtr& pg) {
        TensorDict td = MakeTd(3.0);
        TD_EXPECT_THROW_MSG(
            recv_py(pg, td, 1, PythonWire().timeout(std::chrono::milliseconds(3000))),
            TransportError, {"recv_py (source rank 1)", "leaf 'z'", "Float", "[4, 3]", "tag 11",
                             "nothing was written"});
        EXPECT_TRUE(test::AllEqual(td, 3.0));
      },
      /*final_barrier=*/false);
}

// A message shorter than its leaf (Gloo gives no byte count) leaves the rest of the leaf with
// its own values, as Python's recv into the leaf does, not with the bytes of an earlier message
// that passed through the same pooled staging buffer; a receive that fails writes nothing.
TEST(PythonWire, ShorterMessageKeepsTheLeafsOwnTail) {
  auto status = test::RunRanks(
      test::RunOptions().world_size(2), [](int rank, const ProcessGroupPtr& pg) {
        for (bool consolidated : {false, true}) {
          SCOPED_TRACE(consolidated);
          const PythonWire wire = PythonWire().consolidated(consolidated);
          if (rank == 1) {
            send_py(pg, TensorDict({{"a", at::full({4}, 7.0)}}, {}), 0, wire);
            send_py(pg, TensorDict({{"a", at::full({2}, 5.0)}}, {}), 0, wire);
            continue;
          }
          TensorDict full({{"a", at::full({4}, 3.0)}}, {});
          recv_py(pg, full, 1, wire);
          EXPECT_TRUE(at::equal(full.get("a"), at::full({4}, 7.0))) << full.get("a");
          TensorDict part({{"a", at::full({4}, 3.0)}}, {});
          recv_py(pg, part, 1, wire);
          EXPECT_TRUE(at::equal(part.get("a"), at::tensor({5.0f, 5.0f, 3.0f, 3.0f})))
              << part.get("a");
        }
      });
  test::ExpectAllPassed(status);
}

// A receive whose message never comes fails naming the leaf and writes nothing (whether it ends
// by its timeout or by the peer's exit). Gloo closes the pair after a timeout: no final barrier.
TEST(PythonWire, FailedReceiveWritesNothing) {
  auto status = test::RunRanks(
      test::RunOptions().world_size(2).final_barrier(false),
      [](int rank, const ProcessGroupPtr& pg) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(2));
          return;
        }
        TensorDict td({{"a", at::full({4}, 3.0)}}, {});
        TD_EXPECT_THROW_MSG(
            recv_py(pg, td, 1, PythonWire().timeout(std::chrono::milliseconds(500))),
            TransportError, {"recv_py (source rank 1)", "'a'"});
        EXPECT_TRUE(at::equal(td.get("a"), at::full({4}, 3.0)));
      });
  test::ExpectAllPassed(status);
}

TEST(PythonWire, BadOptions) {
  auto status = test::RunRanks(test::RunOptions().world_size(2), [](int rank,
                                                                    const ProcessGroupPtr& pg) {
    if (rank != 0) return;
    TensorDict td = MakeTd();
    TD_EXPECT_THROW_MSG(send_py(pg, td, 1, PythonWire().init_tag(-2)), ValueError,
                        {"init_tag -2"});
    TD_EXPECT_THROW_MSG(send_py(pg, td, 0), ValueError, {"own rank"});
    TD_EXPECT_THROW_MSG(isend_py(pg, td, 1, PythonWire().consolidated(true)), ValueError,
                        {"consolidated"});
    TD_EXPECT_THROW_MSG(recv_py(pg, td, 1, PythonWire().timeout(std::chrono::milliseconds(0))),
                        ValueError, {"timeout"});
  });
  test::ExpectAllPassed(status);
}

}  // namespace
}  // namespace distributed
}  // namespace td
