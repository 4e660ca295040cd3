// Python spellings of dtypes and sizes ("torch.float32", "torch.Size([3, 4])"), used by printing
// and by the on-disk memmap metadata shared with Python tensordict.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string>
#include <string_view>

namespace td {

// "torch.float32", "torch.int64", "torch.bool", ... Throws c10::TypeError for dtypes Python
// tensordict cannot store (quantized and complex-half types).
std::string DtypeName(c10::ScalarType dtype);
// Inverse of DtypeName; also accepts the aliases Python prints ("torch.float", "torch.long",
// "torch.half", ...). nullopt for anything else.
std::optional<c10::ScalarType> ParseDtypeName(std::string_view name);
// Python's spelling of any dtype this LibTorch has: DtypeName's where it has one, and
// "torch.complex32", "torch.qint8", "torch.quint4x2", "torch.uint16", ... for the rest (the
// dtypes the memmap format cannot store). Never throws: for messages, printing and records of
// a leaf's dtype.
std::string DtypeRepr(c10::ScalarType dtype);
// Inverse of DtypeRepr (ParseDtypeName's aliases included); nullopt for a name no dtype of this
// LibTorch has.
std::optional<c10::ScalarType> ParseDtypeRepr(std::string_view name);
// "torch.Size([3, 4])".
std::string SizeRepr(c10::IntArrayRef sizes);

}  // namespace td
