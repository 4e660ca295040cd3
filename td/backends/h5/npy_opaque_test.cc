// The codec of NOTE [ HDF5 opaque data ] (npy_opaque.h): the bytes numpy 2 / h5py 3 give each
// value upstream v0.14's to_h5 stores (checked against h5py: np.array(v).tobytes() and
// "NUMPY:" + dtype.str), what reads back, what keeps the JSON-text form, and hostile input.
#include "td/backends/h5/npy_opaque.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/escaping.h"

namespace td::h5::internal {
namespace {

using Json = nlohmann::json;

std::string Le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

std::string F8(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return Le(bits, 8);
}

OpaqueData Encoded(const Json& value) {
  absl::StatusOr<std::optional<OpaqueData>> out = EncodeOpaque(value);
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out.ok() && out->has_value()) << value.dump();
  return out.ok() && out->has_value() ? **out : OpaqueData{};
}

Json Decoded(const OpaqueData& data) {
  absl::StatusOr<Json> out = DecodeOpaque(data);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Json();
}

void ExpectForm(const Json& value, const std::string& tag, std::vector<int64_t> shape,
                const std::string& bytes) {
  const OpaqueData d = Encoded(value);
  EXPECT_EQ(d.tag, tag) << value.dump();
  EXPECT_EQ(d.shape, shape) << value.dump();
  EXPECT_EQ(d.bytes, bytes) << value.dump();
  EXPECT_EQ(static_cast<int64_t>(d.bytes.size()),
            d.item_size * (shape.empty() ? 1 : [&] {
              int64_t n = 1;
              for (int64_t s : shape) n *= s;
              return n;
            }()));
  // and it reads back as the same JSON, of the same type
  const Json back = Decoded(d);
  EXPECT_EQ(back, value) << value.dump();
  EXPECT_EQ(back.dump(), value.dump());
}

TEST(NpyOpaque, UpstreamFormOfEachValue) {
  ExpectForm(5, "NUMPY:<i8", {}, Le(5, 8));
  ExpectForm(-3, "NUMPY:<i8", {}, Le(static_cast<uint64_t>(-3), 8));
  ExpectForm(Json::parse("5"), "NUMPY:<i8", {}, Le(5, 8));  // parsed: number_unsigned
  ExpectForm(1.5, "NUMPY:<f8", {}, F8(1.5));
  ExpectForm(true, "NUMPY:|b1", {}, std::string(1, '\1'));
  ExpectForm(Json::array({1, 2, 3}), "NUMPY:<i8", {3}, Le(1, 8) + Le(2, 8) + Le(3, 8));
  ExpectForm(Json::array({Json::array({1, 2}), Json::array({3, 4})}), "NUMPY:<i8", {2, 2},
             Le(1, 8) + Le(2, 8) + Le(3, 8) + Le(4, 8));
  ExpectForm(Json::array({0.5, 2.5}), "NUMPY:<f8", {2}, F8(0.5) + F8(2.5));
  ExpectForm(Json::array({true, false}), "NUMPY:|b1", {2}, std::string("\1\0", 2));
  // numpy's <U: UCS-4, the longest string's code points, NUL-padded
  ExpectForm(Json::array({"a", "bc"}), "NUMPY:<U2", {2},
             Le('a', 4) + Le(0, 4) + Le('b', 4) + Le('c', 4));
  ExpectForm(Json::array({"\xc3\xa9", ""}), "NUMPY:<U1", {2}, Le(0xe9, 4) + Le(0, 4));
  ExpectForm(Json::array({"\xf0\x9f\x99\x82"}), "NUMPY:<U1", {1}, Le(0x1f642, 4));
  // an empty list: numpy's float64 of shape (0,); [[], []]: (2, 0)
  ExpectForm(Json::array(), "NUMPY:<f8", {0}, "");
  ExpectForm(Json::array({Json::array(), Json::array()}), "NUMPY:<f8", {2, 0}, "");
  // a scalar past int64: numpy's uint64
  const uint64_t big = uint64_t{1} << 63;
  ExpectForm(big, "NUMPY:<u8", {}, Le(big, 8));
}

TEST(NpyOpaque, MixedNumbersAreFloat64AsNumpyMakesThem) {
  const OpaqueData d = Encoded(Json::array({1, 2.5}));
  EXPECT_EQ(d.tag, "NUMPY:<f8");
  EXPECT_EQ(d.bytes, F8(1) + F8(2.5));
  EXPECT_EQ(Decoded(d), Json::array({1.0, 2.5}));
}

TEST(NpyOpaque, ValuesWithoutAFaithfulNumpyFormKeepTheJsonForm) {
  for (const Json& v : {Json(nullptr), Json("text"), Json{{"a", 1}},
                        Json::array({1, "a"}),                               // numpy: <U21
                        Json::array({true, 2}),                              // numpy: int64
                        Json::array({Json::array({1, 2}), Json::array({3})}),  // ragged
                        Json::array({Json::array({1}), 2}), Json::array({nullptr}),
                        Json::array({Json{{"a", 1}}}),
                        Json::array({uint64_t{1} << 63, 1}),  // float64 would change it
                        Json::array({int64_t{1} << 60, 0.5}), Json{{"hdf5_opaque", 1}}}) {
    absl::StatusOr<std::optional<OpaqueData>> out = EncodeOpaque(v);
    ASSERT_TRUE(out.ok()) << v.dump();
    EXPECT_FALSE(out->has_value()) << v.dump();
  }
  // nesting past HDF5's 32 dims
  Json deep = 1;
  for (int i = 0; i < 40; ++i) deep = Json::array({deep});
  EXPECT_FALSE(EncodeOpaque(deep)->has_value());
}

TEST(NpyOpaque, ReadsOtherNumpyDtypes) {
  // big-endian int32, int8 sign, uint16, float32, float16, byte strings, a "=" order
  EXPECT_EQ(Decoded({"NUMPY:>i4", 4, {2}, std::string("\0\0\1\0\xff\xff\xff\xfe", 8)}),
            Json::array({256, -2}));
  EXPECT_EQ(Decoded({"NUMPY:|i1", 1, {}, "\xff"}), -1);
  EXPECT_EQ(Decoded({"NUMPY:<u2", 2, {}, Le(65535, 2)}), 65535);
  EXPECT_EQ(Decoded({"NUMPY:<u8", 8, {}, Le(~uint64_t{0}, 8)}), ~uint64_t{0});
  float f = 0.25f;
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  EXPECT_EQ(Decoded({"NUMPY:<f4", 4, {}, Le(fb, 4)}), 0.25);
  EXPECT_EQ(Decoded({"NUMPY:<f2", 2, {3}, Le(0x3e00, 2) + Le(0xc000, 2) + Le(0x0001, 2)}),
            Json::array({1.5, -2.0, 5.960464477539063e-08}));
  EXPECT_TRUE(std::isinf(Decoded({"NUMPY:<f2", 2, {}, Le(0x7c00, 2)}).get<double>()));
  EXPECT_EQ(Decoded({"NUMPY:|S3", 3, {2}, std::string("ab\0xyz", 6)}), Json::array({"ab", "xyz"}));
  EXPECT_EQ(Decoded({"NUMPY:=i2", 2, {}, Le(7, 2)}), 7);
  // a bool byte other than 0 / 1 reads as true (NOTE [ HDF5 bools ] in h5_io.h)
  EXPECT_EQ(Decoded({"NUMPY:|b1", 1, {2}, std::string("\5\0", 2)}), Json::array({true, false}));
}

Json Description(const std::string& tag, std::vector<int64_t> shape, int64_t item,
                 const std::string& bytes) {
  return {{"hdf5_opaque",
           {{"tag", tag}, {"shape", shape}, {"item_size", item},
            {"base64", absl::Base64Escape(bytes)}}}};
}

TEST(NpyOpaque, UndecodableDataReadsAsItsDescriptionAndWritesBack) {
  const std::string c16 = F8(1) + F8(2);
  const std::vector<OpaqueData> cases = {
      {"NUMPY:<c16", 16, {1}, c16},             // complex: no JSON value
      {"NUMPY:<M8[ns]", 8, {}, Le(1, 8)},       // datetime
      {"", 3, {}, "xyz"},                       // h5py's np.void: no tag
      {"NUMPY:<i8", 4, {}, Le(1, 4)},           // item size disagrees with the tag
      {"NUMPY:<U1", 4, {}, Le(0xd800, 4)},      // a surrogate is no code point
      {"NUMPY:|S2", 2, {}, "\xff\xfe"},          // bytes that are not UTF-8
      {"NUMPY:<i3", 3, {}, "abc"}, {"NUMPY:<f1", 1, {}, "a"}, {"NUMPY:<U0", 0 + 4, {}, "abcd"},
      {"NUMPY:<i99999999999", 8, {}, Le(1, 8)}, {"NUMPY:xi8", 8, {}, Le(1, 8)},
  };
  for (const OpaqueData& d : cases) {
    const Json got = Decoded(d);
    EXPECT_EQ(got, Description(d.tag, d.shape, d.item_size, d.bytes)) << d.tag;
    const OpaqueData back = Encoded(got);  // written back: the same opaque data
    EXPECT_EQ(back.tag, d.tag);
    EXPECT_EQ(back.item_size, d.item_size);
    EXPECT_EQ(back.shape, d.shape);
    EXPECT_EQ(back.bytes, d.bytes);
  }
}

TEST(NpyOpaque, MalformedDataAndDescriptionsAreNamedErrors) {
  // bytes that do not fill the shape (the reader's bug, or a lie): an error, not a read past
  EXPECT_FALSE(DecodeOpaque({"NUMPY:<i8", 8, {2}, Le(1, 8)}).ok());
  EXPECT_FALSE(DecodeOpaque({"NUMPY:<i8", 0, {}, ""}).ok());
  EXPECT_FALSE(DecodeOpaque({"NUMPY:<i8", 8, {-1}, ""}).ok());
  EXPECT_FALSE(DecodeOpaque({"NUMPY:<i8", 8, std::vector<int64_t>(33, 1), Le(1, 8)}).ok());
  EXPECT_FALSE(
      DecodeOpaque({"NUMPY:<i8", 8, {int64_t{1} << 40, int64_t{1} << 40}, Le(1, 8)}).ok());
  const Json good = Description("NUMPY:<c16", {1}, 16, std::string(16, 'a'));
  auto with = [&](const char* k, const Json& v) {
    Json d = good;
    d["hdf5_opaque"][k] = v;
    return d;
  };
  for (const Json& bad : {with("tag", 3), with("tag", std::string(300, 't')),
                          with("shape", Json::array({-1})), with("shape", "x"),
                          with("shape", Json::array({2})),  // 16 bytes for two items
                          with("item_size", 0), with("item_size", 1.5),
                          with("base64", "not base64!"), with("extra", 1),
                          Json{{"hdf5_opaque", Json::object()}}}) {
    absl::StatusOr<std::optional<OpaqueData>> out = EncodeOpaque(bad);
    ASSERT_FALSE(out.ok()) << bad.dump();
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("hdf5_opaque"), std::string::npos) << out.status();
  }
}

}  // namespace
}  // namespace td::h5::internal
