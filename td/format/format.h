// Format drivers: every file and wire format of TensorDicts under one id, with what it holds.
//
// NOTE [ Format drivers ]
// A driver is one format's way to write a TensorDict and read it back: formats of a path
// ("memmap" directory, "tdz" archive, "consolidated" file, "zarr" store, "h5" file) and of bytes
// ("shm_handle", td::distributed's init_remote message "wire"). Each format's alwayslink package
// registers its driver statically (TD_REGISTER_FORMAT_DRIVER); a program holds those it links.
// td::save / td::load (td/io/io.h) pick one by the options' format, else by the path's suffix,
// else, for load, by Driver::detect; a memmap directory otherwise.
// //tests/format_conformance checks every registered driver against its Traits: what it claims to
// hold round-trips exactly, what it does not is refused by a named error, never stored differently.
// Where each format's bytes are described:
//   memmap         NOTE [ Memmap directory format ] in td/backends/memmap/format.h
//   tdz            NOTE [ Memmap archive format ] in td/backends/memmap/archive/archive.h
//   consolidated   NOTE [ Consolidated file format ] in td/consolidate/file.h
//   zarr           NOTE [ Zarr layout ] in td/io/zarr.h
//   h5             NOTE [ HDF5 layout ] in td/backends/h5/h5.h
//   shm_handle     NOTE [ Shared-memory handles ] in td/backends/shared_memory/handle.h
//   wire           NOTE [ Packed layout ] in td/distributed/internal/packing.h
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "td/core/tensordict.h"

namespace td {
namespace format {

// What a driver holds. A TensorDict within these round-trips: its keys in order, batch sizes,
// leaves' dtypes, shapes and values, non-tensor values; anything else is refused when written.
struct Traits {
  // Leaf dtypes it stores (others: refused naming the dtype).
  std::vector<c10::ScalarType> dtypes;
  // NonTensorData values (JSON); MetaData read back as MetaData (else as NonTensorData, as
  // upstream's format does); NonTensorStack values (else refused naming the key).
  bool non_tensor = true;
  bool meta_data = true;
  bool non_tensor_stack = true;
  // Dim names of every level.
  bool names = false;
  // Keys read back in the order written (else in the format's own order: Zarr's by name, the
  // consolidated file's non-tensors, leaves, then sub-levels, as upstream reads them).
  bool keeps_key_order = true;
  // Leaves read back on their device as written (else on the CPU).
  bool keeps_device = false;
};

// One format. Path formats fill detect / save / load; byte formats encode / decode.
struct Driver {
  std::string id;
  // One line for listings and errors: what the format is and who else reads it.
  std::string summary;
  // Path endings that select it in td::save / td::load (".tdz"), without other meaning.
  std::vector<std::string> suffixes;
  Traits traits;
  // Whether `path` holds this format, from its first bytes or its directory's files; never throws.
  std::function<bool(const std::string& path)> detect;
  // Writes `td` at `path`. Where a previous good copy was, it stays whole until the new one is
  // complete. Throws the format's named error for a TensorDict it cannot hold.
  std::function<void(const TensorDict& td, const std::string& path)> save;
  // Reads what `save` (or Python tensordict) wrote at `path`; a named error naming the path for
  // anything else.
  std::function<TensorDict(const std::string& path)> load;
  // The bytes of `td`, and `td` from them (bytes another process or rank reads).
  std::function<std::string(const TensorDict& td)> encode;
  std::function<TensorDict(const std::string& bytes)> decode;

  bool is_path_format() const { return static_cast<bool>(save); }
};

// Every dtype a format may store, on this LibTorch: bool, uint8, int8/16/32/64, float16,
// bfloat16, float32/64, complex64/128, then those of NOTE [ Dtypes by LibTorch version ]
// (td/compat/dtypes.h) this LibTorch has.
std::vector<c10::ScalarType> EveryDtype();
// EveryDtype() without `excluded`, and without the float8 dtypes unless `float8`.
std::vector<c10::ScalarType> DtypesExcept(std::vector<c10::ScalarType> excluded, bool float8);

// Probes for Driver::detect; neither throws nor blocks on a FIFO.
// Whether `path` is a directory holding the regular file `name`.
bool DirectoryHolds(const std::string& path, std::string_view name);
// `n` bytes of the regular file `path` at `offset` from its start (from its end: `from_end`), or
// nullopt when it is no regular file or has not that many bytes there.
std::optional<std::string> FileBytes(const std::string& path, int64_t offset, size_t n,
                                     bool from_end = false);

// Registers `driver` under driver.id; false (keeping the first) on a duplicate id.
bool RegisterDriver(Driver driver);
// Ids of every registered driver, sorted.
std::vector<std::string> RegisteredDrivers();
// The driver `id`; throws KeyError naming the registered ids otherwise.
const Driver& GetDriver(std::string_view id);
// The path format whose suffix ends `path`, or nullptr.
const Driver* DriverForSuffix(std::string_view path);
// The path format whose detect() accepts `path`, or nullptr; ValueError when two do.
const Driver* DetectDriver(const std::string& path);

#define TD_FORMAT_CONCAT_INNER(a, b) a##b
#define TD_FORMAT_CONCAT(a, b) TD_FORMAT_CONCAT_INNER(a, b)
// In a format's .cc (cc_library with alwayslink = True):
//   TD_REGISTER_FORMAT_DRIVER([] { format::Driver d; d.id = "zarr"; ...; return d; }());
#define TD_REGISTER_FORMAT_DRIVER(driver)                                 \
  static const bool TD_FORMAT_CONCAT(td_format_registered_, __LINE__) = \
      ::td::format::RegisterDriver(driver)

}  // namespace format
}  // namespace td
