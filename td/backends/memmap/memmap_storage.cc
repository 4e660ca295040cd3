#include "td/backends/memmap/memmap_storage.h"

#include <ATen/ATen.h>
#include <errno.h>

#include <cstdlib>

#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/core/errors.h"
#include "td/core/internal/storage_access.h"

namespace td {

using internal::memmap::KindOf;

// ---- MemmapStorage -------------------------------------------------------------------------

MemmapStorage::MemmapStorage(std::string dir, std::vector<int64_t> batch_size, MemmapMode mode,
                             bool root)
    : EntryStorage(std::move(batch_size), at::Device(at::kCPU)),
      dir_(std::move(dir)),
      mode_(mode),
      root_(root) {}

Capabilities MemmapStorage::capabilities() const {
  // Read-only: no write reaches the files; the batch size changes in memory only.
  if (mode_ == MemmapMode::kReadOnly) return Capability::kBatchResize;
  return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
         Capability::kBatchResize | Capability::kCrossProcess;
}

size_t MemmapStorage::AddLoaded(std::string key, Value value) {
  return entries().set(key, std::move(value));
}

void MemmapStorage::SetLoaded(size_t index, Value value) {
  entries().value(index) = std::move(value);
}

void MemmapStorage::AddField(std::string key, Value value, std::string meta_path) {
  entries().set(key, std::move(value));
  fields_.emplace(std::move(key), std::move(meta_path));
}

void MemmapStorage::RequireNotField(std::string_view what, std::string_view key) const {
  auto it = fields_.find(absl::string_view(key.data(), key.size()));
  if (it == fields_.end()) return;
  TD_FAIL(ValueError, "cannot ", what, " key ", NestedKey(key).repr(), ": it is a field of a ",
                   "tensorclass, stored in ", it->second, ", which this TensorDict does not ",
                   "rewrite");
}

void MemmapStorage::SetFileName(const std::string& key, std::string name) {
  file_names_[key] = std::move(name);
}

std::vector<std::string> MemmapStorage::FilesOf(const std::string& key, const Value& v) const {
  auto it = file_names_.find(key);
  const std::string name =
      it != file_names_.end() ? it->second : internal::memmap::EntryFileName(key, KindOf(v));
  if (name.empty()) return {};  // a zero-element tensor without a file
  if (v.is_tensor() && v.tensor().is_nested()) {
    return {name, internal::memmap::NestedShapeFileName(name)};
  }
  return {name};
}

bool MemmapStorage::IsField(const std::string& key) const { return fields_.contains(key); }

void MemmapStorage::RequireWritable(std::string_view what, std::string_view key) const {
  if (mode_ == MemmapMode::kReadOnly) {
    TD_FAIL(ValueError, "cannot ", what, " key ", NestedKey(key).repr(), ": the memmap TensorDict at ",
                     dir_, " was opened read-only (MemmapMode::kReadOnly)");
  }
}

TD_REGISTER_STORAGE_BACKEND("memmap", [](const StorageSpec& spec)
                                          -> absl::StatusOr<std::shared_ptr<Storage>> {
  std::string path = spec.path();
  if (path.empty()) {
    // No directory given: a new one under $TMPDIR (the caller owns it).
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/td-memmap-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return internal::memmap::ErrnoError(errno, "cannot create a directory like", templ);
    }
    path = templ + "/td";
  }
  try {
    TensorDict empty({}, spec.batch_size());
    TensorDict out = empty.memmap(path, MemmapOptions().exists_ok(false));
    out.unlock_();
    return internal::MutableStoragePtr(out);
  } catch (const ValueError& e) {
    return absl::InvalidArgumentError(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    return absl::DataLossError(e.what_without_backtrace());
  }
});

}  // namespace td
