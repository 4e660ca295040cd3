// init_remote messages as bytes, and the "wire" format driver over them (init_message.h).
#include "td/distributed/internal/init_message.h"

#include <ATen/ATen.h>

#include <array>
#include <cstring>
#include <string>

#include "td/core/errors.h"
#include "td/distributed/internal.h"
#include "td/distributed/internal/packing.h"
#include "td/distributed/internal/wire.h"
#include "td/format/format.h"
#include "td/structure/structure.h"

namespace td {
namespace distributed {
namespace internal {

TensorDict ReadStructure(const std::string& desc, int64_t max_leaf_bytes, const std::string& what,
                         const std::string& sender) {
  // Its nesting, then its syntax (NOTE [ Untrusted JSON ] in td/core/internal/structure_check.h).
  absl::StatusOr<nlohmann::json> structure = structure::ParseJson<nlohmann::json>(desc);
  if (structure::RuleOf(structure.status()) == structure::Rule::kJsonDepth) {
    TD_FAIL(ValueError, what, ": the TensorDict structure received is invalid: ",
            structure.status().message(), "; nothing was allocated");
  }
  if (!structure.ok()) {
    TD_FAIL(ValueError, what, ": the TensorDict structure received from ", sender,
            " is not JSON; nothing was allocated");
  }
  const structure::Description d =
      ValidateStructure(*structure, max_leaf_bytes, DeviceAvailable, what);
  try {
    return EmptyFrom(d.root());
  } catch (const c10::Error& e) {  // what TensorDict itself refuses (a key, a batch size)
    TD_FAIL(ValueError, what, ": the TensorDict structure received from ", sender,
            " is invalid: ", e.what_without_backtrace());
  }
}

TensorDict InitStructure(const std::string& desc, int64_t data_bytes, uint64_t fingerprint,
                         const std::string& what, const std::string& sender) {
  TensorDict td = ReadStructure(desc, data_bytes, what, sender);
  const PackedLayout layout(td);
  if (layout.fingerprint() != fingerprint || layout.nbytes() != data_bytes) {
    TD_FAIL(ValueError, what, ": the structure received does not describe the data received (",
            layout.nbytes(), " bytes expected, ", data_bytes, " received)");
  }
  return td;
}

std::string EncodeInitMessage(const TensorDict& td) {
  const PackedLayout layout(td);
  const std::string desc = StructureToJson(td).dump();
  const std::array<int64_t, kHeaderWords> words =
      HeaderWords({kKindInit, layout.fingerprint(), static_cast<int64_t>(desc.size()),
                   layout.nbytes(), /*per_leaf=*/false, /*agreed=*/false});
  const int64_t prefix = kHeaderBytes + AlignUp(static_cast<int64_t>(desc.size()));
  std::string out(static_cast<size_t>(prefix + layout.nbytes()), '\0');
  std::memcpy(out.data(), words.data(), kHeaderBytes);
  std::memcpy(out.data() + kHeaderBytes, desc.data(), desc.size());
  at::from_blob(out.data() + prefix, {layout.nbytes()}, at::kByte).copy_(layout.Pack());
  return out;
}

TensorDict DecodeInitMessage(const std::string& bytes) {
  const std::string what = "td::distributed init_remote message (format \"wire\")";
  const auto size = static_cast<int64_t>(bytes.size());
  if (size < kHeaderBytes) {
    TD_FAIL(ValueError, what, ": ", size, " bytes, fewer than the ", kHeaderBytes,
            " of a message header");
  }
  int64_t words[kHeaderWords];
  std::memcpy(words, bytes.data(), kHeaderBytes);
  const Header h = ParseHeader(words, what, "the message");
  if (h.kind != kKindInit) {
    TD_FAIL(ValueError, what, ": the message is a send(), not an init_remote message");
  }
  const int64_t prefix = kHeaderBytes + AlignUp(h.desc_bytes);  // each <= 2^46: no overflow
  if (size != prefix + h.data_bytes) {
    TD_FAIL(ValueError, what, ": ", size, " bytes, but its header announces ", prefix,
            " of header and structure and ", h.data_bytes, " of data");
  }
  TensorDict td = InitStructure(bytes.substr(kHeaderBytes, h.desc_bytes), h.data_bytes,
                                h.fingerprint, what, "the message");
  if (h.data_bytes > 0) {  // Unpack copies out of `bytes`, which outlive the view
    PackedLayout(td).Unpack(
        at::from_blob(const_cast<char*>(bytes.data()) + prefix, {h.data_bytes}, at::kByte), td);
  }
  return td;
}

namespace {

format::Driver WireDriver() {
  format::Driver d;
  d.id = "wire";
  d.summary = "td::distributed's init_remote message: header, structure and packed leaves "
              "(init_remote / from_remote_init)";
  d.traits.dtypes = format::EveryDtype();
  d.encode = EncodeInitMessage;
  d.decode = DecodeInitMessage;
  return d;
}

TD_REGISTER_FORMAT_DRIVER(WireDriver());

}  // namespace
}  // namespace internal
}  // namespace distributed
}  // namespace td
