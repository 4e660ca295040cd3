// td::distributed across real processes (fork; Gloo over a FileStore in a temp dir or a
// TCPStore on 127.0.0.1). Every wait inside the ranks has a timeout well under the run's deadline.
#include "td/distributed/distributed.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/stack.h"
#include "td/core/testing.h"
#include "td/distributed/multiprocess_testing.h"
#include "td/distributed/internal/packing.h"

namespace td {
namespace distributed {
namespace {

using test::ExpectAllPassed;
using test::RunOptions;
using test::AllEqual;
using test::RunRanks;
using td::test::kLeaves;

// Nested keys, every common dtype (bool, bfloat16 included), a zero-size leaf, a non-contiguous
// leaf and non-tensor data; batch [4]. Same seed => same values.
TensorDict Sample(int64_t seed) {
  at::manual_seed(seed);
  TensorDict deep({{"y", at::randint(0, 100, {4, 2}, at::kInt)}}, {4, 2});
  TensorDict n({{"x", at::randn({4, 2, 3})}, {"deep", deep}}, {4, 2});
  TensorDict td({{"f32", at::randn({4, 5})},
                 {"f64", at::randn({4}, at::kDouble)},
                 {"i64", at::randint(-50, 50, {4, 3}, at::kLong)},
                 {"b", at::randn({4, 2}) > 0},
                 {"bf16", at::randn({4, 3}).to(at::kBFloat16)},
                 {"f16", at::randn({4, 3}).to(at::kHalf)},
                 {"u8", at::randint(0, 255, {4}, at::kByte)},
                 {"i8", at::randint(-100, 100, {4, 1}, at::kChar)},
                 {"empty", at::randn({4, 0})},
                 {"n", n},
                 {"s", "some text"}},
                {4});
  td.set("t", at::randn({3, 4}).t());
  return td;
}

TensorDict Zeros(const TensorDict& like) { return like.clone().zero_(); }

void ExpectSame(const TensorDict& got, const TensorDict& want) {
  EXPECT_EQ(got.batch_size(), want.batch_size());
  auto keys = want.keys(kLeaves);
  EXPECT_EQ(got.keys(kLeaves).size(), keys.size());
  for (const NestedKey& k : keys) {
    ASSERT_TRUE(got.contains(k)) << k;
    Value w = want.get_value(k), g = got.get_value(k);
    if (w.is_tensor()) {
      ASSERT_TRUE(g.is_tensor()) << k;
      EXPECT_EQ(g.tensor().scalar_type(), w.tensor().scalar_type()) << k;
      EXPECT_TRUE(at::equal(g.tensor(), w.tensor())) << k;
    } else {
      EXPECT_EQ(g.non_tensor(), w.non_tensor()) << k;
    }
  }
}

TEST(DistributedTest, SendRecvEveryDtypeNestedZeroSize) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict sent = Sample(1);
    if (rank == 0) {
      send(pg, sent, 1);
    } else {
      TensorDict got = Zeros(sent);
      at::Tensor f32 = got.get("f32");
      recv(pg, got, 0);
      ExpectSame(got, sent);
      // Written in place: the handle taken before recv sees the data.
      EXPECT_TRUE(at::equal(f32, sent.get("f32")));
    }
  }));
}

TEST(DistributedTest, PerLeafWireFormat) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const auto per_leaf = P2POptions().wire_format(WireFormat::kPerLeaf);
    TensorDict sent = Sample(2);
    TensorDict other({{"f32", at::ones({4, 6})}}, {4});
    if (rank == 0) {
      send(pg, sent, 1, per_leaf);
      send(pg, other, 1, per_leaf);  // refused: the receiver drains its leaf messages
      send(pg, sent, 1, per_leaf);   // refused by from_remote_init, drained too
      Work w = isend(pg, sent, 1, per_leaf);
      send(pg, sent, 1);  // packed right after per-leaf messages on the same tag
      w.wait();
    } else {
      TensorDict got = Zeros(sent);
      at::Tensor f32 = got.get("f32");
      recv(pg, got, 0);  // the non-contiguous leaf 't' goes through a temporary
      ExpectSame(got, sent);
      EXPECT_TRUE(at::equal(f32, sent.get("f32")));  // received in place
      TensorDict wrong({{"f32", at::zeros({4, 5})}}, {4});
      TD_EXPECT_THROW_MSG(recv(pg, wrong, 0), ValueError,
                          {"key 'f32'", "shape [4,6] (sender) vs [4,5] (receiver)"});
      EXPECT_EQ(wrong.get("f32").abs().sum().item<float>(), 0.f);
      TD_EXPECT_THROW_MSG(from_remote_init(pg, 0), ValueError, {"plain send()"});
      TensorDict again = Zeros(sent), packed = Zeros(sent);
      irecv(pg, again, 0).wait();
      recv(pg, packed, 0);
      ExpectSame(again, sent);
      ExpectSame(packed, sent);
    }
  }));
}

TEST(DistributedTest, SendRecvOverTcpStoreAndKeyOrderDoesNotMatter) {
  ExpectAllPassed(RunRanks(RunOptions().tcp(true), [](int rank, const ProcessGroupPtr& pg) {
    at::manual_seed(3);
    at::Tensor a = at::randn({2, 3}), b = at::randn({2});
    if (rank == 0) {
      send(pg, TensorDict({{"a", a}, {"b", b}}, {2}), 1);
    } else {
      TensorDict got({{"b", at::zeros({2})}, {"a", at::zeros({2, 3})}}, {2});
      recv(pg, got, 0);
      EXPECT_TRUE(at::equal(got.get("a"), a));
      EXPECT_TRUE(at::equal(got.get("b"), b));
    }
  }));
}

TEST(DistributedTest, IsendIrecvAndTags) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict one({{"x", at::full({3}, 1.0)}}, {3});
    TensorDict two({{"x", at::full({3}, 2.0)}}, {3});
    if (rank == 0) {
      Work w1 = isend(pg, one, 1, P2POptions().tag(5));
      Work w2 = isend(pg, two, 1, P2POptions().tag(7));
      w1.wait();
      w2.wait();
      EXPECT_TRUE(w1.completed());
    } else {
      TensorDict got7({{"x", at::zeros({3})}}, {3});
      TensorDict got5({{"x", at::zeros({3})}}, {3});
      Work r7 = irecv(pg, got7, 0, P2POptions().tag(7));
      Work r5 = irecv(pg, got5, 0, P2POptions().tag(5));
      r7.wait();
      r5.wait();
      EXPECT_TRUE(at::equal(got5.get("x"), one.get("x")));
      EXPECT_TRUE(at::equal(got7.get("x"), two.get("x")));
    }
  }));
}

TEST(DistributedTest, MismatchedStructuresNameTheKeyAndWriteNothing) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict base({{"a", at::ones({4, 2})}, {"n", TensorDict({{"b", at::ones({4, 3})}}, {4})}},
                    {4});
    if (rank == 0) {
      send(pg, base, 1);  // shape differs at ('n', 'b')
      send(pg, base, 1);  // dtype differs
      send(pg, base, 1);  // key missing on the receiver
      send(pg, base, 1);  // a matching one still arrives afterwards
    } else {
      TensorDict shape({{"a", at::zeros({4, 2})}, {"n", TensorDict({{"b", at::zeros({4, 5})}}, {4})}},
                       {4});
      TD_EXPECT_THROW_MSG(recv(pg, shape, 0), ValueError,
                          {"('n', 'b')", "shape [4,3] (sender) vs [4,5] (receiver)",
                           "nothing was written"});
      EXPECT_EQ(shape.get("a").sum().item<float>(), 0.f);
      TensorDict dtype({{"a", at::zeros({4, 2}, at::kDouble)},
                        {"n", TensorDict({{"b", at::zeros({4, 3})}}, {4})}},
                       {4});
      TD_EXPECT_THROW_MSG(recv(pg, dtype, 0), ValueError, {"key 'a'", "dtype Float (sender) vs Double (receiver)"});
      TensorDict missing({{"a", at::zeros({4, 2})}}, {4});
      TD_EXPECT_THROW_MSG(recv(pg, missing, 0), ValueError,
                          {"('n', 'b')", "present on the sender side"});
      TensorDict ok = Zeros(base);
      recv(pg, ok, 0);
      ExpectSame(ok, base);
    }
  }));
}

TEST(DistributedTest, WrongRanksAndTags) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict td({{"a", at::ones({2})}}, {2});
    TD_EXPECT_THROW_MSG(send(pg, td, 2), ValueError, {"rank 2", "outside the group [0, 2)"});
    TD_EXPECT_THROW_MSG(recv(pg, td, rank), ValueError, {"own rank"});
    TD_EXPECT_THROW_MSG(send(pg, td, 1 - rank, P2POptions().tag(-1)), ValueError, {"tag -1"});
    TD_EXPECT_THROW_MSG(broadcast(pg, td, -1), ValueError, {"rank -1"});
    TD_EXPECT_THROW_MSG(send(ProcessGroupPtr(), td, 0), ValueError, {"null"});
  }));
}

TEST(DistributedTest, InitRemoteShipsStructureThenSendRecvReuseIt) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict sent = Sample(2);
    if (rank == 0) {
      init_remote(pg, sent, 1);
      send(pg, Sample(3), 1);
      send(pg, TensorDict(), 1);  // empty TensorDicts travel too
    } else {
      TensorDict got = from_remote_init(pg, 0);
      ExpectSame(got, sent);
      EXPECT_EQ(got.get_non_tensor("s"), "some text");
      EXPECT_EQ(got.get_tensordict("n").batch_size(), (std::vector<int64_t>{4, 2}));
      recv(pg, got, 0);
      ExpectSame(got, Sample(3));
      TensorDict empty;
      recv(pg, empty, 0);
    }
  }));
}

// NOTE [ Agreed structures ] in p2p.cc: after init_remote, a send of that structure is one
// message; other structures, and receivers holding another structure, still work or fail cleanly.
TEST(DistributedTest, AfterInitRemoteASendOfTheAgreedStructureIsOneMessage) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const auto per_leaf = P2POptions().wire_format(WireFormat::kPerLeaf);
    TensorDict other({{"z", at::arange(6, at::kFloat).view({2, 3})}}, {2});
    if (rank == 0) {
      init_remote(pg, Sample(2), 1);
      send(pg, Sample(4), 1);            // seen whole by a raw c10d recv
      send(pg, other, 1);                // another structure: header first
      send(pg, Sample(5), 1, per_leaf);  // header, then the leaves
      send(pg, Sample(6), 1);            // refused: the receiver holds another structure
      send(pg, Sample(6), 1, per_leaf);  // refused and drained
      Work a = isend(pg, Sample(7), 1);
      Work b = isend(pg, Sample(8), 1);
      a.wait();
      b.wait();
      init_remote(pg, other, 1, P2POptions().tag(3));  // tag 3 agrees on its own structure
      send(pg, other, 1, P2POptions().tag(3));
      send(pg, Sample(9), 1);  // tag 0 keeps its agreement
    } else {
      TensorDict got = from_remote_init(pg, 0);
      ExpectSame(got, Sample(2));
      // One message on the header's tag holds header and data: a raw c10d recv of exactly that
      // size gets all of it.
      const internal::PackedLayout layout(Sample(4));
      std::vector<at::Tensor> raw = {at::zeros({64 + layout.nbytes()}, at::kByte)};
      pg->recv(raw, 0, 0)->wait(std::chrono::milliseconds(20000));
      const auto* h = reinterpret_cast<const int64_t*>(raw[0].data_ptr<uint8_t>());
      EXPECT_EQ(h[1], 1);  // kData
      EXPECT_EQ(h[3], 0);  // no description
      EXPECT_EQ(h[4], layout.nbytes());
      EXPECT_EQ(h[5], 2);  // agreed, packed
      TensorDict landed = Zeros(Sample(4));
      internal::PackedLayout(landed).Unpack(raw[0].narrow(0, 64, layout.nbytes()), landed);
      ExpectSame(landed, Sample(4));
      TensorDict like_other = other.clone().zero_();
      recv(pg, like_other, 0);  // would read a stray payload of the send above, had there been one
      ExpectSame(like_other, other);
      recv(pg, got, 0);
      ExpectSame(got, Sample(5));
      TensorDict wrong({{"f32", at::zeros({4, 5})}}, {4});
      TD_EXPECT_THROW_MSG(recv(pg, wrong, 0), ValueError,
                          {"present on the sender side", "nothing was written"});
      EXPECT_EQ(wrong.get("f32").abs().sum().item<float>(), 0.f);
      TD_EXPECT_THROW_MSG(recv(pg, wrong, 0), ValueError, {"present on the sender side"});
      TensorDict first = Zeros(got), second = Zeros(got);
      Work a = irecv(pg, first, 0);
      Work b = irecv(pg, second, 0);
      a.wait();
      b.wait();
      ExpectSame(first, Sample(7));
      ExpectSame(second, Sample(8));
      TensorDict on3 = from_remote_init(pg, 0, P2POptions().tag(3));
      recv(pg, on3, 0, P2POptions().tag(3));
      ExpectSame(on3, other);
      recv(pg, got, 0);
      ExpectSame(got, Sample(9));
    }
  }));
}

// NOTE [ Packed layout ]: leaves of kAloneMinBytes or more travel as messages of their own, sent
// from their memory, with or without an agreement; a refused message's large leaves are drained.
TEST(DistributedTest, LargeLeavesTravelAloneInThePackedFormat) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const int64_t floats = internal::kAloneMinBytes / 4;
    auto make = [&](double v) {
      TensorDict t({{"big", at::full({2, floats}, v)},
                    {"also", at::full({2, floats / 2}, v, at::kDouble)},
                    {"small", at::full({2, 3}, v)},
                    {"n", TensorDict({{"i", at::full({2}, static_cast<int64_t>(v))}}, {2})}},
                   {2});
      t.set("strided", at::full({floats, 2}, v).t());  // large and not contiguous
      return t;
    };
    const auto tag1 = P2POptions().tag(1);
    if (rank == 0) {
      send(pg, make(1), 1);              // header, payload with the table, then 3 large leaves
      send(pg, make(2), 1);              // refused: its large leaves are drained
      send(pg, make(3), 1);
      init_remote(pg, make(4), 1, tag1);
      send(pg, make(5), 1, tag1);        // agreed: header and inline data, then the large leaves
      TensorDict changing = make(6);
      Work w = isend(pg, changing, 1, tag1);
      changing.fill_(-1);                // after isend: not what the receiver gets
      w.wait();
      return;
    }
    TensorDict got = make(0);
    at::Tensor big = got.get("big");
    recv(pg, got, 0);
    ExpectSame(got, make(1));
    EXPECT_TRUE(at::equal(big, make(1).get("big")));  // written in place
    TensorDict wrong = make(0).exclude({"also"});
    TD_EXPECT_THROW_MSG(recv(pg, wrong, 0), ValueError,
                        {"key 'also' is present on the sender side", "nothing was written"});
    EXPECT_TRUE(AllEqual(wrong, 0));
    recv(pg, got, 0);
    ExpectSame(got, make(3));
    TensorDict agreed = from_remote_init(pg, 0, tag1);
    ExpectSame(agreed, make(4));
    recv(pg, agreed, 0, tag1);
    ExpectSame(agreed, make(5));
    recv(pg, agreed, 0, tag1);
    ExpectSame(agreed, make(6));
  }));
}

TEST(DistributedTest, LazyStackSender) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    at::manual_seed(11);
    std::vector<TensorDict> steps;
    for (int i = 0; i < 3; ++i) {
      steps.push_back(TensorDict({{"obs", at::randn({2, 4})},
                                  {"next", TensorDict({{"r", at::randn({2})}}, {2})}},
                                 {2}));
    }
    TensorDict dense = td::stack(steps, 0);
    if (rank == 0) {
      TensorDict lazy = td::lazy_stack(steps, 0);
      EXPECT_EQ(lazy.backend(), "lazy_stack");
      send(pg, lazy, 1);
    } else {
      TensorDict got = Zeros(dense);
      recv(pg, got, 0);
      ExpectSame(got, dense);
    }
  }));
}

TEST(DistributedTest, RecvIntoMemmapWritesTheFiles) {
  std::string dir = test::MakeTempDir() + "/mm";
  ExpectAllPassed(RunRanks(RunOptions(), [&dir](int rank, const ProcessGroupPtr& pg) {
    at::manual_seed(5);
    TensorDict sent({{"a", at::randn({3, 2})}, {"n", TensorDict({{"b", at::arange(3)}}, {3})}}, {3});
    if (rank == 0) {
      pg->barrier()->wait();  // rank 1 has written its memmap
      send(pg, sent, 1);
      pg->barrier()->wait();
      ExpectSame(TensorDict::load_memmap(dir), sent);
      TensorDict twice = sent.apply([](const at::Tensor& x) { return x * 2; });
      send(pg, twice, 1, P2POptions().wire_format(WireFormat::kPerLeaf));
      pg->barrier()->wait();
      ExpectSame(TensorDict::load_memmap(dir), twice);
    } else {
      TensorDict mm = Zeros(sent).memmap(dir);
      EXPECT_EQ(mm.backend(), "memmap");
      pg->barrier()->wait();
      recv(pg, mm, 0);
      ExpectSame(mm, sent);
      pg->barrier()->wait();
      recv(pg, mm, 0);  // per leaf: through temporaries and update_, files written in place
      pg->barrier()->wait();
    }
  }));
}

TEST(DistributedTest, CollectivesWorldFour) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(4), [](int rank, const ProcessGroupPtr& pg) {
    auto make = [](int r) {
      return TensorDict({{"f", at::full({2, 3}, static_cast<double>(r + 1))},
                         {"n", TensorDict({{"i", at::full({2}, r + 1, at::kLong)}}, {2})},
                         {"h", at::full({2}, r + 1.0).to(at::kBFloat16)}},
                        {2});
    };
    // broadcast
    TensorDict b = rank == 2 ? Sample(9) : Zeros(Sample(9));
    broadcast(pg, b, 2);
    ExpectSame(b, Sample(9));
    // all_reduce: sum, max, avg
    TensorDict s = make(rank);
    all_reduce(pg, s);
    EXPECT_TRUE(at::equal(s.get("f"), at::full({2, 3}, 10.0)));
    EXPECT_TRUE(at::equal(s.get({"n", "i"}), at::full({2}, 10, at::kLong)));
    EXPECT_TRUE(at::equal(s.get("h"), at::full({2}, 10.0).to(at::kBFloat16)));
    TensorDict m = make(rank);
    all_reduce(pg, m, ReduceOp::kMax);
    EXPECT_TRUE(at::equal(m.get({"n", "i"}), at::full({2}, 4, at::kLong)));
    TensorDict avg({{"f", at::full({3}, rank * 2.0)}}, {3});
    all_reduce(pg, avg, ReduceOp::kAvg);
    EXPECT_TRUE(at::allclose(avg.get("f"), at::full({3}, 3.0)));
    TD_EXPECT_THROW_MSG(all_reduce(pg, s, ReduceOp::kAvg), ValueError, {"('n', 'i')", "kAvg"});
    // int16 (reduced in int32) and complex (sum / avg as pairs of reals); complex max refused.
    TensorDict c({{"s", at::full({2}, rank + 1, at::kShort)},
                  {"c", at::full({2}, c10::complex<float>(rank, -2.0f * rank), at::kComplexFloat)}},
                 {2});
    all_reduce(pg, c);
    EXPECT_TRUE(at::equal(c.get("s"), at::full({2}, 10, at::kShort)));
    EXPECT_TRUE(
        at::equal(c.get("c"), at::full({2}, c10::complex<float>(6, -12), at::kComplexFloat)));
    TD_EXPECT_THROW_MSG(all_reduce(pg, c, ReduceOp::kMax), ValueError,
                        {"key 'c'", "complex leaves can only be summed or averaged"});
    // reduce to rank 1
    TensorDict r = make(rank);
    reduce(pg, r, 1, ReduceOp::kProduct);
    if (rank == 1) {
      EXPECT_TRUE(at::equal(r.get("f"), at::full({2, 3}, 24.0)));
    }
    // all_gather / gather
    std::vector<TensorDict> all = all_gather(pg, make(rank));
    ASSERT_EQ(all.size(), 4u);
    for (int i = 0; i < 4; ++i) ExpectSame(all[i], make(i));
    std::vector<TensorDict> g = gather(pg, make(rank), 3);
    if (rank == 3) {
      ASSERT_EQ(g.size(), 4u);
      for (int i = 0; i < 4; ++i) ExpectSame(g[i], make(i));
    } else {
      EXPECT_TRUE(g.empty());
    }
    // scatter from rank 0: only the source holds the inputs.
    std::vector<TensorDict> parts;
    if (rank == 0) {
      for (int i = 0; i < 4; ++i) parts.push_back(make(10 * i));
    }
    TensorDict mine = scatter(pg, parts, 0);
    ExpectSame(mine, make(10 * rank));
  }));
}

// Large leaves are reduced one c10d call each (PackedLayout::Pieces), packed as they are posted;
// bfloat16 and int16 ones through their widened copies, small ones in one call per group.
TEST(DistributedTest, ReductionsOfLargeLeaves) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(3), [](int rank, const ProcessGroupPtr& pg) {
    const int64_t n = internal::kAloneMinBytes / 2;  // 1 MiB of bfloat16 / int16, 2 of float
    auto make = [&](int r) {
      TensorDict t({{"f", at::full({2, n}, r + 1.0)},
                    {"g", at::full({2, n / 2}, r + 2.0)},
                    {"h", at::full({2, n}, r + 1.0).to(at::kBFloat16)},
                    {"s", at::full({2, n}, r - 1, at::kShort)},
                    {"small", at::full({2}, r + 1.0)}},
                   {2});
      t.set("strided", at::full({n, 2}, r + 1.0).t());  // packed through ATen's copy
      return t;
    };
    ASSERT_EQ(internal::PackedLayout(make(0)).Pieces().size(), 6u);  // 5 large, 1 small group
    TensorDict s = make(rank);
    at::Tensor f = s.get("f");
    all_reduce(pg, s);
    EXPECT_TRUE(at::equal(f, at::full({2, n}, 6.0)));  // in place
    EXPECT_TRUE(at::equal(s.get("g"), at::full({2, n / 2}, 9.0)));
    EXPECT_TRUE(at::equal(s.get("h"), at::full({2, n}, 6.0).to(at::kBFloat16)));
    EXPECT_TRUE(at::equal(s.get("s"), at::full({2, n}, 0, at::kShort)));
    EXPECT_TRUE(at::equal(s.get("small"), at::full({2}, 6.0)));
    EXPECT_TRUE(at::equal(s.get("strided"), at::full({2, n}, 6.0)));
    TensorDict r = make(rank);
    reduce(pg, r, 2, ReduceOp::kMax);
    if (rank == 2) ExpectSame(r, make(2));
  }));
}

TEST(DistributedTest, CollectiveMismatchFailsOnEveryRank) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(4), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict td({{"a", at::ones({2, rank == 2 ? 5 : 3})}}, {2});
    TD_EXPECT_THROW_MSG(all_reduce(pg, td), ValueError,
                        {"rank 2 differs from rank 0", "key 'a'", "[2,5] (rank 2) vs [2,3]"});
    EXPECT_EQ(td.get("a").sum().item<float>(), static_cast<float>(td.get("a").numel()));
    // Invalid scatter inputs on the source: every rank throws.
    std::vector<TensorDict> parts;
    if (rank == 0) parts = {td, td};
    TD_EXPECT_THROW_MSG(scatter(pg, parts, 0), ValueError,
                        {rank == 0 ? "passed 2 TensorDicts for a group of 4" : "source rank 0"});
  }));
}

// gather_and_stack: the destination's TensorDict (one row per other rank) receives the others'
// TensorDicts stacked in rank order, in place; the others get nullopt. A destination whose batch
// size does not fit, and ranks whose structures differ, fail on every rank with nothing written.
TEST(DistributedTest, GatherAndStackWritesTheOthersIntoTheDestination) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(3), [](int rank, const ProcessGroupPtr& pg) {
    auto mine = [](int r) {
      return TensorDict({{"a", at::full({2}, r + 1.0)},
                         {"n", TensorDict({{"i", at::full({2, 3}, r * 10, at::kLong)}}, {2, 3})}},
                        {2});
    };
    auto rows = [](int64_t n) {
      return TensorDict({{"a", at::zeros({n, 2})},
                         {"n", TensorDict({{"i", at::zeros({n, 2, 3}, at::kLong)}}, {n, 2, 3})}},
                        {n, 2});
    };
    TensorDict dst_td = rows(2);  // one row for rank 0, one for rank 2
    TensorDict own = mine(rank);
    const at::Tensor storage = dst_td.get("a");
    std::optional<TensorDict> out = gather_and_stack(pg, rank == 1 ? dst_td : own, 1);
    if (rank == 1) {
      ASSERT_TRUE(out.has_value());
      EXPECT_TRUE(out->is_same(dst_td));
      EXPECT_TRUE(dst_td.get("a").equal(at::tensor({1.0f, 1.0f, 3.0f, 3.0f}).view({2, 2})));
      EXPECT_TRUE(dst_td.get({"n", "i"}).select(0, 1).equal(at::full({2, 3}, 20, at::kLong)));
      EXPECT_TRUE(dst_td.get("a").is_same(storage));  // written in place
    } else {
      EXPECT_FALSE(out.has_value());
    }
    // The destination's batch size must start with world_size - 1.
    TensorDict wrong = rows(3);
    TensorDict& other = own;
    // (Its row fits the others' structure: they send and return, it refuses to write.)
    if (rank == 1) {
      TD_EXPECT_THROW_MSG(gather_and_stack(pg, wrong, 1), ValueError,
                          {"gather_and_stack", "[3, 2]", "world_size - 1 = 2"});
      EXPECT_TRUE(AllEqual(wrong, 0.0));
    } else {
      EXPECT_FALSE(gather_and_stack(pg, other, 1).has_value());
    }
    // A destination with no row to offer: every rank fails, none waits.
    TensorDict empty({}, {});
    if (rank == 1) {
      TD_EXPECT_THROW_MSG(gather_and_stack(pg, empty, 1), ValueError, {"world_size - 1 = 2"});
    } else {
      EXPECT_THROW(gather_and_stack(pg, other, 1), ValueError);
    }
    // Differing structures: every rank fails, the destination's TensorDict is untouched.
    TensorDict bad({{"a", at::full({2, 5}, 1.0)}}, {2});
    TensorDict before = dst_td.clone();
    EXPECT_THROW(gather_and_stack(pg, rank == 1 ? dst_td : (rank == 2 ? bad : other), 1), ValueError);
    ExpectSame(dst_td, before);
  }));
}

// The group's rendezvous and barrier keep the generous default timeout (a loaded machine may be
// slow to start a rank); the calls meant to fail get a short one of their own.
const auto kShortCall = std::chrono::milliseconds(3000);

TEST(DistributedTest, PeerDyingFailsTheSurvivorWithinTheTimeout) {
  const auto options = RunOptions().final_barrier(false);
  ExpectAllPassed(RunRanks(options, [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 1) {
      pg->barrier()->wait();
      std::_Exit(0);  // dies before sending anything
    }
    pg->barrier()->wait();
    TensorDict td({{"a", at::zeros({1000})}}, {1000});
    // Whether c10d notices the lost peer when the recv is posted, while it is awaited, or the
    // call's timeout fires first, the error is the same. (A survivor that never threw would be
    // killed at the run's deadline.)
    TD_EXPECT_THROW_MSG(recv(pg, td, 1, P2POptions().timeout(kShortCall)), TransportError,
                        {"td::distributed::recv (source rank 1): transport failure: "});
  }));
}

TEST(DistributedTest, PeerGoneBeforePostingFailsEveryCallWithTheSameError) {
  const auto options = RunOptions().final_barrier(false);
  ExpectAllPassed(RunRanks(options, [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 1) {
      pg->barrier()->wait();
      std::_Exit(0);
    }
    pg->barrier()->wait();
    // Usually long enough for Gloo to see the closed connection, so that every call below fails
    // when c10d posts it (gloo::IoException from pg->recv / send / allreduce ... themselves). On
    // a slow machine the first call may wait instead, until Gloo sees it or the call's timeout
    // fires: the error is the same, and after either the connection stays closed.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    TensorDict td({{"a", at::zeros({1000})}, {"b", at::zeros({1000}, at::kLong)}}, {1000});
    const char* failure = "transport failure: ";
    const auto p2p = P2POptions().timeout(kShortCall);
    const auto coll = CollectiveOptions().timeout(kShortCall);
    TD_EXPECT_THROW_MSG(recv(pg, td, 1, p2p), TransportError,
                        {"td::distributed::recv (source rank 1)", failure});
    TD_EXPECT_THROW_MSG(send(pg, td, 1, p2p), TransportError,
                        {"td::distributed::send (destination rank 1)", failure});
    TD_EXPECT_THROW_MSG(irecv(pg, td, 1, p2p).wait(), TransportError,
                        {"td::distributed::recv (source rank 1)", failure});
    TD_EXPECT_THROW_MSG(init_remote(pg, td, 1, p2p), TransportError,
                        {"td::distributed::init_remote (destination rank 1)", failure});
    TD_EXPECT_THROW_MSG(all_reduce(pg, td, ReduceOp::kSum, coll), TransportError,
                        {"td::distributed::all_reduce (rank 0 of 2)", failure});
    const auto unchecked = CollectiveOptions(coll).check_structure(false);
    TD_EXPECT_THROW_MSG(all_reduce(pg, td, ReduceOp::kSum, unchecked), TransportError,
                        {"td::distributed::all_reduce (rank 0 of 2)", failure});
    TD_EXPECT_THROW_MSG(broadcast(pg, td, 0, coll), TransportError,
                        {"td::distributed::broadcast (source rank 0; rank 0 of 2)", failure});
    TD_EXPECT_THROW_MSG(reduce(pg, td, 1, ReduceOp::kMax, unchecked), TransportError,
                        {"td::distributed::reduce (destination rank 1; rank 0 of 2)", failure});
    TD_EXPECT_THROW_MSG(all_gather(pg, td, coll), TransportError,
                        {"td::distributed::all_gather (rank 0 of 2)", failure});
    TD_EXPECT_THROW_MSG(scatter(pg, {td, td}, 0, coll), TransportError,
                        {"td::distributed::scatter (source rank 0; rank 0 of 2)", failure});
  }));
}

// The call's own timeout ends the wait: the group's timeout (10 min) outlasts the run's deadline
// (RunOptions::deadline), so a timeout that did not fire would get the run killed. A fired
// timeout closes Gloo's connections for good, on both ranks (P2POptions::timeout): rank 0's next
// send fails, and rank 1's pending receive from it fails instead of getting that send. No final
// barrier: the group is unusable.
TEST(DistributedTest, RecvTimesOutWithoutASenderAndTheConnectionStaysClosed) {
  auto options = RunOptions()
                     .group_timeout(std::chrono::milliseconds(600000))
                     .final_barrier(false);
  ExpectAllPassed(RunRanks(options, [](int rank, const ProcessGroupPtr& pg) {
    pg->barrier()->wait();
    TensorDict td({{"a", at::zeros({4})}}, {4});
    if (rank == 1) {
      TD_EXPECT_THROW_MSG(recv(pg, td, 0, P2POptions().tag(4)), TransportError,
                          {"td::distributed::recv (source rank 0): transport failure: "});
      return;
    }
    TD_EXPECT_THROW_MSG(
        recv(pg, td, 1, P2POptions().tag(3).timeout(std::chrono::milliseconds(500))),
        TransportError, {"td::distributed::recv (source rank 1): transport failure: "});
    TD_EXPECT_THROW_MSG(send(pg, td, 1, P2POptions().tag(4)), TransportError,
                        {"td::distributed::send (destination rank 1): transport failure: "});
  }));
}

TEST(DistributedTest, OptionsFromEnvironment) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(1), [](int, const ProcessGroupPtr&) {
    ::setenv("MASTER_ADDR", "10.1.2.3", 1);
    ::setenv("MASTER_PORT", "1234", 1);
    ::setenv("WORLD_SIZE", "8", 1);
    ::setenv("RANK", "5", 1);
    ::setenv("LOCAL_RANK", "1", 1);
    GroupOptions o = options_from_env();
    EXPECT_EQ(o.master_addr(), "10.1.2.3");
    EXPECT_EQ(o.master_port(), 1234);
    EXPECT_EQ(o.world_size(), 8);
    EXPECT_EQ(o.rank(), 5);
    EXPECT_EQ(o.local_rank(), 1);
    ::setenv("RANK", "8", 1);
    TD_EXPECT_THROW_MSG(options_from_env(), ValueError, {"RANK='8'"});
    ::setenv("RANK", "x", 1);
    TD_EXPECT_THROW_MSG(options_from_env(), ValueError, {"RANK='x'"});
    TD_EXPECT_THROW_MSG(init_process_group(GroupOptions().rank(3).world_size(2)), ValueError,
                        {"rank 3"});
  }));
}

// device_interface binds Gloo by interface name; GLOO_SOCKET_IFNAME sets it (and replaces a
// device_hostname, as the variable does in PyTorch). The multi-host suite checks where the bytes
// go; here, the errors.
TEST(DistributedTest, DeviceInterface) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(1), [](int, const ProcessGroupPtr&) {
    ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    GroupOptions o = options_from_env(GroupOptions().device_hostname("10.9.9.9"));
    EXPECT_EQ(o.device_interface(), "lo");
    EXPECT_EQ(o.device_hostname(), "");
    ::unsetenv("GLOO_SOCKET_IFNAME");
    EXPECT_EQ(options_from_env().device_interface(), "");
    const std::string dir = test::MakeTempDir();
    ProcessGroupPtr pg = init_process_group(o.file_store_path(dir + "/a"));
    TensorDict t({{"x", at::ones({3})}}, {3});
    all_reduce(pg, t);
    EXPECT_TRUE(at::equal(t.get("x"), at::ones({3})));
    TD_EXPECT_THROW_MSG(
        init_process_group(GroupOptions().file_store_path(dir + "/b").device_interface("tdnone7")),
        TransportError,
        {"td::distributed::init_process_group: rank 0 of 1 could not join the group",
         "Gloo on interface(s) tdnone7"});
    TD_EXPECT_THROW_MSG(init_process_group(GroupOptions().device_interface("lo,")), ValueError,
                        {"device_interface 'lo,' holds an empty interface name"});
    TD_EXPECT_THROW_MSG(
        init_process_group(GroupOptions().device_interface("lo").device_hostname("127.0.0.1")),
        ValueError, {"device_hostname '127.0.0.1' and device_interface 'lo' are both set"});
  }));
}

}  // namespace
}  // namespace distributed
}  // namespace td
