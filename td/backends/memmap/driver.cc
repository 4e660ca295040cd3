// The "memmap" format driver (NOTE [ Format drivers ] in td/format/format.h): a memmap directory,
// NOTE [ Memmap directory format ] in format.h.
#include <string>

#include "td/backends/memmap/format.h"
#include "td/format/format.h"

namespace td {
namespace {

format::Driver MemmapDriver() {
  format::Driver d;
  d.id = "memmap";
  d.summary = "a memmap directory: one file per leaf and meta.json per level (Python tensordict's "
              "memmap / load_memmap)";
  d.traits.dtypes = format::EveryDtype();
  d.detect = [](const std::string& path) {
    return format::DirectoryHolds(path, internal::memmap::kMetaFile);
  };
  d.save = [](const TensorDict& td, const std::string& path) {
    td.memmap(path, MemmapOptions().copy_existing(true));
  };
  d.load = [](const std::string& path) { return TensorDict::load_memmap(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(MemmapDriver());

}  // namespace
}  // namespace td
