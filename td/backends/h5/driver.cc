// The "h5" format driver (NOTE [ Format drivers ] in td/format/format.h): an HDF5 file in
// upstream's PersistentTensorDict layout, NOTE [ HDF5 layout ] in h5.h.
#include <string>

#include "td/backends/h5/h5.h"
#include "td/format/format.h"

namespace td {
namespace {

// HDF5's format signature, at the file's start (a file with a user block has it at 512, 1024,
// ...: such a file is loaded by naming the format).
bool IsHdf5File(const std::string& path) {
  return format::FileBytes(path, 0, 8) == std::string("\x89HDF\r\n\x1a\n", 8);
}

format::Driver H5Driver() {
  format::Driver d;
  d.id = "h5";
  d.summary = "an HDF5 file in Python tensordict's PersistentTensorDict layout (to_h5 / from_h5, "
              "h5py)";
  d.suffixes = {".h5", ".hdf5"};
  // numpy (hence h5py and upstream's to_h5) has no bfloat16 or float8; complex is refused here.
  d.traits.dtypes = format::DtypesExcept(
      {c10::kBFloat16, c10::kComplexFloat, c10::kComplexDouble}, /*float8=*/false);
  d.traits.meta_data = false;  // written as its value
  d.traits.non_tensor_stack = false;
  d.detect = IsHdf5File;
  d.save = [](const TensorDict& td, const std::string& path) { h5::to_h5(td, path); };
  d.load = [](const std::string& path) { return h5::from_h5(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(H5Driver());

}  // namespace
}  // namespace td
