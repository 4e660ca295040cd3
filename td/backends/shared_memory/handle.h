// The shared-memory handle format (internal to the shared_memory backend), read as untrusted
// input from another process. Pure functions over strings; the fuzzer builds it alone
// (handle_fuzzer.cc, tests/fuzz/run.sh).
//
// NOTE [ Shared-memory handles ]
// {"format": "tensordict-shm", "version": 1,
//  "segments": [{"pid": P, "fd": F, "size": bytes of the whole mapping, "token": 32 hex digits}],
//  "root": LEVEL}
// LEVEL = {"batch_size": [ints >= 0], "entries": [ENTRY...]}
// ENTRY = {"key": string, "kind": "tensor", "segment": index, "offset": bytes from the mapping's
//          start, "dtype": "torch.float32", "shape": [ints >= 0], "strides": [ints >= 0]}
//       | {"key": string, "kind": "tensordict", "value": LEVEL}
//       | {"key": string, "kind": "non_tensor", "data": any JSON, "cls": absent (NonTensorData),
//          "MetaData" or "NonTensorStack"}
// Accepted only when it obeys the rules of every structure reader (NOTE [ Structure codec ] in
// td/structure/structure.h), is at most kMaxHandleBytes, and each non-empty tensor's
// offset + (sum of (size-1)*stride + 1) * element size fits in int64 and is at most its segment's
// size, its offset at least the 64-byte header and a multiple of the element size.
// AttachSharedMemory then checks each segment's real size equals "size" before mapping, so a
// tensor accepted here lies inside mapped memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {
namespace shm {

inline constexpr size_t kHeaderBytes = 64;  // a segment's header: magic | token | size | pad
inline constexpr size_t kMaxHandleBytes = size_t{64} << 20;

struct SegmentRef {
  int64_t pid = 0;
  int64_t fd = -1;
  uint64_t size = 0;   // bytes of the whole mapping, header included
  std::string token;   // 16 raw bytes
};

// The segments a handle names, and its TensorDict: levels are TensorDicts, leaves lie at
// Location{index: the segment, start: the offset from the mapping's start, strides}.
struct Handle {
  std::vector<SegmentRef> segments;
  structure::Description structure;
};

// Parses and validates `text` as NOTE [ Shared-memory handles ] describes. Returns
// InvalidArgument naming the field (and the key, for an entry) on anything else; never throws.
//   absl::StatusOr<Handle> h = ParseHandle(text);
//   if (!h.ok()) throw td::ValueError(...);
absl::StatusOr<Handle> ParseHandle(std::string_view text);

}  // namespace shm
}  // namespace internal
}  // namespace td
