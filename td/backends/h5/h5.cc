// The entry points of the h5 backend (open, to_h5, from_h5), H5TensorDict, and the "h5" factory.
#include "td/backends/h5/h5.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "td/backends/h5/h5_storage.h"
#include "td/core/dtype.h"
#include "td/core/storage.h"

namespace td::h5 {
namespace {

using internal::Guard;
using internal::H5File;
using internal::H5Storage;
using internal::Hid;
using internal::Lock;

std::string NormalizeGroup(const std::string& group) {
  std::string g = group;
  while (g.size() > 1 && g.back() == '/') g.pop_back();
  if (g.empty() || g == "/") return "/";
  return g.front() == '/' ? g : "/" + g;
}

internal::CreateLayout LayoutOf(const DatasetOptions& o) {
  if (!o.compression().empty() && o.compression() != "gzip") {
    TD_FAIL(ValueError, "td::h5::DatasetOptions: compression '", o.compression(),
            "' is not supported (\"\" or \"gzip\")");
  }
  if (o.compression_level() < 0 || o.compression_level() > 9 || o.chunk_rows() < 0) {
    TD_FAIL(ValueError, "td::h5::DatasetOptions: compression_level ", o.compression_level(),
            " must be in [0, 9] and chunk_rows ", o.chunk_rows(), " >= 0");
  }
  return internal::CreateLayout{o.compression() == "gzip", o.compression_level(), o.chunk_rows()};
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// A new file at `path` (replacing one), named `display` in messages, as a storage.
absl::StatusOr<std::shared_ptr<H5Storage>> Create(const std::string& path,
                                                  const std::vector<int64_t>& batch,
                                                  const internal::CreateLayout& layout,
                                                  const std::string& display) {
  Guard guard(Lock());
  Hid fcpl(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Hid fid(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT));
  if (!fid.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot create HDF5 file '", path, "': ", internal::ErrorText()));
  }
  if (absl::Status s = internal::WriteBatchAttr(fid.get(), "/", batch); !s.ok()) return s;
  auto file = std::shared_ptr<H5File>(new H5File{display, std::move(fid), /*writable=*/true, "/",
                                                 std::make_unique<internal::Node>(), layout});
  file->root->batch = batch;
  return std::make_shared<H5Storage>(file, std::vector<std::string>{}, internal::Selection{}, batch);
}

const H5Storage& StorageOf(const TensorDict& td) {
  return static_cast<const H5Storage&>(td.storage());
}

// The HDF5 path of `key` below the level of `s` ("" : the level itself); KeyError when absent.
std::string PathOf(const H5Storage& s, const NestedKey& key) {
  if (key.size() == 1 && key[0].empty()) return s.file()->Path(s.level(), "");
  Guard guard(Lock());
  std::vector<std::string> level = s.level();
  level.insert(level.end(), key.begin(), key.end() - 1);
  const internal::Node* n = s.file()->Level(level);
  if (n == nullptr || n->child(key.back()) == nullptr) {
    TD_FAIL(KeyError, "key ", key.repr(), " not found in the HDF5 file '", s.file()->filename, "'");
  }
  return s.file()->Path(level, key.back());
}

// Opened by id with StorageSpec::path: a new file there (refusing an existing one); without a
// path, a new file under $TMPDIR that the caller owns.
TD_REGISTER_STORAGE_BACKEND("h5", [](const StorageSpec& spec)
                                      -> absl::StatusOr<std::shared_ptr<Storage>> {
  if (spec.device() && !spec.device()->is_cpu()) {
    return absl::InvalidArgumentError("the h5 backend keeps tensors on the CPU");
  }
  std::string path = spec.path();
  if (path.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/td-h5-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) return absl::UnavailableError("cannot make a temporary file for the h5 backend");
    ::close(fd);
  } else if (Exists(path)) {
    return absl::AlreadyExistsError(absl::StrCat("HDF5 file '", path, "' exists"));
  }
  absl::StatusOr<std::shared_ptr<H5Storage>> s = Create(path, spec.batch_size(), {}, path);
  if (!s.ok()) return s.status();
  return std::shared_ptr<Storage>(*std::move(s));
});

}  // namespace

std::optional<H5TensorDict> H5TensorDict::from(const TensorDict& td) {
  if (dynamic_cast<const H5Storage*>(&td.storage()) == nullptr) return std::nullopt;
  return H5TensorDict(td);
}

const std::string& H5TensorDict::filename() const { return StorageOf(*this).file()->filename; }

std::string H5TensorDict::group() const { return PathOf(StorageOf(*this), ""); }

Mode H5TensorDict::mode() const {
  return StorageOf(*this).file()->writable ? Mode::kReadWrite : Mode::kReadOnly;
}

bool H5TensorDict::is_selection() const { return !StorageOf(*this).selection().empty(); }

nlohmann::json H5TensorDict::attrs(const NestedKey& key) const {
  const H5Storage& s = StorageOf(*this);
  return ValueOrThrow<H5Error>(internal::ReadAttrs(s.file()->fid.get(), PathOf(s, key)),
                               absl::StrCat("HDF5 file '", s.file()->filename, "'"));
}

void H5TensorDict::set_attr(const std::string& name, const nlohmann::json& value,
                            const NestedKey& key) {
  const H5Storage& s = StorageOf(*this);
  if (!s.file()->writable) {
    TD_FAIL(ValueError, "cannot set attribute '", name, "': the HDF5 file '", s.file()->filename,
            "' is open read-only");
  }
  if (name == internal::kMetaAttr || name == internal::kJsonAttr) {
    TD_FAIL(ValueError, "cannot set attribute '", name, "' of the HDF5 file '", s.file()->filename,
            "': the name is reserved for the layout's own metadata (NOTE [ HDF5 layout ])");
  }
  ThrowIfError<H5Error>(internal::WriteAttr(s.file()->fid.get(), PathOf(s, key), name, value),
                        absl::StrCat("HDF5 file '", s.file()->filename, "'"));
}

void H5TensorDict::flush() const {
  const H5Storage& s = StorageOf(*this);
  Guard guard(Lock());
  if (s.file()->writable && H5Fflush(s.file()->fid.get(), H5F_SCOPE_GLOBAL) < 0) {
    TD_FAIL(H5Error, "HDF5 file '", s.file()->filename, "': flush failed: ", internal::ErrorText());
  }
}

H5TensorDict open(const std::string& path, const OpenOptions& options) {
  const std::optional<std::vector<int64_t>>& given = options.batch_size();
  if (given && std::any_of(given->begin(), given->end(), [](int64_t d) { return d < 0; })) {
    TD_FAIL(ValueError, "td::h5::open: batch size ", SizeRepr(*given), " has a negative dim");
  }
  const internal::CreateLayout layout = LayoutOf(options.datasets());
  if (!Exists(path)) TD_FAIL(H5Error, "HDF5 file '", path, "' does not exist");
  const bool rw = options.mode() == Mode::kReadWrite;
  auto file = std::shared_ptr<H5File>(
      new H5File{path, Hid(), rw, NormalizeGroup(options.group()), nullptr, layout});
  {
    Guard guard(Lock());
    file->fid = Hid(H5Fopen(path.c_str(), rw ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file->fid.ok()) {
      TD_FAIL(H5Error, "cannot open HDF5 file '", path, "' (", rw ? "read-write" : "read-only",
              "): ", internal::ErrorText());
    }
  }
  file->root = ValueOrThrow<H5Error>(
      internal::Walk(file->fid.get(), path, file->root_path, options.batch_size()));
  return *H5TensorDict::from(TensorDict(std::make_shared<H5Storage>(
      file, std::vector<std::string>{}, internal::Selection{}, file->root->batch)));
}

H5TensorDict to_h5(const TensorDict& td, const std::string& path, const ToH5Options& options) {
  const internal::CreateLayout layout = LayoutOf(options.datasets());
  if (!options.overwrite() && Exists(path)) {
    TD_FAIL(H5Error, "HDF5 file '", path, "' exists (td::h5::ToH5Options().overwrite(true) replaces it)");
  }
  // Written under a temporary name beside `path`, renamed over it once complete: a failure
  // part-way (a dtype HDF5 cannot hold, a full disk) leaves the previous file whole.
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path target(path);
  const std::string temp =
      (target.parent_path() /
       absl::StrCat(".td-h5-tmp.", target.filename().string(), ".", ::getpid(), ".", counter++))
          .string();
  std::shared_ptr<H5Storage> root =
      ValueOrThrow<H5Error>(Create(temp, td.batch_size().vec(), layout, path));
  try {
    td.for_each_entry([&](const std::string& k, const Value& v) { root->set(k, v); });
    root.reset();  // flushes and closes the file (~H5File)
  } catch (...) {
    root.reset();
    std::remove(temp.c_str());
    throw;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temp.c_str());
    TD_FAIL(H5Error, "HDF5 file '", path, "': cannot rename the written file into place: ",
            std::strerror(err));
  }
  return open(path, OpenOptions().mode(Mode::kReadWrite).datasets(options.datasets()));
}

TensorDict from_h5(const std::string& path, const OpenOptions& options) {
  return open(path, options).to_dense();
}

}  // namespace td::h5
