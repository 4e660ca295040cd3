#include "td/core/dtype.h"

#include <cctype>
#include <utility>

#include "absl/strings/str_join.h"
#include "td/compat/dtypes.h"
#include "td/core/errors.h"

namespace td {
namespace {

struct DtypeSpelling {
  c10::ScalarType type;
  std::string_view name;
};

// Canonical spelling first; aliases after.
constexpr DtypeSpelling kSpellings[] = {
    {c10::kFloat, "torch.float32"},     {c10::kDouble, "torch.float64"},
    {c10::kHalf, "torch.float16"},      {c10::kBFloat16, "torch.bfloat16"},
    {c10::kByte, "torch.uint8"},        {c10::kChar, "torch.int8"},
    {c10::kShort, "torch.int16"},       {c10::kInt, "torch.int32"},
    {c10::kLong, "torch.int64"},        {c10::kBool, "torch.bool"},
    {c10::kComplexFloat, "torch.complex64"}, {c10::kComplexDouble, "torch.complex128"},
    {c10::kFloat, "torch.float"},       {c10::kDouble, "torch.double"},
    {c10::kHalf, "torch.half"},         {c10::kShort, "torch.short"},
    {c10::kInt, "torch.int"},           {c10::kLong, "torch.long"},
    {c10::kComplexFloat, "torch.cfloat"}, {c10::kComplexDouble, "torch.cdouble"},
};

}  // namespace

std::string DtypeName(c10::ScalarType dtype) {
  for (const auto& s : kSpellings) {
    if (s.type == dtype) return std::string(s.name);
  }
  // uint16 / uint32 / uint64 and float8 where this LibTorch has them (td/compat/dtypes.h,
  // NOTE [ Dtypes by LibTorch version ]).
  if (const compat::NewerDtypeInfo* d = compat::FindNewerDtype(dtype)) return std::string(d->name);
  TD_FAIL(TypeError, "dtype ", dtype, " has no tensordict spelling");
}

std::optional<c10::ScalarType> ParseDtypeName(std::string_view name) {
  for (const auto& s : kSpellings) {
    if (s.name == name) return s.type;
  }
  return compat::NewerDtype(name);
}

std::string DtypeRepr(c10::ScalarType dtype) {
  for (const auto& s : kSpellings) {
    if (s.type == dtype) return std::string(s.name);
  }
  if (dtype == c10::kComplexHalf) return "torch.complex32";
  // Python names the others as c10 does, in lower case: QInt8 -> qint8, UInt16 -> uint16.
  std::string name = c10::toString(dtype);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "torch." + name;
}

std::optional<c10::ScalarType> ParseDtypeRepr(std::string_view name) {
  if (std::optional<c10::ScalarType> known = ParseDtypeName(name)) return known;
  for (int i = 0; i < static_cast<int>(c10::ScalarType::Undefined); ++i) {
    const auto dtype = static_cast<c10::ScalarType>(i);
    if (DtypeRepr(dtype) == name) return dtype;
  }
  return std::nullopt;
}

std::string SizeRepr(c10::IntArrayRef sizes) {
  return "torch.Size([" + absl::StrJoin(sizes, ", ") + "])";
}

}  // namespace td
