// The "consolidated" format driver (NOTE [ Format drivers ] in td/format/format.h): one file,
// NOTE [ Consolidated file format ] in file.h.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "td/consolidate/file.h"
#include "td/format/format.h"

namespace td {
namespace {

// A regular file ending in [metadata | n] whose n fits and whose metadata is a JSON object that
// starts with a "cls" field, as both writers put it first ('{"cls":' here, '{"cls": ' Python's).
bool IsConsolidatedFile(const std::string& path) {
  const std::optional<std::string> tail = format::FileBytes(path, 8, 8, /*from_end=*/true);
  if (!tail) return false;
  int64_t n = 0;
  std::memcpy(&n, tail->data(), 8);
  return n >= 8 && n < std::numeric_limits<int64_t>::max() - 8 &&
         format::FileBytes(path, n + 8, 7, /*from_end=*/true) == std::string("{\"cls\":");
}

format::Driver ConsolidatedDriver() {
  format::Driver d;
  d.id = "consolidated";
  d.summary = "a consolidated file: every leaf in one buffer, JSON metadata at its end (Python "
              "tensordict's consolidate(filename=...) / from_consolidated)";
  // Upstream 0.14 can neither write nor read float8 in this format.
  d.traits.dtypes = format::DtypesExcept({}, /*float8=*/false);
  d.traits.meta_data = false;  // written and read as NonTensorData, as upstream's
  d.traits.names = true;
  d.traits.keeps_key_order = false;  // a level reads non-tensors, leaves, then sub-levels
  d.detect = IsConsolidatedFile;
  d.save = [](const TensorDict& td, const std::string& path) { save_consolidated(td, path); };
  d.load = [](const std::string& path) { return load_consolidated(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(ConsolidatedDriver());

}  // namespace
}  // namespace td
