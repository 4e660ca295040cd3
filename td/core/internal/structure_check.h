// The one set of rules for a TensorDict structure read from text another program wrote.
// Header-only, so the fuzz targets (tests/fuzz/run.sh) need no library beyond dtype.cc.
//
// NOTE [ Structure validation ]
// Every codec that reads a TensorDict's structure from untrusted text or bytes keeps its own
// layout (fixed by Python tensordict, or by the wire protocol); whether the structure it describes
// is valid is decided by the functions below, with one set of limits, which td/structure's
// Builder applies by construction (NOTE [ Structure codec ] in td/structure/structure.h). JSON
// nesting is checked on the text before parsing (nlohmann/json's parser and destructor recurse
// once per level): a format spends at most three JSON levels per TensorDict level, so every
// buildable TensorDict fits, with room for non-tensor data. TensorDict nesting is checked before
// descending into a level, so any depth of input is safe.
// Each function returns InvalidArgument stating the problem; the codec prefixes where it is
// (file, key, level) and raises its own error (NOTE [ Status to exception ] in td/core/errors.h).
//
// NOTE [ Untrusted JSON ]
// Every JSON text from a file or another process is parsed by ParseUntrustedJson below or
// structure::ParseJson (td/structure/structure.h): both check the nesting first (CheckJsonDepth)
// and report malformed text (bad syntax, invalid UTF-8) as a status, not an exception. The limit
// is kMaxStructureJsonDepth for all: non-tensor data one format writes, another reads back.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "td/compat/dtypes.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/json_depth.h"

namespace td {
namespace internal {

// The deepest JSON a structure's text may nest (see the NOTE above).
inline constexpr int kMaxStructureJsonDepth = 4 * kMaxNestingDepth;
// The most dims a shape or batch size may have.
inline constexpr size_t kMaxStructureDims = 64;

// OK when `text` nests [ and { at most kMaxStructureJsonDepth levels.
inline absl::Status CheckJsonDepth(std::string_view text) {
  if (JsonMaxDepth(text, kMaxStructureJsonDepth) >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("JSON nested deeper than ",
                                                 kMaxStructureJsonDepth, " levels"));
}

// `text` parsed as a `Json` (nlohmann::json or ordered_json) per NOTE [ Untrusted JSON ], or
// InvalidArgument stating the problem, which the caller prefixes with the file or key.
//   absl::StatusOr<nlohmann::json> j = ParseUntrustedJson<nlohmann::json>(text);
template <class Json>
absl::StatusOr<Json> ParseUntrustedJson(std::string_view text) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) return depth;
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const typename Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", e.what()));
  }
}

// OK when a level `depth` levels below the root may exist (depth <= kMaxNestingDepth).
inline absl::Status CheckNestingDepth(int depth) {
  if (depth <= kMaxNestingDepth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "TensorDicts nested more than ", kMaxNestingDepth, " levels deep (td::kMaxNestingDepth)"));
}

// A size as a JSON number: an integer in [0, 2^63-1], or nullopt.
template <class Json>
std::optional<int64_t> SizeFromJson(const Json& d) {
  if (d.is_number_unsigned()) {
    const uint64_t v = d.template get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (d.is_number_integer()) {
    const int64_t v = d.template get<int64_t>();
    if (v >= 0) return v;
  }
  return std::nullopt;
}

// A shape or batch size: a JSON list of at most kMaxStructureDims sizes in [0, 2^63-1].
template <class Json>
absl::StatusOr<std::vector<int64_t>> ShapeFromJson(const Json& j) {
  if (!j.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a list of integers in [0, 2^63-1], got a ", j.type_name(), " (", j.dump(),
        ")"));
  }
  if (j.size() > kMaxStructureDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has ", j.size(), " dims; at most ", kMaxStructureDims, " are supported"));
  }
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (const Json& d : j) {
    std::optional<int64_t> v = SizeFromJson(d);
    if (!v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "holds ", d.dump(), ", not an integer in [0, 2^63-1] (", j.dump(), ")"));
    }
    out.push_back(*v);
  }
  return out;
}

// OK when `shape` starts with `batch`; the message names both, `shape_name` saying what
// `shape` is ("shape", "batch size").
inline absl::Status CheckStartsWith(const std::vector<int64_t>& shape,
                                    const std::vector<int64_t>& batch,
                                    std::string_view shape_name) {
  bool ok = shape.size() >= batch.size();
  for (size_t i = 0; ok && i < batch.size(); ++i) ok = shape[i] == batch[i];
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the ", absl::string_view(shape_name.data(), shape_name.size()), " ", SizeRepr(shape),
      " does not start with the batch size ", SizeRepr(batch)));
}

// The dtype a name as Python writes it names ("torch.float32"); one this LibTorch lacks is refused
// with compat::NoSuchDtypeMessage (NOTE [ Dtypes by LibTorch version ] in td/compat/dtypes.h).
inline absl::StatusOr<c10::ScalarType> DtypeFromName(std::string_view name) {
  if (std::optional<c10::ScalarType> d = ParseDtypeName(name)) return *d;
  if (const compat::NewerDtypeInfo* d = compat::FindNewerDtype(name)) {
    return absl::InvalidArgumentError(compat::NoSuchDtypeMessage(*d));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", absl::string_view(name.data(), name.size()), "\""));
}

// The dtype of a ScalarType code LibTorch 1.13 and 2.x agree on (td::distributed's wire) or of a
// td/compat/dtypes.h dtype (same code in every LibTorch); one it lacks: compat::NoSuchDtypeMessage.
inline absl::StatusOr<c10::ScalarType> DtypeFromCode(int64_t code) {
  if (const compat::NewerDtypeInfo* d = compat::FindNewerDtypeCode(code)) {
    if (d->type) return *d->type;
    return absl::InvalidArgumentError(
        absl::StrCat("dtype code ", code, ": ", compat::NoSuchDtypeMessage(*d)));
  }
  // Byte (0) to Bool (11), then BFloat16 (15): the quantized types between are not stored.
  if ((code >= static_cast<int64_t>(c10::kByte) && code <= static_cast<int64_t>(c10::kBool)) ||
      code == static_cast<int64_t>(c10::kBFloat16)) {
    return static_cast<c10::ScalarType>(code);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype code ", code));
}

// numel x element size of a tensor of `shape` and `dtype`: an error on negative dims, more than
// kMaxStructureDims dims, or a byte count past 2^63-1.
inline absl::StatusOr<int64_t> TensorBytes(const std::vector<int64_t>& shape,
                                           c10::ScalarType dtype) {
  if (shape.size() > kMaxStructureDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        shape.size(), " dims; at most ", kMaxStructureDims, " are supported"));
  }
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dim in ", SizeRepr(shape)));
    if (d == 0) zero = true;
  }
  if (zero) return int64_t{0};
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a tensor of shape ", SizeRepr(shape), " and dtype ", DtypeName(dtype),
                       " has more bytes than fit in int64"));
    }
  }
  return n;
}

}  // namespace internal
}  // namespace td
