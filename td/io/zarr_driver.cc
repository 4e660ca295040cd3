// The "zarr" format driver (NOTE [ Format drivers ] in td/format/format.h): a Zarr group store,
// NOTE [ Zarr layout ] in zarr.h.
#include <string>

#include "td/format/format.h"
#include "td/io/zarr.h"

namespace td {
namespace {

format::Driver ZarrDriver() {
  format::Driver d;
  d.id = "zarr";
  d.summary = "a Zarr group store, format 2 written, 2 and 3 read (Python tensordict's to_zarr / "
              "from_zarr, zarr-python)";
  d.suffixes = {".zarr"};
  // numpy has neither bfloat16 nor float8 (upstream's to_zarr refuses them too).
  d.traits.dtypes = format::DtypesExcept({c10::kBFloat16}, /*float8=*/false);
  d.traits.meta_data = false;
  d.traits.non_tensor_stack = false;
  d.traits.names = true;
  d.traits.keeps_key_order = false;
  d.detect = [](const std::string& path) {
    return format::DirectoryHolds(path, ".zgroup") || format::DirectoryHolds(path, "zarr.json");
  };
  d.save = [](const TensorDict& td, const std::string& path) { to_zarr(td, path); };
  d.load = [](const std::string& path) { return from_zarr(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(ZarrDriver());

}  // namespace
}  // namespace td
