// The meta.json reader and writer, and key escaping, without files.
#include "td/backends/memmap/format.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace td {
namespace internal {
namespace memmap {
namespace {

void ExpectError(std::string_view text, const std::vector<std::string>& fragments) {
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(text, "/d/meta.json");
  ASSERT_FALSE(meta.ok()) << "accepted: " << text;
  const std::string msg(meta.status().message());
  EXPECT_NE(msg.find("/d/meta.json"), std::string::npos) << msg;
  for (const std::string& f : fragments) {
    EXPECT_NE(msg.find(f), std::string::npos) << "message lacks \"" << f << "\":\n" << msg;
  }
}

TEST(EscapeKeyTest, UnsafeCharactersBecomePercentHex) {
  EXPECT_EQ(EscapeKey("obs"), "obs");
  EXPECT_EQ(EscapeKey("a/b"), "a%2Fb");
  EXPECT_EQ(EscapeKey("a b"), "a%20b");
  EXPECT_EQ(EscapeKey("100%"), "100%25");
  EXPECT_EQ(EscapeKey(std::string("x\0y", 3)), "x%00y");
  EXPECT_EQ(EscapeKey("\x1f\x7f"), "%1F%7F");
  EXPECT_EQ(EscapeKey("<>:\"|?*\\"), "%3C%3E%3A%22%7C%3F%2A%5C");
  EXPECT_EQ(EscapeKey(""), "%");
  EXPECT_EQ(EscapeKey("."), "%2E");
  EXPECT_EQ(EscapeKey(".."), "%2E%2E");
  EXPECT_EQ(EscapeKey("../../etc/passwd"), "..%2F..%2Fetc%2Fpasswd");
  EXPECT_EQ(EscapeKey(".hidden"), ".hidden");
  EXPECT_EQ(EscapeKey("é"), "é");  // UTF-8 bytes are kept
}

TEST(EscapeKeyTest, NoEscapedNameLeavesItsDirectory) {
  for (std::string key : std::vector<std::string>{"..", ".", "/", "/etc", "a/../..", "..\\..", std::string("\0", 1)}) {
    const std::string name = EscapeKey(key);
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_NE(name, ".");
    EXPECT_NE(name, "..");
    EXPECT_FALSE(name.empty());
  }
}

TEST(EscapeKeyTest, UnescapeIsTheInverse) {
  for (std::string key : std::vector<std::string>{"obs", "a/b", "", ".", "..", "100%", "x y", "\x01\x7f", "%2F"}) {
    std::optional<std::string> back = UnescapeKey(EscapeKey(key));
    ASSERT_TRUE(back.has_value()) << key;
    EXPECT_EQ(*back, key);
  }
  EXPECT_FALSE(UnescapeKey("a%2").has_value());
  EXPECT_FALSE(UnescapeKey("a%zz").has_value());
  EXPECT_FALSE(UnescapeKey("a%2f").has_value());  // lowercase is not what EscapeKey writes
  EXPECT_FALSE(UnescapeKey("a%41").has_value());  // 'A' needs no escape
  EXPECT_FALSE(UnescapeKey("..").has_value());
  EXPECT_FALSE(UnescapeKey("a b").has_value());
}

TEST(ParseLevelMetaTest, ReadsWhatPythonWrites) {
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(
      R"({"a": {"device": "cpu", "shape": [3, 4], "dtype": "torch.float32", "is_nested": false},
          "n": {"type": "TensorDict"},
          "s": {"type": "NonTensorData"},
          "b": {"device": "cpu", "shape": [3], "dtype": "torch.bfloat16"},
          "shape": [3], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})",
      "meta.json");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->batch_size, std::vector<int64_t>{3});
  ASSERT_EQ(meta->entries.size(), 4u);
  EXPECT_EQ(meta->entries[0].key, "a");  // file order is kept
  EXPECT_EQ(meta->entries[0].kind, EntryKind::kTensor);
  EXPECT_EQ(meta->entries[0].dtype, c10::kFloat);
  EXPECT_EQ(meta->entries[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(meta->entries[0].nbytes, 48);
  EXPECT_EQ(meta->entries[0].file_name, "a.memmap");
  EXPECT_EQ(meta->entries[1].kind, EntryKind::kTensorDict);
  EXPECT_EQ(meta->entries[1].file_name, "n");
  EXPECT_EQ(meta->entries[2].kind, EntryKind::kNonTensor);
  EXPECT_EQ(meta->entries[3].dtype, c10::kBFloat16);
  EXPECT_EQ(meta->entries[3].nbytes, 6);
}

TEST(ParseLevelMetaTest, AcceptsOlderSpellings) {
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(
      R"({"x": {"shape": [], "dtype": "torch.long"}, "shape": [], "device": "None",
          "_type": "<class 'tensordict.tensordict.TensorDict'>"})",
      "m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->entries[0].dtype, c10::kLong);
  EXPECT_EQ(meta->entries[0].nbytes, 8);
  EXPECT_TRUE(ParseLevelMeta(R"({"shape": [2], "device": null})", "m").ok());
}

TEST(ParseLevelMetaTest, RoundTripsWhatItWrites) {
  LevelMeta meta;
  meta.batch_size = {2, 0};
  auto entry = [](std::string key, EntryKind kind, c10::ScalarType dtype,
                  std::vector<int64_t> shape) {
    EntryMeta e;
    e.key = std::move(key);
    e.kind = kind;
    e.dtype = dtype;
    e.shape = std::move(shape);
    return e;
  };
  meta.entries.push_back(entry("z first", EntryKind::kTensor, c10::kBool, {2, 0, 5}));
  meta.entries.push_back(entry("n", EntryKind::kTensorDict, c10::kFloat, {}));
  meta.entries.push_back(entry("s", EntryKind::kNonTensor, c10::kFloat, {}));
  const std::string text = LevelMetaJson(meta);
  EXPECT_NE(text.find(R"("_type":"<class 'tensordict._td.TensorDict'>")"), std::string::npos);
  EXPECT_NE(text.find(R"("dtype":"torch.bool")"), std::string::npos);
  absl::StatusOr<LevelMeta> back = ParseLevelMeta(text, "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->batch_size, meta.batch_size);
  ASSERT_EQ(back->entries.size(), 3u);
  EXPECT_EQ(back->entries[0].key, "z first");
  EXPECT_EQ(back->entries[0].file_name, "z%20first.memmap");
  EXPECT_EQ(back->entries[0].shape, (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ(back->entries[2].kind, EntryKind::kNonTensor);
}

TEST(ParseLevelMetaTest, SyntaxErrorsNameTheFile) {
  ExpectError("", {"empty file"});
  ExpectError("   \n", {"empty file"});
  ExpectError(R"({"shape": [3], "a": {"shape": [3], "dtype": "torch.fl)", {"malformed JSON"});
  ExpectError("{\"shape\": [3]", {"malformed JSON"});
  ExpectError("[1, 2]", {"expected a JSON object", "array"});
  ExpectError("3", {"expected a JSON object"});
  ExpectError(std::string(600, '[') + std::string(600, ']'), {"nested deeper than 512"});
}

TEST(ParseLevelMetaTest, WrongTypesAreNamed) {
  ExpectError(R"({"device": "cpu"})", {"missing \"shape\""});
  // The rules of NOTE [ Structure validation ], prefixed with the file and the field.
  ExpectError(R"({"shape": "3"})", {"\"shape\" expected a list of integers", "string"});
  ExpectError(R"({"shape": [3.5]})", {"\"shape\" holds 3.5, not an integer in [0, 2^63-1]"});
  ExpectError(R"({"shape": [-1]})", {"\"shape\" holds -1, not an integer"});
  ExpectError(R"({"shape": [true]})", {"\"shape\" holds true, not an integer"});
  ExpectError(R"({"shape": [18446744073709551615]})",
              {"holds 18446744073709551615, not an integer in [0, 2^63-1]"});
  ExpectError(R"({"shape": [], "device": 3})", {"\"device\" must be a string"});
  ExpectError(R"({"shape": [], "device": "cuda:0"})", {"device 'cuda:0' is not supported"});
  ExpectError(R"({"shape": [], "_type": 1})", {"\"_type\" must be a string"});
  ExpectError(R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 0})",
              {"LazyStackedTensorDict", "expected a TensorDict level"});
  ExpectError(R"({"_type": "TensorDict", "shape": []})", {"expected a Python class"});
  ExpectError(R"({"shape": [], "a": {"type": 5}})", {"entry 'a'", "\"type\" must be a class name"});
  ExpectError(R"({"shape": [], "a": {"type": ""}})", {"entry 'a'", "\"type\" must be a class name"});
  ExpectError(R"({"shape": [], "a": {"shape": [2]}})", {"entry 'a'", "neither"});
  ExpectError(R"({"shape": [], "a": {"shape": [2], "dtype": 7}})",
              {"entry 'a'", "\"dtype\" must be a string"});
  ExpectError(R"({"shape": [], "a": {"shape": [2], "dtype": "torch.float128"}})",
              {"entry 'a'", "unknown dtype \"torch.float128\""});
  ExpectError(R"({"shape": [], "a": {"dtype": "torch.float32"}})", {"entry 'a'", "no \"shape\""});
  ExpectError(R"({"shape": [], "a": {"shape": {"x": 1}, "dtype": "torch.float32"}})",
              {"entry 'a'", "expected a list of integers"});
  ExpectError(R"({"shape": [], "a": {"shape": [2], "dtype": "torch.float32", "is_nested": 1}})",
              {"\"is_nested\" must be true or false"});
  ExpectError(R"({"shape": [], "a": {"shape": [2], "dtype": "torch.float32", "is_nested": true}})",
              {"entry 'a'", "nested tensor", "[components, dims]"});
  ExpectError(R"({"shape": [3], "a": {"shape": [2, 1], "dtype": "torch.float32", "is_nested": true}})",
              {"entry 'a'", "2 components", "torch.Size([3])"});
  ExpectError(R"({"shape": [3, 4, 5], "a": {"shape": [3, 1], "dtype": "torch.float32", "is_nested": true}})",
              {"entry 'a'", "2 dims", "torch.Size([3, 4, 5])"});
  ExpectError(R"({"shape": [], "a": {"shape": [2], "dtype": "torch.float32", "device": "cuda"}})",
              {"entry 'a'", "device 'cuda'"});
}

TEST(ParseLevelMetaTest, ShapesAreChecked) {
  ExpectError(R"({"shape": [3], "a": {"shape": [4, 2], "dtype": "torch.float32"}})",
              {"entry 'a'", "torch.Size([4, 2])", "torch.Size([3])"});
  ExpectError(R"({"shape": [], "a": {"shape": [4294967296, 4294967296, 4], "dtype": "torch.float32"}})",
              {"entry 'a'", "more bytes than fit in int64"});
  std::string many = "[" + std::string(70 * 2 - 1, ',') + "]";
  for (size_t i = 1; i < many.size() - 1; i += 2) many[i] = '1';
  ExpectError(R"({"shape": [], "a": {"shape": )" + many + R"(, "dtype": "torch.float32"}})",
              {"70 dims"});
}

TEST(ParseLevelMetaTest, UnknownFieldsAreIgnored) {
  // Python's reader skips fields that are not objects; newer writers add fields to entries.
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(
      R"({"a": {"device": "cpu", "shape": [2], "dtype": "torch.int64", "is_nested": false,
                "requires_grad": true, "layout": "torch.strided", "future": {"x": [1]}},
          "names": [null], "version": 3, "notes": "x", "extra": [1, 2], "flag": null,
          "shape": [2], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>",
          "_is_locked": true})",
      "m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->entries.size(), 1u);
  EXPECT_EQ(meta->entries[0].key, "a");
  EXPECT_EQ(meta->entries[0].nbytes, 16);
}

TEST(ParseLevelMetaTest, SubDirectoryTypesAreClassNames) {
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(
      R"({"s": {"type": "LazyStackedTensorDict"}, "c": {"type": "MyTensorClass"},
          "n": {"type": "NonTensorStack"}, "m": {"type": "MetaData[int]"}, "shape": []})",
      "m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->entries.size(), 4u);
  EXPECT_EQ(meta->entries[0].kind, EntryKind::kTensorDict);
  EXPECT_EQ(meta->entries[0].type_name, "LazyStackedTensorDict");
  EXPECT_EQ(meta->entries[1].kind, EntryKind::kTensorDict);
  EXPECT_EQ(meta->entries[2].kind, EntryKind::kNonTensor);
  EXPECT_EQ(meta->entries[3].kind, EntryKind::kNonTensor);
  // Written back with the same type names.
  absl::StatusOr<LevelMeta> back = ParseLevelMeta(LevelMetaJson(*meta), "m");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entries[0].type_name, "LazyStackedTensorDict");
  EXPECT_EQ(back->entries[3].type_name, "MetaData[int]");
}

TEST(ParseLevelMetaTest, NestedTensorEntries) {
  absl::StatusOr<LevelMeta> meta = ParseLevelMeta(
      R"({"j": {"device": "cpu", "shape": [3, 2], "dtype": "torch.float32", "is_nested": true},
          "shape": [3]})",
      "m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_TRUE(meta->entries[0].is_nested);
  EXPECT_EQ(meta->entries[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(meta->entries[0].nbytes, 3 * 2 * 8);  // the int64 sizes file
  EXPECT_EQ(NestedShapeFileName("j.memmap"), "j.shape.memmap");
  EXPECT_EQ(NestedShapeFileName("a.b.memmap"), "a.b.shape.memmap");
  EXPECT_EQ(NestedShapeFileName("%.memmap"), "%.shape.memmap");
  EXPECT_EQ(NestedShapeFileName(".memmap"), ".memmap.shape.memmap");  // as Path.with_suffix
}

TEST(LegacyFileNameTest, RawKeysThatStayInTheirDirectory) {
  EXPECT_EQ(LegacyFileName("a b", EntryKind::kTensor), "a b.memmap");
  EXPECT_EQ(LegacyFileName("100%", EntryKind::kTensor), "100%.memmap");
  EXPECT_EQ(LegacyFileName("", EntryKind::kTensor), ".memmap");
  EXPECT_EQ(LegacyFileName("..", EntryKind::kTensor), "...memmap");
  EXPECT_EQ(LegacyFileName("a b", EntryKind::kTensorDict), "a b");
  EXPECT_EQ(LegacyFileName("1:x", EntryKind::kTensorDict), "1:x");
  for (EntryKind kind : {EntryKind::kTensor, EntryKind::kTensorDict, EntryKind::kNonTensor}) {
    EXPECT_FALSE(LegacyFileName("a/b", kind).has_value());
    EXPECT_FALSE(LegacyFileName("../x", kind).has_value());
    EXPECT_FALSE(LegacyFileName("a\\b", kind).has_value());
    EXPECT_FALSE(LegacyFileName("C:payload", kind).has_value());
    EXPECT_FALSE(LegacyFileName(std::string("a\0b", 3), kind).has_value());
  }
  for (const char* k : {"", ".", ".."}) {
    EXPECT_FALSE(LegacyFileName(k, EntryKind::kTensorDict).has_value()) << k;
    EXPECT_FALSE(LegacyFileName(k, EntryKind::kNonTensor).has_value()) << k;
  }
}

TEST(ResolveEntryFilesTest, EscapedFirstThenRawNames) {
  const auto parse = [](const char* text) {
    absl::StatusOr<LevelMeta> meta = ParseLevelMeta(text, "/d/meta.json");
    EXPECT_TRUE(meta.ok()) << meta.status();
    return meta->entries;
  };
  const char* kTwo = R"({"a b": {"shape": [2], "dtype": "torch.float32"},
                         "a%20b": {"shape": [2], "dtype": "torch.float32"},
                         "c": {"type": "TensorDict"}, "e": {"shape": [2, 0], "dtype": "torch.int64"},
                         "shape": [2]})";
  // Current writer: escaped names.
  std::set<std::string> files = {"a%20b.memmap", "a%2520b.memmap", "c"};
  auto in = [&](const std::string& n) { return files.count(n) > 0; };
  std::vector<EntryMeta> entries = parse(kTwo);
  ASSERT_TRUE(ResolveEntryFiles(&entries, in, "/d").ok());
  EXPECT_EQ(entries[0].file_name, "a%20b.memmap");
  EXPECT_EQ(entries[1].file_name, "a%2520b.memmap");
  EXPECT_EQ(entries[2].file_name, "c");
  EXPECT_EQ(entries[3].file_name, "");  // zero elements, no file: valid
  // A writer before 0.13: raw names. "a%20b.memmap" is then key "a%20b"'s, not "a b"'s.
  files = {"a b.memmap", "a%20b.memmap", "c", "e.memmap"};
  entries = parse(kTwo);
  ASSERT_TRUE(ResolveEntryFiles(&entries, in, "/d").ok());
  EXPECT_EQ(entries[0].file_name, "a b.memmap");
  EXPECT_EQ(entries[1].file_name, "a%20b.memmap");
  EXPECT_EQ(entries[3].file_name, "e.memmap");
  // Neither name: the error names both.
  files = {"c"};
  entries = parse(kTwo);
  absl::Status s = ResolveEntryFiles(&entries, in, "/d");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/d/a%20b.memmap is missing"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("/d/a b.memmap"), absl::string_view::npos) << s;
  // A non-empty tensor always needs its file; keys with / never fall back.
  entries = parse(R"({"x/y": {"shape": [1], "dtype": "torch.int8"}, "shape": []})");
  files = {"x/y.memmap"};
  EXPECT_FALSE(ResolveEntryFiles(&entries, in, "/d").ok());
}

TEST(ParseDirMetaTest, EveryLayout) {
  absl::StatusOr<DirMeta> m = ParseDirMeta(
      R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": 1})", "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kLazyStack);
  EXPECT_EQ(m->stack_dim, 1);
  m = ParseDirMeta(R"({"_type": "<class 'tensordict.tensorclass.NonTensorStack'>",
                       "stack_dim": 0, "device": null, "data": [[1, 2], ["a", null]]})",
                   "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kNonTensorStack);
  EXPECT_EQ(m->data, nlohmann::json::parse(R"([[1, 2], ["a", null]])"));
  m = ParseDirMeta(R"({"_type": "<class 'tensordict.tensorclass.MetaData[int]'>", "data": 4,
                       "_metadata": null, "_is_non_tensor": true})",
                   "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kNonTensorData);
  EXPECT_EQ(m->data, 4);
  m = ParseDirMeta(R"({"_type": "<class '__main__.MyData'>", "name": "x", "other": null})", "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kTensorClass);
  ASSERT_EQ(m->fields.size(), 2u);
  EXPECT_EQ(m->fields[0].first, "name");
  EXPECT_EQ(m->fields[1].second, nullptr);
  // A TensorDict subclass written by TensorDict's own writer is a level.
  m = ParseDirMeta(R"({"_type": "<class 'my.Sub'>", "shape": [2]})", "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kTensorDict);
  m = ParseDirMeta(R"({"_type": "<class 'tensordict.tensordict.TensorDict'>", "shape": []})", "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->type, DirType::kTensorDict);
}

TEST(ParseDirMetaTest, WhatCannotBeReadIsNamed) {
  const auto expect = [](const char* text, std::vector<std::string> fragments) {
    absl::StatusOr<DirMeta> m = ParseDirMeta(text, "/d/meta.json");
    ASSERT_FALSE(m.ok()) << "accepted: " << text;
    const std::string msg(m.status().message());
    fragments.push_back("/d/meta.json");
    for (const std::string& f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "lacks \"" << f << "\": " << msg;
    }
  };
  expect(R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>"})", {"stack_dim"});
  expect(R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>", "stack_dim": -1})",
         {"stack_dim"});
  expect(R"({"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 0,
             "data": "pickle.pkl"})",
         {"pickle.pkl", "never loaded"});
  expect(R"({"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 0})",
         {"without \"data\""});
  expect(R"({"_type": "<class 'tensordict.tensorclass.NonTensorStack'>", "stack_dim": 0,
             "data": 3})",
         {"must be a list"});
  expect(R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_metadata": null})",
         {"no \"data\"", "other.pickle"});
  expect(R"({"_type": "<class 'tensordict._lazy._PermutedTensorDict'>", "shape": [2, 3],
             "custom_op": "permute", "inv_op": "permute"})",
         {"_PermutedTensorDict", "not supported", "_source"});
  expect(R"({"_type": "<class 'tensordict.persistent.PersistentTensorDict'>"})",
         {"PersistentTensorDict", "not supported"});
}

TEST(ParseNonTensorMetaTest, ReadsDataAndRefusesPickles) {
  absl::StatusOr<nlohmann::json> data = ParseNonTensorMeta(
      R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": {"b": [1, "x"]},
          "_metadata": null, "_is_non_tensor": true})",
      "m");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((*data)["b"][1], "x");
  absl::StatusOr<nlohmann::json> pickled = ParseNonTensorMeta(
      R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_is_non_tensor": true})",
      "m");
  ASSERT_FALSE(pickled.ok());
  EXPECT_NE(pickled.status().message().find("pickle"), absl::string_view::npos);
  EXPECT_FALSE(ParseNonTensorMeta(R"({"data": 1})", "m").ok());
  EXPECT_FALSE(ParseNonTensorMeta(R"({"_type": 3, "data": 1})", "m").ok());
  EXPECT_FALSE(ParseNonTensorMeta("[]", "m").ok());
  const std::string text = NonTensorMetaJson(nlohmann::json{{"k", 1.5}});
  absl::StatusOr<nlohmann::json> back = ParseNonTensorMeta(text, "m");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, (nlohmann::json{{"k", 1.5}}));
}

TEST(WritableTest, RefusesWhatCannotRoundTrip) {
  EXPECT_TRUE(CheckWritableKey("obs", "w").ok());
  EXPECT_FALSE(CheckWritableKey("shape", "w").ok());
  EXPECT_FALSE(CheckWritableKey("device", "w").ok());
  EXPECT_FALSE(CheckWritableKey("_type", "w").ok());
  EXPECT_FALSE(CheckWritableKey("\xff\xfe", "w").ok());
  EXPECT_TRUE(CheckWritableJson(nlohmann::json{{"a", {1, 2.5, "s", nullptr, true}}}, "w").ok());
  EXPECT_FALSE(CheckWritableJson(nlohmann::json(std::nan("")), "w").ok());
  EXPECT_FALSE(CheckWritableJson(nlohmann::json{{"a", INFINITY}}, "w").ok());
  EXPECT_FALSE(CheckWritableJson(nlohmann::json("\xff"), "w").ok());
  nlohmann::json deep = 1;
  for (int i = 0; i < kMaxJsonDepth + 5; ++i) deep = nlohmann::json::array({deep});
  EXPECT_FALSE(CheckWritableJson(deep, "w").ok());
}

TEST(TensorBytesTest, CountsAndOverflow) {
  EXPECT_EQ(*TensorBytes({2, 3}, c10::kDouble, "t"), 48);
  EXPECT_EQ(*TensorBytes({}, c10::kHalf, "t"), 2);
  EXPECT_EQ(*TensorBytes({0, int64_t{1} << 62}, c10::kFloat, "t"), 0);
  EXPECT_FALSE(TensorBytes({int64_t{1} << 62, 4}, c10::kFloat, "t").ok());
  EXPECT_FALSE(TensorBytes({-1}, c10::kFloat, "t").ok());
}

}  // namespace
}  // namespace memmap
}  // namespace internal
}  // namespace td
