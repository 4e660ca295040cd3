// to_csv / from_csv / to_json / from_json: round trips with nested keys, type inference, quoting,
// what pandas writes, and bad input.
#include "td/io/tabular.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

using testing_util::FreshDir;
using testing_util::ReadText;
using testing_util::WriteText;

TensorDict Table() {
  return TensorDict({{"id", at::tensor({1, 2, 3}, at::kLong)},
                     {"x", at::tensor({0.5, -1.25, NAN}, at::kDouble)},
                     {"ok", at::tensor({1, 0, 1}, at::kLong).to(at::kBool)},
                     {"obs", {{"a", at::tensor({1.0f, 2.0f, 3.0f})}}},
                     {"name", NonTensorData(nlohmann::json::array({"a,b", "say \"hi\"", "plain"}))}},
                    {3});
}

TEST(Csv, RoundTripWithSeparator) {
  const std::string path = FreshDir("csv") + "/t.csv";
  to_csv(Table(), path, TableOptions().separator("."));
  EXPECT_EQ(ReadText(path),
            "id,x,ok,obs.a,name\n"
            "1,0.5,True,1.0,\"a,b\"\n"
            "2,-1.25,False,2.0,\"say \"\"hi\"\"\"\n"
            "3,,True,3.0,plain\n");
  TensorDict back = from_csv(path, FromTableOptions().separator("."));
  EXPECT_EQ(back.batch_size().vec(), std::vector<int64_t>{3});
  EXPECT_TRUE(back.get("id").equal(at::tensor({1, 2, 3}, at::kLong)));
  const at::Tensor x = back.get("x");
  EXPECT_EQ(x.scalar_type(), at::kDouble);
  EXPECT_EQ(x[0].item<double>(), 0.5);
  EXPECT_TRUE(std::isnan(x[2].item<double>()));
  EXPECT_EQ(back.get("ok").scalar_type(), at::kBool);
  EXPECT_TRUE(back.get({"obs", "a"}).equal(at::tensor({1.0, 2.0, 3.0}, at::kDouble)));
  EXPECT_EQ(back.get_non_tensor("name"), nlohmann::json::array({"a,b", "say \"hi\"", "plain"}));
  TensorDict f32 = from_csv(path, FromTableOptions().dtype(at::kFloat));
  EXPECT_EQ(f32.get("id").scalar_type(), at::kFloat);
  EXPECT_TRUE(f32.contains("obs.a"));  // no separator: one flat column
}

TEST(Csv, BatchOptionsAndBadInput) {
  const std::string dir = FreshDir("csvbad");
  WriteText(dir + "/a.csv", "a,b\r\n1,2\r\n3,4\r\n");
  EXPECT_EQ(from_csv(dir + "/a.csv", FromTableOptions().batch_size(std::vector<int64_t>{2})).batch_size().vec(),
            std::vector<int64_t>{2});
  EXPECT_EQ(from_csv(dir + "/a.csv", FromTableOptions().auto_batch_size(true)).batch_size().vec(),
            std::vector<int64_t>{2});
  TD_EXPECT_THROW_MSG(from_csv(dir + "/a.csv", FromTableOptions().batch_size(std::vector<int64_t>{2}).batch_dims(1)),
                      ValueError, {"batch_dims"});
  WriteText(dir + "/ragged.csv", "a,b\n1,2\n3\n");
  TD_EXPECT_THROW_MSG(from_csv(dir + "/ragged.csv"), ValueError, {"ragged.csv", "row 3", "1 cells"});
  WriteText(dir + "/quote.csv", "a\n\"open\n");
  TD_EXPECT_THROW_MSG(from_csv(dir + "/quote.csv"), ValueError, {"quote.csv", "line 2", "never closed"});
  WriteText(dir + "/dup.csv", "a,a\n1,2\n");
  TD_EXPECT_THROW_MSG(from_csv(dir + "/dup.csv"), ValueError, {"'a'", "twice"});
  TD_EXPECT_THROW_MSG(from_csv(dir + "/missing.csv"), c10::Error, {"missing.csv"});

  TD_EXPECT_THROW_MSG(to_csv(Table(), dir + "/n.csv"), ValueError, {"('obs', 'a')", "separator"});
  TensorDict wide({{"m", at::zeros({3, 2})}}, {3});
  TD_EXPECT_THROW_MSG(to_csv(wide, dir + "/w.csv"), ValueError, {"'m'", "[3, 2]"});
  TensorDict two({{"m", at::zeros({3, 2})}}, {3, 2});
  TD_EXPECT_THROW_MSG(to_csv(two, dir + "/t.csv"), ValueError, {"one batch dim", "[3, 2]"});
}

TEST(Json, RecordsAndLines) {
  const std::string dir = FreshDir("json");
  to_json(Table(), dir + "/t.json", TableOptions().separator("/"));
  EXPECT_EQ(ReadText(dir + "/t.json").substr(0, 53),
            "[{\"id\":1,\"x\":0.5,\"ok\":true,\"obs/a\":1.0,\"name\":\"a,b\"},");
  TensorDict back = from_json(dir + "/t.json", FromTableOptions().separator("/"));
  EXPECT_TRUE(back.get({"obs", "a"}).equal(at::tensor({1.0, 2.0, 3.0}, at::kDouble)));
  EXPECT_TRUE(std::isnan(back.get("x")[2].item<double>()));  // null
  EXPECT_EQ(back.get("ok").scalar_type(), at::kBool);
  EXPECT_EQ(back.keys(), (std::vector<NestedKey>{"id", "x", "ok", "obs", "name"}));  // file order

  to_json(Table().exclude({"obs"}), dir + "/t.jsonl", TableOptions().lines(true));
  const std::string lines = ReadText(dir + "/t.jsonl");
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 3);
  TensorDict l = from_json(dir + "/t.jsonl", FromTableOptions().lines(true));
  EXPECT_TRUE(l.get("id").equal(at::tensor({1, 2, 3}, at::kLong)));

  // A record lacking a column holds null there; mixed types stay JSON.
  WriteText(dir + "/m.json", R"([{"a": 1, "b": "x"}, {"a": 2.5}, {"a": 3, "b": {"k": 1}}])");
  TensorDict m = from_json(dir + "/m.json");
  EXPECT_EQ(m.get("a").scalar_type(), at::kDouble);
  EXPECT_EQ(m.get_non_tensor("b"), nlohmann::json::parse(R"(["x", null, {"k": 1}])"));

  WriteText(dir + "/obj.json", R"({"a": [1, 2]})");
  TD_EXPECT_THROW_MSG(from_json(dir + "/obj.json"), ValueError, {"obj.json", "array of records", "from_dict"});
  WriteText(dir + "/bad.json", "[{\"a\": 1");
  TD_EXPECT_THROW_MSG(from_json(dir + "/bad.json"), ValueError, {"bad.json", "malformed"});
  WriteText(dir + "/num.json", "[1, 2]");
  TD_EXPECT_THROW_MSG(from_json(dir + "/num.json"), ValueError, {"record 0", "number"});
}

// What pandas' read_csv makes of cells: decimal numbers only (not C's hexadecimal floats), its NA
// strings, integers past int64 (uint64: refused here; beyond: strings), a byte-order mark.
TEST(Csv, NumbersAsPandasReadsThem) {
  const std::string dir = FreshDir("csvnum");
  WriteText(dir + "/bom.csv", "\xEF\xBB\xBFid,hex\n1,0x1A\n2,12\n");
  TensorDict bom = from_csv(dir + "/bom.csv");
  EXPECT_EQ(bom.keys(), (std::vector<NestedKey>{"id", "hex"}));
  EXPECT_TRUE(bom.get("id").equal(at::tensor({1, 2}, at::kLong)));
  EXPECT_EQ(bom.get_non_tensor("hex"), nlohmann::json::array({"0x1A", "12"}));

  WriteText(dir + "/f.csv", "x\n 1.5\n-inf\nNA\n1e3\n.5\n");
  const at::Tensor x = from_csv(dir + "/f.csv").get("x");
  ASSERT_EQ(x.scalar_type(), at::kDouble);
  EXPECT_EQ(x[0].item<double>(), 1.5);
  EXPECT_EQ(x[1].item<double>(), -INFINITY);
  EXPECT_TRUE(std::isnan(x[2].item<double>()));
  EXPECT_EQ(x[3].item<double>(), 1000.0);
  EXPECT_EQ(x[4].item<double>(), 0.5);
  for (const char* word : {"1e", "1_000", "0x10p0", "nan(1)"}) {
    WriteText(dir + "/w.csv", std::string("w\n1\n") + word + "\n");
    EXPECT_EQ(from_csv(dir + "/w.csv").get_non_tensor("w"), nlohmann::json::array({"1", word}))
        << word;
  }

  WriteText(dir + "/u.csv", "u\n9223372036854775808\n1\n");
  TD_EXPECT_THROW_MSG(from_csv(dir + "/u.csv"), ValueError,
                      {"u.csv", "'u'", "9223372036854775808", "row 2", "uint64"});
  WriteText(dir + "/h.csv", "h,s\n18446744073709551616,-1\n1,9223372036854775808\n");
  TensorDict h = from_csv(dir + "/h.csv");
  EXPECT_EQ(h.get_non_tensor("h"), nlohmann::json::array({"18446744073709551616", "1"}));
  EXPECT_EQ(h.get_non_tensor("s"), nlohmann::json::array({"-1", "9223372036854775808"}));
}

// JSON integers int64 cannot hold, and nesting deep enough to exhaust a recursive parser.
TEST(Json, WideIntegersAndDeepNesting) {
  const std::string dir = FreshDir("jsonbad");
  WriteText(dir + "/u.json", R"([{"a": 18446744073709551615}, {"a": 1}])");
  TD_EXPECT_THROW_MSG(from_json(dir + "/u.json"), ValueError,
                      {"u.json", "18446744073709551615", "int64"});
  WriteText(dir + "/h.jsonl", "{\"a\": 1}\n{\"a\": -99999999999999999999}\n");
  TD_EXPECT_THROW_MSG(from_json(dir + "/h.jsonl", FromTableOptions().lines(true)), ValueError,
                      {"h.jsonl", "line 2", "-99999999999999999999"});
  WriteText(dir + "/ok.json",
            R"([{"a": 9223372036854775807, "b": "18446744073709551616", "c": 1e20}])");
  EXPECT_EQ(from_json(dir + "/ok.json").get("a")[0].item<int64_t>(), INT64_MAX);

  // Well-formed: nlohmann/json parses it, then its dump and copies recurse once per level.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  WriteText(dir + "/deep.json", "[{\"a\": " + deep + "}]");
  TD_EXPECT_THROW_MSG(from_json(dir + "/deep.json"), ValueError, {"deep.json", "nested deeper"});
  WriteText(dir + "/deep.jsonl", "{\"a\": 1}\n{\"a\": " + deep + "}\n");
  TD_EXPECT_THROW_MSG(from_json(dir + "/deep.jsonl", FromTableOptions().lines(true)), ValueError,
                      {"deep.jsonl", "line 2", "nested deeper"});
}

}  // namespace
}  // namespace td
