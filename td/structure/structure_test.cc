// structure::Builder applies every rule of NOTE [ Structure codec ] (td/structure/structure.h), in
// structure_check's words and tagged with its Rule; and a seeded sweep of random structures,
// checked against a model of the rules written here, finds the same verdict for each.
#include "td/structure/structure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "td/compat/dtypes.h"

namespace td {
namespace structure {
namespace {

using nlohmann::json;

// OK status, or the test fails with its message.
#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const absl::Status _s = (expr);                       \
    ASSERT_TRUE(_s.ok()) << _s;                           \
  } while (false)

void ExpectRule(const absl::Status& s, Rule rule, const std::string& words) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(RuleOf(s), rule) << s;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find(words), std::string::npos) << s << "\nwant: " << words;
}

// A TensorDict root of batch size `batch`.
Level& Root(Builder& b, std::vector<int64_t> batch) {
  Level& root = b.Root(LevelKind::kTensorDict);
  EXPECT_TRUE(b.SetBatchSize(root, batch).ok());
  return root;
}

TEST(StructureBuilder, BuildsWhatItIsTold) {
  Builder b;
  Level& root = Root(b, {2});
  Location file;
  file.name = "a.memmap";
  absl::StatusOr<const Entry*> a =
      b.AddLeaf(root, "a", Dtype::Name("torch.float32"), json::parse("[2, 3]"), file);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->nbytes, 24);
  EXPECT_EQ((*a)->location.name, "a.memmap");
  absl::StatusOr<Level*> sub = b.AddLevel(root, "sub", LevelKind::kTensorDict);
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ((*sub)->depth(), 1);
  ASSERT_OK(b.SetBatchSize(**sub, std::vector<int64_t>{2, 5}));
  (*sub)->info.device = "cpu";
  ASSERT_TRUE(b.AddLeaf(**sub, "c", Dtype::Code(4), std::vector<int64_t>{2, 5}).ok());
  ASSERT_TRUE(b.AddNonTensor(root, "n", json("text")).ok());
  absl::StatusOr<Description> d = std::move(b).Finish();
  ASSERT_TRUE(d.ok()) << d.status();
  const Level& r = d->root();
  ASSERT_EQ(r.entries().size(), 3u);
  EXPECT_EQ(r.entries()[0].key, "a");
  EXPECT_EQ(r.entries()[1].kind, EntryKind::kLevel);
  EXPECT_EQ(r.entries()[2].data, json("text"));
  const Entry* c = r.Find("sub")->level->Find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, c10::ScalarType::Long);
  EXPECT_EQ(c->nbytes, 80);
  EXPECT_EQ(r.Find("sub")->level->info.device, "cpu");
  EXPECT_EQ(r.Find("zz"), nullptr);
}

TEST(StructureBuilder, NestingDepth) {
  Builder b;
  Level* level = &Root(b, {});
  for (int depth = 1; depth <= kMaxNestingDepth; ++depth) {
    absl::StatusOr<Level*> sub = b.AddLevel(*level, "d", LevelKind::kTensorDict);
    ASSERT_TRUE(sub.ok()) << depth << ": " << sub.status();
    level = *sub;
    ASSERT_OK(b.SetBatchSize(*level, std::vector<int64_t>{}));
  }
  ExpectRule(b.AddLevel(*level, "d", LevelKind::kTensorDict).status(), Rule::kNestingDepth,
             "TensorDicts nested more than 128 levels deep (td::kMaxNestingDepth)");
  EXPECT_TRUE(std::move(b).Finish().ok());
}

TEST(StructureBuilder, KeysAreDistinct) {
  Builder b;
  Level& root = Root(b, {});
  ASSERT_TRUE(b.AddLeaf(root, "x", c10::ScalarType::Float, std::vector<int64_t>{}).ok());
  const std::string words = "the key appears twice in its level";
  ExpectRule(b.AddLeaf(root, "x", c10::ScalarType::Float, std::vector<int64_t>{}).status(),
             Rule::kKey, words);
  ExpectRule(b.AddLevel(root, "x", LevelKind::kTensorDict).status(), Rule::kKey, words);
  ExpectRule(b.AddNonTensor(root, "x", 1).status(), Rule::kKey, words);
  // The key is checked before what the entry holds.
  ExpectRule(b.AddLeaf(root, "x", Dtype::Name("torch.float99"), std::vector<int64_t>{}).status(),
             Rule::kKey, words);
  EXPECT_EQ(root.entries().size(), 1u);
}

TEST(StructureBuilder, ShapesAndBatchSizes) {
  const std::pair<const char*, const char*> bad[] = {
      {"[-1]", "holds -1, not an integer in [0, 2^63-1] ([-1])"},
      {"[3.5]", "holds 3.5, not an integer in [0, 2^63-1]"},
      {"[18446744073709551615]", "holds 18446744073709551615, not an integer in [0, 2^63-1]"},
      {"\"x\"", "expected a list of integers in [0, 2^63-1], got a string"},
      {"null", "expected a list of integers in [0, 2^63-1], got a null"},
  };
  for (const auto& [text, words] : bad) {
    Builder b;
    Level& root = b.Root(LevelKind::kTensorDict);
    const json j = json::parse(text);
    ExpectRule(b.SetBatchSize(root, j), Rule::kBatchSize, words);
    ExpectRule(b.SetBatchSize(root, nlohmann::ordered_json::parse(text)), Rule::kBatchSize,
               words);
    ASSERT_OK(b.SetBatchSize(root, std::vector<int64_t>{}));
    ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, j).status(), Rule::kShape, words);
  }
  // More than kMaxStructureDims dims, as JSON or as sizes the format read.
  Builder b;
  Level& root = Root(b, {});
  const std::vector<int64_t> many(internal::kMaxStructureDims + 1, 1);
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, json(many)).status(), Rule::kShape,
             "has 65 dims; at most 64 are supported");
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, many).status(), Rule::kShape,
             "has 65 dims; at most 64 are supported");
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, std::vector<int64_t>{4, -2}).status(),
             Rule::kShape, "holds -2, not an integer in [0, 2^63-1] ([4,-2])");
  EXPECT_TRUE(
      b.AddLeaf(root, "a", c10::ScalarType::Float, std::vector<int64_t>(64, 1)).ok());
}

TEST(StructureBuilder, ShapesStartWithTheBatchSize) {
  Builder b;
  Level& root = Root(b, {4});
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, std::vector<int64_t>{3}).status(),
             Rule::kStartsWith,
             "the shape torch.Size([3]) does not start with the batch size torch.Size([4])");
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, std::vector<int64_t>{}).status(),
             Rule::kStartsWith, "does not start with the batch size torch.Size([4])");
  absl::StatusOr<Level*> sub = b.AddLevel(root, "s", LevelKind::kTensorDict);
  ASSERT_TRUE(sub.ok());
  ExpectRule(b.SetBatchSize(**sub, std::vector<int64_t>{5}), Rule::kSubBatch,
             "the batch size torch.Size([5]) does not start with the batch size torch.Size([4])");
  ASSERT_OK(b.SetBatchSize(**sub, std::vector<int64_t>{4, 2}));
  // A lazy stack's members are stacked, not nested: their batch sizes need not start with the
  // stack's (which follows from them, set last); the stack's starts with its parent's.
  absl::StatusOr<Level*> stack = b.AddLevel(root, "stack", LevelKind::kLazyStack);
  ASSERT_TRUE(stack.ok());
  for (const char* key : {"0", "1"}) {
    absl::StatusOr<Level*> member = b.AddLevel(**stack, key, LevelKind::kTensorDict);
    ASSERT_TRUE(member.ok());
    ASSERT_OK(b.SetBatchSize(**member, std::vector<int64_t>{3}));
  }
  ExpectRule(b.SetBatchSize(**stack, std::vector<int64_t>{2, 3}), Rule::kSubBatch,
             "the batch size torch.Size([2, 3]) does not start with the batch size "
             "torch.Size([4])");
  ASSERT_OK(b.SetBatchSize(**stack, std::vector<int64_t>{4, 2}));
  EXPECT_EQ(
      b.AddLeaf(**stack, "x", c10::ScalarType::Float, std::vector<int64_t>{4}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::move(b).Finish().ok());
}

TEST(StructureBuilder, BytesFitInInt64) {
  Builder b;
  Level& root = Root(b, {});
  const int64_t big = int64_t{1} << 62;
  ExpectRule(b.AddLeaf(root, "a", c10::ScalarType::Float, std::vector<int64_t>{big}).status(),
             Rule::kBytes, "has more bytes than fit in int64");
  absl::StatusOr<const Entry*> byte =
      b.AddLeaf(root, "a", c10::ScalarType::Byte, std::vector<int64_t>{big});
  ASSERT_TRUE(byte.ok()) << byte.status();
  EXPECT_EQ((*byte)->nbytes, big);
  absl::StatusOr<const Entry*> empty = b.AddLeaf(
      root, "e", c10::ScalarType::Double,
      std::vector<int64_t>{0, std::numeric_limits<int64_t>::max()});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)->nbytes, 0);
}

TEST(StructureBuilder, Dtypes) {
  Builder b;
  Level& root = Root(b, {});
  const std::vector<int64_t> scalar;
  ExpectRule(b.AddLeaf(root, "a", Dtype::Name("torch.float99"), scalar).status(), Rule::kDtype,
             "unknown dtype \"torch.float99\"");
  ExpectRule(b.AddLeaf(root, "a", Dtype::Code(99), scalar).status(), Rule::kDtype,
             "unknown dtype code 99");
  ExpectRule(b.AddLeaf(root, "a", Dtype::Code(-1), scalar).status(), Rule::kDtype,
             "unknown dtype code -1");
  // Dtypes only newer LibTorch has: refused in structure_check's words where this one lacks them.
  if (!compat::FindNewerDtype("torch.uint16")->type) {
    ExpectRule(b.AddLeaf(root, "a", Dtype::Name("torch.uint16"), scalar).status(), Rule::kDtype,
               "torch.uint16");
  }
  absl::StatusOr<const Entry*> alias = b.AddLeaf(root, "a", Dtype::Name("torch.long"), scalar);
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ((*alias)->dtype, c10::ScalarType::Long);
}

TEST(StructureBuilder, MisuseIsAPrecondition) {
  {
    Builder b;
    EXPECT_EQ(std::move(b).Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  Builder b;
  Level& root = b.Root(LevelKind::kTensorDict);
  EXPECT_EQ(b.AddNonTensor(root, "n", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(b.SetBatchSize(root, std::vector<int64_t>{}));
  EXPECT_EQ(b.SetBatchSize(root, std::vector<int64_t>{}).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b.AddLevel(root, "s", LevelKind::kTensorDict).ok());
  EXPECT_EQ(std::move(b).Finish().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StructureParseJson, DepthSyntaxAndKeys) {
  const int limit = internal::kMaxStructureJsonDepth;
  const std::string deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
  ExpectRule(ParseJson<json>(deep).status(), Rule::kJsonDepth, "JSON nested deeper than 512");
  EXPECT_TRUE(ParseJson<json>(std::string(limit, '[') + std::string(limit, ']')).ok());
  ExpectRule(ParseJson<json>("{\"a\": ").status(), Rule::kJsonSyntax, "parse error");
  const std::string twice = R"({"b": {"a": 1, "a": 2}})";
  EXPECT_EQ((*ParseJson<json>(twice))["b"]["a"], 2);
  ExpectRule(ParseJson<nlohmann::ordered_json>(twice, true).status(), Rule::kJsonKey,
             "names the key 'a' twice in one JSON object; every key must be unique");
  // The same key in two objects is two keys.
  EXPECT_TRUE(ParseJson<json>(R"({"a": {"a": 1}, "b": {"a": 2}})", true).ok());
  EXPECT_EQ(RuleOf(absl::OkStatus()), Rule::kNone);
  EXPECT_EQ(RuleOf(absl::InvalidArgumentError("x")), Rule::kNone);
}

// ---- Seeded sweep --------------------------------------------------------------------------

// A model of the rules for one random level with random leaves and sub-levels: the first rule
// each addition breaks, or kNone.
struct Model {
  std::mt19937_64 rng;

  int64_t Pick(int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); }

  // Sizes that mostly start with `batch`; sometimes negative, huge, or too many.
  std::vector<int64_t> Shape(const std::vector<int64_t>& batch) {
    std::vector<int64_t> s = Pick(8) == 0 ? std::vector<int64_t>{} : batch;
    const int64_t extra = Pick(8) == 0 ? 66 : Pick(3);
    for (int64_t i = 0; i < extra; ++i) s.push_back(Pick(4));
    if (!s.empty() && Pick(10) == 0) {
      s[static_cast<size_t>(Pick(static_cast<int64_t>(s.size())))] = -1;
    }
    if (!s.empty() && Pick(10) == 0) s.back() = int64_t{1} << 61;
    return s;
  }

  static bool StartsWith(const std::vector<int64_t>& s, const std::vector<int64_t>& batch) {
    return s.size() >= batch.size() && std::equal(batch.begin(), batch.end(), s.begin());
  }
  static bool Bounded(const std::vector<int64_t>& s) {
    if (s.size() > internal::kMaxStructureDims) return false;
    for (int64_t d : s) {
      if (d < 0) return false;
    }
    return true;
  }
  static bool Overflows(const std::vector<int64_t>& s, int64_t item) {
    for (int64_t d : s) {
      if (d == 0) return false;
    }
    __int128 n = item;
    for (int64_t d : s) {
      n *= d;
      if (n > std::numeric_limits<int64_t>::max()) return true;
    }
    return false;
  }
};

TEST(StructureBuilder, SeededSweepAgreesWithTheModel) {
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e"};
  const std::vector<std::string> dtypes = {"torch.float32", "torch.int64", "torch.bool",
                                           "torch.float99", "torch.double"};
  int accepted = 0, refused = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Model m{std::mt19937_64(seed)};
    Builder b;
    Level& root = b.Root(LevelKind::kTensorDict);
    const std::vector<int64_t> batch = m.Shape({});
    Rule want = Model::Bounded(batch) ? Rule::kNone : Rule::kBatchSize;
    absl::Status s = b.SetBatchSize(root, batch);
    ASSERT_EQ(RuleOf(s), want) << "seed " << seed << ": " << s;
    if (!s.ok()) {
      ++refused;
      continue;
    }
    std::set<std::string> used;
    for (int i = 0; i < 6; ++i) {
      const std::string key = keys[static_cast<size_t>(m.Pick(5))];
      const std::string dtype = dtypes[static_cast<size_t>(m.Pick(5))];
      const std::vector<int64_t> shape = m.Shape(batch);
      const bool sub = m.Pick(3) == 0;
      if (used.count(key)) {
        want = Rule::kKey;
      } else if (sub) {
        want = !Model::Bounded(shape)             ? Rule::kBatchSize
               : !Model::StartsWith(shape, batch) ? Rule::kSubBatch
                                                  : Rule::kNone;
      } else {
        const std::optional<c10::ScalarType> type = ParseDtypeName(dtype);
        want = !type                                 ? Rule::kDtype
               : !Model::Bounded(shape)             ? Rule::kShape
               : !Model::StartsWith(shape, batch)   ? Rule::kStartsWith
               : Model::Overflows(shape, static_cast<int64_t>(c10::elementSize(*type)))
                   ? Rule::kBytes
                   : Rule::kNone;
      }
      if (sub) {
        absl::StatusOr<Level*> level = b.AddLevel(root, key, LevelKind::kTensorDict);
        s = level.ok() ? b.SetBatchSize(**level, shape) : level.status();
        if (level.ok() && !s.ok()) ASSERT_OK(b.SetBatchSize(**level, batch));  // to finish
      } else {
        s = b.AddLeaf(root, key, Dtype::Name(dtype), shape).status();
      }
      ASSERT_EQ(RuleOf(s), want) << "seed " << seed << " entry " << i << ": " << s;
      if (s.ok() || sub) used.insert(key);
      (s.ok() ? accepted : refused) += 1;
    }
    absl::StatusOr<Description> d = std::move(b).Finish();
    ASSERT_TRUE(d.ok()) << d.status();
    // What was accepted obeys the rules.
    for (const Entry& e : d->root().entries()) {
      const std::vector<int64_t>& s2 = e.kind == EntryKind::kLeaf ? e.shape : e.level->batch_size();
      EXPECT_TRUE(Model::StartsWith(s2, batch) && Model::Bounded(s2)) << "seed " << seed;
    }
    EXPECT_EQ(d->root().entries().size(), used.size()) << "seed " << seed;
  }
  // The sweep reaches both verdicts often.
  EXPECT_GT(accepted, 300);
  EXPECT_GT(refused, 300);
}

}  // namespace
}  // namespace structure
}  // namespace td
