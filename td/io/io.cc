#include "td/io/io.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <filesystem>

#include "td/backends/memmap/archive/archive.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/core/errors.h"
#include "td/format/format.h"

namespace td {
namespace {

namespace fs = std::filesystem;

const MemmapStorage* MemmapOf(const TensorDict& td) {
  return dynamic_cast<const MemmapStorage*>(&td.storage());
}

// The path format save() (`save`) or load() uses: `chosen` (a memmap directory named "x.tdz" is
// read as one), else the one of the path's suffix, else "memmap" (whose loader names the problem).
const format::Driver& PathDriver(const format::Driver* chosen, const std::string& prefix,
                                 bool save) {
  const format::Driver* d = chosen != nullptr ? chosen : format::DriverForSuffix(prefix);
  if (d == nullptr) d = &format::GetDriver("memmap");
  if (!d->is_path_format()) {
    TD_FAIL(ValueError, save ? "save" : "load", ": format \"", d->id, "\" is ", d->summary,
            save ? ", not written to a path (its driver encodes bytes)"
                 : ", not read from a path (its driver decodes bytes)");
  }
  return *d;
}

// Runs `fn` with `td` unlocked when it is a locked memmap TensorDict (upstream's
// ignore_lock=True), locking it again afterwards, also when `fn` throws.
template <class Fn>
void IgnoringMemmapLock(TensorDict& td, Fn&& fn) {
  if (!td.is_locked() || MemmapOf(td) == nullptr) return fn();
  td.unlock_();
  try {
    fn();
  } catch (...) {
    td.lock_();
    throw;
  }
  td.lock_();
}

void RequireMemmap(const TensorDict& td, const char* fn, const NestedKey& key) {
  if (MemmapOf(td) == nullptr) {
    TD_FAIL(ValueError, fn, "(", key.repr(), "): can only make a memory-mapped tensor in a "
            "TensorDict on the memmap backend; this one is on '", td.backend(), "'");
  }
  if (td.contains(key)) {
    TD_FAIL(ValueError, fn, ": key ", key.repr(), " already exists in the TensorDict at ",
            MemmapOf(td)->path(), "; del_() it before writing it again");
  }
}

}  // namespace

TensorDict save(const TensorDict& td, const std::string& prefix, const SaveOptions& options) {
  std::error_code ec;
  if (!options.exists_ok() && fs::exists(fs::symlink_status(prefix, ec))) {
    TD_FAIL(ValueError, "save: ", prefix, " already exists (SaveOptions::exists_ok is false)");
  }
  if (options.format() && options.archive() && *options.archive() != (*options.format() == "tdz")) {
    TD_FAIL(ValueError, "save: SaveOptions::format \"", *options.format(), "\" and archive(",
            *options.archive() ? "true" : "false", ") disagree; give one of them");
  }
  const format::Driver& driver =
      PathDriver(options.format()    ? &format::GetDriver(*options.format())
                 : options.archive() ? &format::GetDriver(*options.archive() ? "tdz" : "memmap")
                                     : nullptr,
                 prefix, /*save=*/true);
  const MemmapOptions memmap_options = MemmapOptions()
                                           .parallel_options(options.parallel_options())
                                           .copy_existing(options.copy_existing())
                                           .exists_ok(options.exists_ok());
  if (driver.id == "memmap") return td.memmap(prefix, memmap_options);
  if (driver.id == "tdz") return save_archive(td, prefix, memmap_options);
  driver.save(td, prefix);
  return driver.load(prefix);
}

TensorDict dumps(const TensorDict& td, const std::string& prefix, const SaveOptions& options) {
  return save(td, prefix, options);
}

TensorDict load(const std::string& prefix, const LoadOptions& options) {
  const format::Driver& driver = PathDriver(
      options.format() ? &format::GetDriver(*options.format()) : format::DetectDriver(prefix),
      prefix, /*save=*/false);
  if (driver.id == "tdz" || (driver.id == "memmap" && is_memmap_archive(prefix))) {
    // TensorDict::load_memmap of a file reads an archive too (NOTE [ load_memmap of an archive ]).
    return load_archive(prefix, ArchiveLoadOptions()
                                    .mode(options.mode().value_or(MemmapMode::kReadOnly))
                                    .sub_path(options.sub_path()));
  }
  if (driver.id == "memmap") {
    return TensorDict::load_memmap(
        prefix, LoadMemmapOptions()
                    .mode(options.mode().value_or(MemmapMode::kReadWrite))
                    .sub_path(options.sub_path())
                    .parallel_options(options.parallel_options()));
  }
  TensorDict loaded = driver.load(prefix);
  return options.sub_path() ? loaded.get_tensordict(*options.sub_path()) : loaded;
}

TensorDict& load_(TensorDict& td, const std::string& prefix, const LoadOptions& options) {
  TensorDict loaded = load(prefix, options);
  // A memmap TensorDict writes the values into its own files; nested levels of mapped tensors
  // would be refused as "already memory-mapped elsewhere", so they are read into memory first.
  if (MemmapOf(td) != nullptr) loaded = loaded.clone();
  IgnoringMemmapLock(td, [&] { td.update(loaded); });
  return td;
}

TensorDict& load_memmap_(TensorDict& td, const std::string& prefix, const LoadOptions& options) {
  return load_(td, prefix, options);
}

std::string saved_path(const TensorDict& td) {
  const MemmapStorage* m = MemmapOf(td);
  if (m == nullptr) {
    TD_FAIL(ValueError, "saved_path: the TensorDict is on the '", td.backend(),
            "' backend, not memory-mapped (load_memmap / memmap give one that is)");
  }
  return m->path();
}

TensorDict& memmap_refresh_(TensorDict& td) {
  const MemmapStorage* m = MemmapOf(td);
  if (m == nullptr) {
    TD_FAIL(ValueError, "memmap_refresh_: the TensorDict is on the '", td.backend(),
            "' backend and has no memmap directory to refresh from");
  }
  TensorDict fresh = TensorDict::load_memmap(m->path(), LoadMemmapOptions().mode(m->mode()));
  if (!td.is_locked()) fresh.unlock_();
  td = fresh;
  return td;
}

at::Tensor make_memmap(TensorDict& td, const NestedKey& key, at::IntArrayRef shape,
                       at::ScalarType dtype) {
  RequireMemmap(td, "make_memmap", key);
  at::Tensor zeros = at::zeros({}, at::TensorOptions().dtype(dtype)).expand(shape);
  IgnoringMemmapLock(td, [&] { td.set(key, zeros); });
  return td.get(key);
}

at::Tensor make_memmap_from_tensor(TensorDict& td, const NestedKey& key, const at::Tensor& tensor,
                                   bool copy_data) {
  RequireMemmap(td, "make_memmap_from_tensor", key);
  if (!tensor.defined()) TD_FAIL(ValueError, "make_memmap_from_tensor(", key.repr(), "): undefined tensor");
  at::Tensor value =
      copy_data ? tensor : at::zeros({}, tensor.options().device(at::kCPU)).expand(tensor.sizes());
  IgnoringMemmapLock(td, [&] { td.set(key, value); });
  return td.get(key);
}

at::Tensor make_memmap_from_storage(TensorDict& td, const NestedKey& key, const c10::Storage& storage,
                                    at::IntArrayRef shape, at::ScalarType dtype) {
  RequireMemmap(td, "make_memmap_from_storage", key);
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) TD_FAIL(ValueError, "make_memmap_from_storage(", key.repr(), "): negative dim in ", shape);
    numel *= d;
  }
  const size_t needed = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (!storage || storage.nbytes() < needed) {
    TD_FAIL(ValueError, "make_memmap_from_storage(", key.repr(), "): shape ", shape, " of ", dtype,
            " needs ", needed, " bytes, the storage holds ", storage ? storage.nbytes() : 0);
  }
  at::Tensor view = at::empty({0}, at::TensorOptions().dtype(dtype).device(storage.device()));
  view.set_(storage, 0, shape);
  return make_memmap_from_tensor(td, key, view, true);
}

}  // namespace td
