// td::distributed under faults (docs/distributed.md, "Faults"): messages a receiver refuses,
// leaves that cannot be written, TensorDicts changed after isend, invalid timeouts, hostile
// headers and structures. In every case the process survives, the error names the call, and the
// receiving TensorDict is unchanged. Two real processes over a FileStore (multiprocess_testing.h).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "td/core/comparison.h"
#include "td/core/testing.h"
#include "td/distributed/distributed.h"
#include "td/distributed/internal/init_message.h"
#include "td/distributed/multiprocess_testing.h"
#include "td/distributed/internal/packing.h"
#include "td/nn/functional.h"

namespace td {
namespace distributed {
namespace {

using test::AllEqual;
using test::ExpectAllPassed;
using test::RunOptions;
using test::RunRanks;

// {"a": [4, 3], "n": {"b": [4], "c": [4, 2]}}, batch [4], every leaf `value`.
TensorDict Sample(double value) {
  return TensorDict({{"a", at::full({4, 3}, value)},
                     {"n", TensorDict({{"b", at::full({4}, value)}, {"c", at::full({4, 2}, value)}},
                                      {4})}},
                    {4});
}


// A refused init_remote message still agrees on its structure on both sides: the sender's next
// send of that structure is one message sized for the agreement, and the receiver posts room for
// it (before, the receiver's Gloo thread aborted the process: "op.preamble.length <= op.nbytes").
TEST(FaultsTest, RecvRefusingInitRemoteKeepsTheAgreementInStep) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 0) {
      init_remote(pg, Sample(1), 1);
      send(pg, Sample(2), 1);
      send(pg, Sample(3), 1, P2POptions().wire_format(WireFormat::kPerLeaf));
    } else {
      TensorDict u = Sample(0);
      TD_EXPECT_THROW_MSG(recv(pg, u, 0), ValueError,
                          {"td::distributed::recv (source rank 0)",
                           "rank 0 sent an init_remote message; receive it with from_remote_init",
                           "nothing was written"});
      EXPECT_TRUE(AllEqual(u, 0));
      recv(pg, u, 0);
      EXPECT_TRUE(AllEqual(u, 2));
      recv(pg, u, 0);
      EXPECT_TRUE(AllEqual(u, 3));
    }
  }));
}

TEST(FaultsTest, RecvRefusingASecondLargerInitRemoteKeepsTheAgreementInStep) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict bigger = Sample(5);
    bigger.set("big", at::full({4, 100}, 5.0));
    if (rank == 0) {
      init_remote(pg, Sample(1), 1);
      init_remote(pg, bigger, 1);
      send(pg, bigger.apply([](const at::Tensor& x) { return x + 1; }), 1);
    } else {
      TensorDict u = from_remote_init(pg, 0);
      EXPECT_TRUE(AllEqual(u, 1));
      TD_EXPECT_THROW_MSG(recv(pg, u, 0), ValueError, {"sent an init_remote message"});
      EXPECT_TRUE(AllEqual(u, 1));
      TensorDict v = bigger.clone().zero_();
      recv(pg, v, 0);
      EXPECT_TRUE(AllEqual(v, 6));
    }
  }));
}


// {"a": zeros(4), "b": `b`}, batch [4].
TensorDict WithLeafB(at::Tensor b) { return TensorDict({{"a", at::zeros({4})}, {"b", b}}, {4}); }

// A leaf that requires grad is written under no-grad (as load_state_dict does); a leaf that
// cannot be written in place (an expanded view) is refused before any leaf is written.
TEST(FaultsTest, RecvWritesLeavesThatRequireGradAndRefusesUnwritableOnesWhole) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const auto per_leaf = P2POptions().wire_format(WireFormat::kPerLeaf);
    TensorDict ones = WithLeafB(at::ones({4}));
    ones.set("a", at::ones({4}));
    if (rank == 0) {
      for (const P2POptions& o : {P2POptions(), per_leaf}) {
        send(pg, ones, 1, o);  // into a leaf that requires grad
        send(pg, ones, 1, o);  // refused: expanded leaf
        send(pg, ones, 1, o);  // refused: inference tensor
        send(pg, ones, 1, o);  // still arrives: the refused messages were consumed
      }
    } else {
      for (const char* format : {"packed", "per leaf"}) {
        SCOPED_TRACE(format);
        at::Tensor param = at::zeros({4}).requires_grad_();
        TensorDict grad_leaf = WithLeafB(param);
        recv(pg, grad_leaf, 0);
        EXPECT_TRUE(AllEqual(grad_leaf, 1));
        EXPECT_TRUE(param.requires_grad());
        EXPECT_TRUE(param.is_leaf());
        EXPECT_TRUE(at::equal(param, at::ones({4})));
        TensorDict expanded = WithLeafB(at::zeros({1}).expand({4}));
        TD_EXPECT_THROW_MSG(recv(pg, expanded, 0), ValueError,
                            {"td::distributed::recv (source rank 0)", "key 'b'",
                             "share memory", "nothing was written"});
        EXPECT_TRUE(AllEqual(expanded, 0));
        at::Tensor inference;
        {
          c10::InferenceMode guard;
          inference = at::zeros({4});
        }
        TensorDict frozen = WithLeafB(inference);
        TD_EXPECT_THROW_MSG(recv(pg, frozen, 0), ValueError,
                            {"td::distributed::recv (source rank 0)", "key 'b'",
                             "inference tensor", "nothing was written"});
        EXPECT_TRUE(AllEqual(frozen, 0));
        TensorDict plain = WithLeafB(at::zeros({4}));
        recv(pg, plain, 0);
        EXPECT_TRUE(AllEqual(plain, 1));
      }
    }
  }));
}

// Shipping a learner's weights to an actor as users write it: the parameters of the receiving
// module are written in place and stay trainable leaves.
TEST(FaultsTest, BroadcastIntoModuleParametersFromModule) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    at::manual_seed(rank + 1);
    torch::nn::Linear policy(3, 2);
    at::Tensor weight = policy->weight;
    broadcast(pg, td::nn::from_module(*policy), 0);
    std::vector<TensorDict> all = all_gather(pg, td::nn::from_module(*policy));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_TRUE(at::equal(all[1].get("weight"), all[0].get("weight")));
    EXPECT_TRUE(at::equal(all[1].get("bias"), all[0].get("bias")));
    EXPECT_TRUE(policy->weight.is_same(weight));  // written in place
    EXPECT_TRUE(policy->weight.is_leaf());
    EXPECT_TRUE(policy->weight.requires_grad());
    policy->forward(at::ones({1, 3})).sum().backward();
    EXPECT_TRUE(policy->weight.grad().defined());
    all_reduce(pg, td::nn::from_module(*policy), ReduceOp::kAvg);  // same weights: unchanged
    EXPECT_TRUE(at::allclose(policy->weight, all[0].get("weight")));
  }));
}

// A rank that cannot write its leaves throws alone, unchanged, after the exchange; the others
// complete the collective.
TEST(FaultsTest, CollectivesRefuseUnwritableLeavesOnTheRankThatHoldsThem) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict mine = rank == 0 ? WithLeafB(at::ones({4})) : WithLeafB(at::zeros({1}).expand({4}));
    if (rank == 0) mine.set("a", at::ones({4}));
    if (rank == 1) {
      TD_EXPECT_THROW_MSG(broadcast(pg, mine, 0), ValueError,
                          {"td::distributed::broadcast (source rank 0; rank 1 of 2)", "key 'b'",
                           "nothing was written"});
      EXPECT_TRUE(AllEqual(mine, 0));
      TD_EXPECT_THROW_MSG(all_reduce(pg, mine), ValueError,
                          {"td::distributed::all_reduce (rank 1 of 2)", "key 'b'"});
      EXPECT_TRUE(AllEqual(mine, 0));
    } else {
      broadcast(pg, mine, 0);
      all_reduce(pg, mine);
      EXPECT_TRUE(AllEqual(mine, 1));  // 1 + 0 from rank 1
    }
  }));
}

// isend copies the leaves before it returns, in both wire formats: the receiver, which only
// posts its receives once the sender has overwritten its TensorDict, gets the values of the time
// of isend. (Gloo sends a leaf's bytes only once the receiver has posted its receive, so without
// the copy the receiver would see the overwritten values.)
TEST(FaultsTest, IsendSendsTheValuesOfItsCall) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const auto go = P2POptions().tag(9);
    TensorDict signal({{"x", at::zeros({1})}}, {1});
    for (WireFormat format : {WireFormat::kPerLeaf, WireFormat::kPacked}) {
      if (rank == 0) {
        TensorDict t = Sample(1);
        Work w = isend(pg, t, 1, P2POptions().wire_format(format));
        t.fill_(9);
        send(pg, signal, 1, go);  // only now does rank 1 post its receive
        w.wait();
      } else {
        recv(pg, signal, 0, go);
        TensorDict u = Sample(0);
        recv(pg, u, 0);
        EXPECT_TRUE(AllEqual(u, 1)) << (format == WireFormat::kPerLeaf ? "per leaf" : "packed");
      }
    }
  }));
}

// A timeout must be positive; 0 and negative values are refused before anything is posted, so
// the group stays usable.
TEST(FaultsTest, NonPositiveTimeoutsAreRefused) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const int peer = 1 - rank;
    TensorDict t = Sample(0);
    for (int64_t ms : {0, -1, -5}) {
      SCOPED_TRACE(ms);
      const auto p2p = P2POptions().timeout(std::chrono::milliseconds(ms));
      const auto coll = CollectiveOptions().timeout(std::chrono::milliseconds(ms));
      const std::string says = "timeout of " + std::to_string(ms) + " ms: a timeout must be positive";
      const std::string peer_s = std::to_string(peer);
      TD_EXPECT_THROW_MSG(send(pg, t, peer, p2p), ValueError,
                          {"td::distributed::send (destination rank " + peer_s + ")", says});
      TD_EXPECT_THROW_MSG(isend(pg, t, peer, p2p), ValueError, {says});
      TD_EXPECT_THROW_MSG(recv(pg, t, peer, p2p), ValueError,
                          {"td::distributed::recv (source rank " + peer_s + ")", says});
      TD_EXPECT_THROW_MSG(irecv(pg, t, peer, p2p), ValueError, {says});
      TD_EXPECT_THROW_MSG(init_remote(pg, t, peer, p2p), ValueError, {says});
      TD_EXPECT_THROW_MSG(from_remote_init(pg, peer, p2p), ValueError, {says});
      TD_EXPECT_THROW_MSG(broadcast(pg, t, 0, coll), ValueError,
                          {"td::distributed::broadcast", says});
      TD_EXPECT_THROW_MSG(all_reduce(pg, t, ReduceOp::kSum, coll), ValueError, {says});
      TD_EXPECT_THROW_MSG(reduce(pg, t, 0, ReduceOp::kSum, coll), ValueError, {says});
      TD_EXPECT_THROW_MSG(all_gather(pg, t, coll), ValueError, {says});
      TD_EXPECT_THROW_MSG(gather(pg, t, 0, coll), ValueError, {says});
      TD_EXPECT_THROW_MSG(scatter(pg, {}, 0, coll), ValueError, {says});
    }
    EXPECT_TRUE(AllEqual(t, 0));
    // Nothing was posted: the pair still works.
    if (rank == 0) {
      send(pg, Sample(4), 1, P2POptions().timeout(std::chrono::milliseconds(10000)));
    } else {
      recv(pg, t, 0, P2POptions().timeout(std::chrono::milliseconds(10000)));
      EXPECT_TRUE(AllEqual(t, 4));
    }
  }));
}

// ---- Hostile headers and structures: raw c10d messages on td::distributed's tags ------------
// P2P tag t uses c10d tag 2t for headers and 2t + 1 for what follows (NOTE [ Packed layout ]).

void RawSend(const ProcessGroupPtr& pg, const at::Tensor& t, int c10d_tag) {
  std::vector<at::Tensor> bufs = {t};
  pg->send(bufs, 1, c10d_tag)->wait(std::chrono::milliseconds(10000));
}

void SendHeader(const ProcessGroupPtr& pg, int tag, int64_t kind, int64_t desc_bytes,
                int64_t data_bytes, int64_t flags) {
  at::Tensor h = at::tensor({internal::kMagic, kind, int64_t{0}, desc_bytes, data_bytes, flags},
                            at::kLong);
  RawSend(pg, h, 2 * tag);
}

// An init_remote message whose structure is `desc`, with `data_bytes` bytes of data.
void SendInit(const ProcessGroupPtr& pg, int tag, const std::string& desc, int64_t data_bytes) {
  SendHeader(pg, tag, internal::kKindInit, static_cast<int64_t>(desc.size()), data_bytes, 0);
  at::Tensor payload = at::zeros({internal::AlignUp(static_cast<int64_t>(desc.size())) + data_bytes},
                                 at::kByte);
  std::memcpy(payload.data_ptr<uint8_t>(), desc.data(), desc.size());
  RawSend(pg, payload, 2 * tag + 1);
}

std::string Level(const std::string& entries, const std::string& device = "null") {
  return R"({"batch_size":[],"device":)" + device + R"(,"entries":[)" + entries + "]}";
}

std::string TensorEntry(const std::string& shape, int dtype = 6) {
  return R"({"key":"a","kind":"tensor","dtype":)" + std::to_string(dtype) + R"(,"shape":)" +
         shape + "}";
}

// The "wire" format's bytes (internal/init_message.h) are the message init_remote sends, both
// ways: rank 0's init_remote, taken raw, is EncodeInitMessage's bytes and decodes to the
// TensorDict sent; those bytes, sent raw, are what from_remote_init takes.
TEST(FaultsTest, WireFormatBytesAreTheInitRemoteMessage) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict td = Sample(2.5);
    td.set("label", "some text");
    td.set("ids", at::arange(4, at::kInt));
    const std::string bytes = internal::EncodeInitMessage(td);
    const auto header_bytes = internal::kHeaderBytes;
    const auto payload_bytes = static_cast<int64_t>(bytes.size()) - header_bytes;
    if (rank == 0) {
      init_remote(pg, td, 1, P2POptions().tag(1));
      at::Tensor raw = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
      std::memcpy(raw.data_ptr<uint8_t>(), bytes.data(), bytes.size());
      RawSend(pg, raw.narrow(0, 0, header_bytes).clone(), 2 * 2);
      RawSend(pg, raw.narrow(0, header_bytes, payload_bytes).clone(), 2 * 2 + 1);
      return;
    }
    std::vector<at::Tensor> header = {at::empty({header_bytes}, at::kByte)};
    std::vector<at::Tensor> payload = {at::empty({payload_bytes}, at::kByte)};
    pg->recv(header, 0, 2 * 1)->wait(std::chrono::milliseconds(10000));
    pg->recv(payload, 0, 2 * 1 + 1)->wait(std::chrono::milliseconds(10000));
    std::string sent(reinterpret_cast<const char*>(header[0].data_ptr<uint8_t>()), header_bytes);
    sent.append(reinterpret_cast<const char*>(payload[0].data_ptr<uint8_t>()), payload_bytes);
    EXPECT_EQ(sent, bytes);
    const TensorDict decoded = internal::DecodeInitMessage(sent);
    assert_allclose(decoded, td);  // non-tensor entries compared too
    assert_allclose(from_remote_init(pg, 0, P2POptions().tag(2)), td);
  }));
}

// Bytes that are not one whole init_remote message are named errors of the "wire" format.
TEST(FaultsTest, WireFormatRefusesOtherBytesByName) {
  const std::string bytes = internal::EncodeInitMessage(Sample(1));
  const std::string what = "init_remote message (format \"wire\")";
  TD_EXPECT_THROW_MSG(internal::DecodeInitMessage(bytes.substr(0, 20)), ValueError,
                      {what, "20 bytes, fewer than the 48"});
  TD_EXPECT_THROW_MSG(internal::DecodeInitMessage(bytes + "x"), ValueError,
                      {what, "but its header announces"});
  std::string send = bytes;
  send[8] = static_cast<char>(internal::kKindData);
  TD_EXPECT_THROW_MSG(internal::DecodeInitMessage(send), ValueError, {what, "send()"});
  std::string json = bytes;
  json[internal::kHeaderBytes] = '[';
  TD_EXPECT_THROW_MSG(internal::DecodeInitMessage(json), ValueError, {what, "not JSON"});
  std::string magic = bytes;
  magic[0] ^= 1;
  TD_EXPECT_THROW_MSG(internal::DecodeInitMessage(magic), ValueError,
                      {what, "not a td::distributed message"});
}

// A structure scatter receives is read as init_remote's is (ReadStructure in
// internal/init_message.h): bytes that are not a TensorDict structure, broadcast raw on the
// source's side of scatter's protocol, are a ValueError naming the source, before anything is
// allocated.
TEST(FaultsTest, HostileScatterStructuresAreRefusedByName) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const std::string bad = "{{{";
    c10d::BroadcastOptions bo;
    bo.rootRank = 0;
    if (rank == 0) {  // scatter's header (inputs valid, structure bytes), then the structure
      std::vector<at::Tensor> header = {
          at::tensor({int64_t{1}, static_cast<int64_t>(bad.size())}, at::kLong)};
      pg->broadcast(header, bo)->wait(std::chrono::milliseconds(10000));
      std::vector<at::Tensor> text = {at::empty({static_cast<int64_t>(bad.size())}, at::kByte)};
      std::memcpy(text[0].data_ptr<uint8_t>(), bad.data(), bad.size());
      pg->broadcast(text, bo)->wait(std::chrono::milliseconds(10000));
      return;
    }
    TD_EXPECT_THROW_MSG(scatter(pg, {}, 0), ValueError,
                        {"td::distributed::scatter", "source rank 0", "is not JSON",
                         "nothing was allocated"});
  }));
}

// A header may not make the receiver allocate more than its limit (its own TensorDict's message
// size or P2POptions::max_bytes); refused messages leave their tag unusable, by a named error.
TEST(FaultsTest, HostileHeadersAreRefusedBeforeAllocating) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 0) {
      SendHeader(pg, 1, internal::kKindData, 0, int64_t{1} << 46, 0);
      SendHeader(pg, 2, internal::kKindData, 0, int64_t{12} << 30, 0);
      SendHeader(pg, 3, internal::kKindInit, 0, int64_t{12} << 30, 0);
      RawSend(pg, at::full({6}, 7, at::kLong), 2 * 4);  // not ours
      // Its table (NOTE [ Packed layout ]): two leaf messages follow, of 1 TiB each.
      SendHeader(pg, 5, internal::kKindData, 0, internal::kAlign, internal::kPerLeafFlag);
      at::Tensor table = at::zeros({internal::kAlign / 8}, at::kLong);
      table[0] = 2;
      table.narrow(0, 1, 2).fill_(int64_t{1} << 40);
      RawSend(pg, table, 2 * 5 + 1);
      send(pg, Sample(7), 1, P2POptions().tag(6));
      return;
    }
    TensorDict u = Sample(0);
    auto on = [](int tag) { return P2POptions().tag(tag); };
    const std::string who = "td::distributed::recv (source rank 0)";
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(1)), ValueError,
                        {who, "announced 70368744177664 bytes", "nothing was written"});
    // The bytes announced were never received: the tag stays refused, by the same error.
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(1)), ValueError, {who, "announced 70368744177664 bytes"});
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(2)), ValueError, {who, "announced 12884901888 bytes"});
    TD_EXPECT_THROW_MSG(from_remote_init(pg, 0, on(3)), ValueError,
                        {"td::distributed::from_remote_init (source rank 0)",
                         "announced 12884901888 bytes", "P2POptions::max_bytes"});
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(4)), ValueError,
                        {who, "not a td::distributed message"});
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(5)), ValueError,
                        {who, "announced 2199023255552 bytes (2 leaf messages)"});
    EXPECT_TRUE(AllEqual(u, 0));
    EXPECT_LT(internal::ScratchPoolBytes(), int64_t{1} << 20);  // nothing large was allocated
    // A message the size of the receiving TensorDict is always taken, whatever max_bytes says.
    recv(pg, u, 0, on(6).max_bytes(0));
    EXPECT_TRUE(AllEqual(u, 7));
    TD_EXPECT_THROW_MSG(recv(pg, u, 0, on(6).max_bytes(-1)), ValueError, {"max_bytes -1"});
  }));
}

// A kPacked receive writes nothing until its last large leaf has arrived: here the header, the
// table and the inline data arrive (raw c10d messages laid out as NOTE [ Packed layout ] says),
// then the sender exits instead of sending the large leaf.
TEST(FaultsTest, APackedReceiveWhoseLargeLeafNeverArrivesWritesNothing) {
  const auto options = RunOptions().final_barrier(false);
  ExpectAllPassed(RunRanks(options, [](int rank, const ProcessGroupPtr& pg) {
    TensorDict td({{"big", at::full({internal::kAloneMinBytes / 4}, rank == 0 ? 5. : 0.)},
                   {"small", at::full({16}, rank == 0 ? 5. : 0.)}},
                  {});
    const internal::PackedLayout layout(td);
    if (rank == 0) {
      const int64_t sig = internal::AlignUp(static_cast<int64_t>(layout.signature().size()));
      at::Tensor payload = layout.Pack(sig + internal::kAlign, /*inline_only=*/true);
      payload.narrow(0, 0, sig + internal::kAlign).zero_();
      std::memcpy(payload.data_ptr<uint8_t>(), layout.signature().data(),
                  layout.signature().size());
      auto* table = reinterpret_cast<int64_t*>(payload.data_ptr<uint8_t>() + sig);
      table[0] = 1;
      table[1] = internal::kAloneMinBytes;
      at::Tensor h = at::tensor({internal::kMagic, internal::kKindData, int64_t{0},
                                 static_cast<int64_t>(layout.signature().size()),
                                 payload.numel() - sig, int64_t{0}},
                                at::kLong);
      uint64_t fp = layout.fingerprint();
      std::memcpy(h.data_ptr<int64_t>() + 2, &fp, sizeof(fp));
      RawSend(pg, h, 0);
      RawSend(pg, payload, 1);
      std::_Exit(0);  // the large leaf never leaves
    }
    // Gloo sees the closed connection, or the call's own (short) timeout fires: the same error.
    TD_EXPECT_THROW_MSG(recv(pg, td, 0, P2POptions().timeout(std::chrono::milliseconds(3000))),
                        TransportError,
                        {"td::distributed::recv (source rank 0): transport failure: "});
    EXPECT_TRUE(AllEqual(td, 0));  // the inline data arrived, and was not written
  }));
}

// init_remote structures are checked before anything is allocated for them; each refused message
// is consumed whole, so the tag stays usable.
TEST(FaultsTest, HostileInitRemoteStructuresAreRefusedByName) {
  struct Case {
    std::string desc;
    int64_t data_bytes;
    std::vector<std::string> says;
  };
  // 100,000 levels: a parser that recursed before checking the depth would overflow the stack.
  std::string deep;
  for (int i = 0; i < 100000; ++i) {
    deep += R"({"batch_size":[],"device":null,"entries":[{"key":"n","kind":"tensordict","value":)";
  }
  deep += Level("");
  for (int i = 0; i < 100000; ++i) deep += "}]}";
  const std::vector<Case> cases = {
      {Level(TensorEntry("[-1]")), 64, {"key 'a'", "holds -1, not an integer in [0, 2^63-1]"}},
      {Level(TensorEntry("[4,4611686018427387904,4]")), 64,
       {"key 'a'", "has more bytes than fit in int64"}},
      {Level(TensorEntry("[1099511627776]")), 64, {"key 'a'", "more than the 64 bytes of data"}},
      {Level(TensorEntry("[4]", 99)), 64, {"key 'a'", "unknown dtype code 99"}},
      {Level(TensorEntry("[4]"), R"("cuda:0")"), 64, {"device 'cuda:0' is not available"}},
      {Level(TensorEntry("[4]"), R"("nonsense:3")"), 64, {"'nonsense:3' is not a device name"}},
      {Level(R"({"key":"a","kind":"socket"})"), 0, {"entry kind 'socket' is unknown"}},
      {"{{{", 0, {"is not JSON"}},
      {deep, 0, {"JSON nested deeper than 512 levels"}},
  };
  ExpectAllPassed(RunRanks(RunOptions(), [&cases](int rank, const ProcessGroupPtr& pg) {
    if (rank == 0) {
      for (const Case& c : cases) SendInit(pg, 0, c.desc, c.data_bytes);
      init_remote(pg, Sample(1), 1);
      send(pg, Sample(2), 1);
      return;
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(c.desc.substr(0, 120));
      std::vector<std::string> says = c.says;
      says.push_back("td::distributed::from_remote_init (source rank 0)");
      if (c.says[0] != "is not JSON") says.push_back("the TensorDict structure received is invalid");
      if (c.says[0] == "device 'cuda:0' is not available" && at::hasCUDA()) {
        try {  // a CUDA build takes that device; the message must still be consumed
          from_remote_init(pg, 0);
        } catch (const ValueError&) {
        }
        continue;
      }
      TD_EXPECT_THROW_MSG(from_remote_init(pg, 0), ValueError, (says));
    }
    TensorDict u = from_remote_init(pg, 0);
    EXPECT_TRUE(AllEqual(u, 1));
    recv(pg, u, 0);
    EXPECT_TRUE(AllEqual(u, 2));
  }));
}

// A stray message up to 64 KiB on a header tag (a plain c10d send) is read as a header, refused
// by name and consumed (NOTE [ Messages larger than the receive ] in p2p.cc); before, any
// message longer than 48 bytes made Gloo abort the receiving process.
TEST(FaultsTest, StrayPlainC10dMessageOnATdTagIsRefusedAndConsumed) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    const auto on7 = P2POptions().tag(7);
    if (rank == 0) {
      RawSend(pg, at::full({4096}, 0x5A, at::kByte), 2 * 7);
      RawSend(pg, at::full({64 << 10}, 0x5A, at::kByte), 2 * 7);
      send(pg, Sample(3), 1, on7);
      return;
    }
    TensorDict u = Sample(0);
    for (int i = 0; i < 2; ++i) {
      TD_EXPECT_THROW_MSG(recv(pg, u, 0, on7), ValueError,
                          {"td::distributed::recv (source rank 0)",
                           "is not a td::distributed message"});
    }
    EXPECT_TRUE(AllEqual(u, 0));
    recv(pg, u, 0, on7);
    EXPECT_TRUE(AllEqual(u, 3));
  }));
}

}  // namespace
}  // namespace distributed
}  // namespace td
