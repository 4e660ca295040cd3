// libFuzzer target for what td::distributed reads from another process before allocating
// anything (td/distributed/internal/wire.h): the 48-byte header of a point-to-point message and the JSON
// structure of an init_remote message. Any bytes must give a Header, a parsed structure or a
// td::ValueError, never a crash, a hang, an uncaught exception or a deep recursion; and what is
// accepted must keep the promises the receiver relies on before it allocates:
//   * an accepted header announces sizes in [0, kMaxAnnouncedBytes], known flags only, per-leaf
//     sizes as whole int64 arrays, and only data messages per leaf or agreed;
//   * an accepted structure nests at most td::kMaxNestingDepth levels, every level's batch size
//     starts with its parent's, every tensor has a known dtype and a shape of non-negative sizes
//     starting with its level's batch size, and its leaves take at most the data bytes given;
//   * only the CPU device is accepted when only the CPU is available.
// Input: the first 48 bytes are the header's words; the rest, the structure's JSON text. The data
// bytes the structure may describe are taken from header word 4 (clamped to 1 MiB), so the fuzzer
// explores the byte bound too.
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "td/core/errors.h"
#include "td/distributed/internal/wire.h"

namespace {

namespace internal = td::distributed::internal;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "header_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

bool CpuOnly(const c10::Device& d) { return d.is_cpu(); }

std::vector<int64_t> Sizes(const nlohmann::json& a) {
  std::vector<int64_t> out;
  for (const auto& d : a) out.push_back(d.get<int64_t>());
  return out;
}

bool StartsWith(const std::vector<int64_t>& v, const std::vector<int64_t>& prefix) {
  if (v.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (v[i] != prefix[i]) return false;
  }
  return true;
}

// Walks an accepted structure without recursion and checks the promises above.
void CheckAccepted(const nlohmann::json& root, int64_t max_bytes) {
  struct Item {
    const nlohmann::json* level;
    std::vector<int64_t> parent_batch;
    int depth;
    bool has_parent;
  };
  std::vector<Item> todo = {{&root, {}, 0, false}};
  long double total = 0;
  while (!todo.empty()) {
    Item it = todo.back();
    todo.pop_back();
    Require(it.depth <= td::kMaxNestingDepth, "an accepted structure nests too deep");
    const nlohmann::json& level = *it.level;
    std::vector<int64_t> batch = Sizes(level.at("batch_size"));
    for (int64_t b : batch) Require(b >= 0, "negative batch size accepted");
    Require(!it.has_parent || StartsWith(batch, it.parent_batch),
            "a nested batch size that does not start with its parent's");
    const nlohmann::json& device = level.at("device");
    Require(device.is_null() || c10::Device(device.get<std::string>()).is_cpu(),
            "a device that is not available accepted");
    for (const nlohmann::json& e : level.at("entries")) {
      const std::string kind = e.at("kind").get<std::string>();
      if (kind == "tensor") {
        const int64_t dtype = e.at("dtype").get<int64_t>();
        Require(dtype >= 0 && dtype < static_cast<int64_t>(c10::ScalarType::NumOptions) &&
                    !c10::isQIntType(static_cast<c10::ScalarType>(dtype)),
                "an unknown dtype accepted");
        std::vector<int64_t> shape = Sizes(e.at("shape"));
        Require(StartsWith(shape, batch), "a shape that does not start with the batch size");
        long double bytes = c10::elementSize(static_cast<c10::ScalarType>(dtype));
        for (int64_t d : shape) {
          Require(d >= 0, "negative size accepted");
          bytes *= static_cast<long double>(d);
        }
        total += bytes;
      } else if (kind == "tensordict") {
        todo.push_back({&e.at("value"), batch, it.depth + 1, true});
      } else {
        Require(kind == "non_tensor", "an unknown entry kind accepted");
      }
    }
  }
  Require(total <= static_cast<long double>(max_bytes), "leaves larger than the data accepted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeaderBytes = internal::kHeaderBytes;
  if (size < kHeaderBytes) return 0;
  int64_t words[internal::kHeaderWords];
  std::memcpy(words, data, kHeaderBytes);
  try {
    internal::Header h = internal::ParseHeader(words, "header_fuzzer", "the message");
    Require(h.desc_bytes >= 0 && h.desc_bytes <= internal::kMaxAnnouncedBytes, "description size");
    Require(h.data_bytes >= 0 && h.data_bytes <= internal::kMaxAnnouncedBytes, "data size");
    Require((words[5] & ~(internal::kPerLeafFlag | internal::kAgreedFlag)) == 0, "unknown flags");
    Require(!h.per_leaf || h.data_bytes % 8 == 0, "per-leaf sizes not whole int64s");
    Require(h.kind == internal::kKindData || !(h.per_leaf || h.agreed), "per-leaf/agreed init");
  } catch (const td::ValueError&) {
  }
  int64_t max_bytes = words[4] < 0 ? 0 : (words[4] > (int64_t{1} << 20) ? int64_t{1} << 20 : words[4]);
  nlohmann::json structure = nlohmann::json::parse(data + kHeaderBytes, data + size, nullptr,
                                                   /*allow_exceptions=*/false);
  if (structure.is_discarded()) return 0;
  try {
    internal::ValidateStructure(structure, max_bytes, CpuOnly, "header_fuzzer");
  } catch (const td::ValueError&) {
    return 0;
  }
  CheckAccepted(structure, max_bytes);
  return 0;
}
