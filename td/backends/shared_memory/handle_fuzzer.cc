// libFuzzer target for the shared-memory handle parser (NOTE [ Shared-memory handles ] in
// handle.h): any bytes give a status or a handle, never a crash, hang or exception; an accepted
// handle keeps AttachSharedMemory's premise: every non-empty tensor lies inside its segment, its
// element count fits in int64, and shapes start with their level's batch size. Built with clang
// by tests/fuzz/run.sh (-fsanitize=fuzzer,address,undefined); //tests/fuzz:shm_handle_replay_test
// replays the seed corpus in every normal test run.
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "td/backends/shared_memory/handle.h"

namespace {

using td::internal::shm::Handle;
using td::structure::EntryKind;
using td::structure::Level;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "handle_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

void CheckLevel(const Handle& h, const Level& level, const Level* parent) {
  if (parent != nullptr) {
    Require(level.batch_size().size() >= parent->batch_size().size(), "nested batch too short");
    for (size_t i = 0; i < parent->batch_size().size(); ++i) {
      Require(level.batch_size()[i] == parent->batch_size()[i], "nested batch != parent's");
    }
  }
  for (const auto& e : level.entries()) {
    if (e.kind == EntryKind::kLevel) {
      Require(e.level != nullptr, "a TensorDict entry without a level");
      CheckLevel(h, *e.level, &level);
      continue;
    }
    if (e.kind != EntryKind::kLeaf) continue;
    const std::vector<int64_t>& shape = e.shape;
    const std::vector<int64_t>& strides = e.location.strides;
    const uint64_t offset = static_cast<uint64_t>(e.location.start);
    Require(e.location.index >= 0 &&
                static_cast<size_t>(e.location.index) < h.segments.size(),
            "segment index out of range");
    Require(e.location.start >= 0, "negative offset");
    Require(shape.size() == strides.size(), "sizes and strides differ in length");
    Require(shape.size() >= level.batch_size().size(), "shape shorter than the batch size");
    for (size_t i = 0; i < level.batch_size().size(); ++i) {
      Require(shape[i] == level.batch_size()[i], "shape does not start with the batch size");
    }
    // Recomputed independently in 128-bit arithmetic (each term < 2^126; at most 64 dims).
    unsigned __int128 numel = 1, last = 0;
    bool empty = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      Require(shape[d] >= 0 && strides[d] >= 0, "negative size or stride");
      if (shape[d] == 0) empty = true;
    }
    if (empty) continue;
    for (size_t d = 0; d < shape.size(); ++d) {
      numel *= static_cast<unsigned __int128>(shape[d]);
      Require(numel <= static_cast<unsigned __int128>(INT64_MAX), "numel overflows int64");
      last += static_cast<unsigned __int128>(shape[d] - 1) *
              static_cast<unsigned __int128>(strides[d]);
    }
    const unsigned __int128 end =
        offset + (last + 1) * static_cast<unsigned __int128>(c10::elementSize(e.dtype));
    Require(offset >= td::internal::shm::kHeaderBytes, "tensor inside the segment header");
    Require(end <= h.segments[static_cast<size_t>(e.location.index)].size,
            "tensor reaches past its segment");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Handle> h = td::internal::shm::ParseHandle(text);
  if (!h.ok()) {
    Require(h.status().code() == absl::StatusCode::kInvalidArgument, "non-InvalidArgument error");
    return 0;
  }
  for (const auto& s : h->segments) {
    Require(s.size >= td::internal::shm::kHeaderBytes && s.token.size() == 16, "bad segment");
  }
  CheckLevel(*h, h->structure.root(), nullptr);
  return 0;
}
