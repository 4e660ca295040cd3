// Reading what another process sends before anything is allocated for it: a point-to-point
// header and an init_remote structure (NOTE [ Packed layout ] in packing.h). Both are untrusted: a
// foreign, hostile or broken peer gets a named td::ValueError, never an allocation of the size it
// announces, a raw ATen error or a crash. Needs only c10, nlohmann-json and td/structure, so that
// td/distributed/header_fuzzer.cc builds with plain clang++.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "nlohmann/json.hpp"
#include "td/structure/structure.h"

namespace td {
namespace distributed {
namespace internal {

constexpr int64_t kHeaderWords = 6;
constexpr int64_t kHeaderBytes = kHeaderWords * static_cast<int64_t>(sizeof(int64_t));
constexpr int64_t kMagic = 0x5444445354ll;  // "TDDST"
// Header word 1.
constexpr int64_t kKindData = 1;  // send / isend
constexpr int64_t kKindInit = 2;  // init_remote
// Header word 5: how the rest of the message travels.
constexpr int64_t kPerLeafFlag = 1;  // one message per leaf follows
constexpr int64_t kAgreedFlag = 2;   // the structure is the agreed one (NOTE [ Agreed structures ])
// No header word announces more than this many bytes (64 TiB): anything larger is not ours.
constexpr int64_t kMaxAnnouncedBytes = int64_t{1} << 46;

struct Header {
  int64_t kind = 0;
  uint64_t fingerprint = 0;
  int64_t desc_bytes = 0;  // word 3
  int64_t data_bytes = 0;  // word 4 (per leaf: the byte size of the int64 array of leaf sizes)
  bool per_leaf = false;
  bool agreed = false;
};

// The header in `words` (kHeaderWords int64). Throws ValueError "<what>: <message> is not a
// td::distributed message ..." (`message`: "the message from rank 1") when the magic, kind, flags
// or sizes are not ones a td::distributed sender writes. Allocates nothing.
Header ParseHeader(const int64_t* words, const std::string& what, const std::string& message);
// The words of `header`, as ParseHeader reads them.
std::array<int64_t, kHeaderWords> HeaderWords(const Header& header);

// Reads an init_remote structure (StructureToJson in packing.h) before anything is allocated for
// it, through structure::Builder (NOTE [ Structure codec ] in td/structure/structure.h: any depth
// is safe). The wire adds: each level's device parses and passes `device_ok`; dtypes are codes
// the packed layout carries; the leaves' bytes, summed without overflow, are at most
// `max_leaf_bytes` (the data that came with the structure). ValueError "<what>: ..." names the key.
structure::Description ValidateStructure(const nlohmann::json& structure, int64_t max_leaf_bytes,
                                         const std::function<bool(const c10::Device&)>& device_ok,
                                         const std::string& what);

}  // namespace internal
}  // namespace distributed
}  // namespace td
