#include "td/backends/memmap/archive/archive.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "td/backends/memmap/archive_hook.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/store.h"
#include "td/bytes/codec.h"
#include "td/bytes/zip.h"
#include "td/core/errors.h"
#include "td/format/format.h"
#include "td/os/files.h"

namespace td {
namespace {

namespace fs = std::filesystem;
namespace mm = internal::memmap;
namespace os = internal::os;
namespace zip = internal::zip;
namespace codec = internal::codec;
using internal::os::JoinPath;
using zip::ZipEntry;

const std::string kMeta(mm::kMetaFile);
constexpr size_t kChunk = size_t{16} << 20;

// The entries of `path` when it is a memmap archive, else why it is not.
absl::StatusOr<std::map<std::string, ZipEntry>> ArchiveEntries(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return absl::NotFoundError(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError("not a regular file");
  auto entries = zip::ReadZipDirectory(path);
  if (entries.ok() && entries->count(kMeta) == 0) {
    return absl::InvalidArgumentError("no top-level meta.json");
  }
  return entries;
}

// A memmap archive's entries and the directories they imply.
struct Tree {
  std::string path;
  std::map<std::string, ZipEntry> entries;
  std::map<std::string, std::set<std::string>> children;  // dir ("" = root) -> names

  // The archive `path`; `Error` naming `caller` when it is not one (ArchiveEntries).
  template <class Error>
  static Tree Open(const std::string& path, const char* caller) {
    absl::StatusOr<std::map<std::string, ZipEntry>> entries = ArchiveEntries(path);
    if (!entries.ok()) {
      TD_FAIL(Error, caller, ": ", path,
              " is not a memmap archive (a zip file with a top-level meta.json entry): ",
              entries.status().message());
    }
    return Tree(path, *std::move(entries));
  }
  Tree(const std::string& p, std::map<std::string, ZipEntry> e) : path(p), entries(std::move(e)) {
    for (const auto& [name, entry] : entries) {
      // Each part of the name, under its directory; none may leave the extraction directory.
      bool ok = name.find_first_of(std::string("\\\0", 2)) == std::string::npos;
      for (size_t start = 0, slash = 0; ok && slash != std::string::npos; start = slash + 1) {
        slash = name.find('/', start);
        const std::string part = name.substr(start, slash - start);
        ok = !part.empty() && part != "." && part != "..";
        children[start == 0 ? "" : name.substr(0, start - 1)].insert(part);
      }
      if (!ok) {
        TD_FAIL(MemmapError, path, ": entry name '", name,
                "' is not a relative path inside the archive (empty, absolute, '.', '..' or '\\')");
      }
    }
    for (const auto& [d, names] : children) {
      if (entries.count(d)) {
        TD_FAIL(MemmapError, path, ": '", d, "' is both a file and a directory");
      }
    }
  }
  bool IsDir(const std::string& name) const { return children.count(name) != 0; }
  std::string Display(const std::string& name) const { return path + "::" + name; }
  // The entry `name`; MemmapError naming it unless stored (0) or deflated (8).
  const ZipEntry& Readable(const std::string& name) const {
    const ZipEntry& e = entries.at(name);
    if (e.method != 0 && e.method != 8) {
      TD_FAIL(MemmapError, Display(name), " is compressed with zip method ", e.method,
              e.method == 12   ? " (bzip2)"
              : e.method == 14 ? " (lzma)"
                               : "",
              ", which is not read: only stored and deflated (method 8) entries are; write the "
              "archive without compression or with compression=\"deflate\"");
    }
    return e;
  }
};

// `n` bytes of the archive `fd` at `offset`; MemmapError "<failed>: ..." on an error or short read.
void ReadPayload(int fd, void* out, size_t n, uint64_t offset, const std::string& path,
                 const std::string& failed) {
  absl::StatusOr<size_t> got = os::ReadAll(fd, out, n, path, static_cast<int64_t>(offset));
  if (ValueOrThrow<MemmapError>(std::move(got), failed) < n) {
    TD_FAIL(MemmapError, failed, ": ", path, " ends first (it changed while being read)");
  }
}

// Streams the payload of `e` to `sink` in kChunk pieces, inflated when deflated (NOTE [ Bounded
// decompression ] in td/bytes/codec.h); returns its CRC-32. Errors: MemmapError "<failed>: ...".
uint32_t StreamEntry(int fd, const ZipEntry& e, const std::string& path, const std::string& failed,
                     const codec::Sink& sink) {
  uint32_t crc = 0;
  uint64_t done = 0;
  const uint64_t stored = e.method == 0 ? e.size : e.compressed_size;
  std::vector<uint8_t> buf(std::min<uint64_t>(kChunk, std::max<uint64_t>(stored, 1)));
  const codec::Source source = [&](uint8_t* to, size_t cap) -> absl::StatusOr<size_t> {
    const size_t n = static_cast<size_t>(std::min<uint64_t>({cap, buf.size(), stored - done}));
    ReadPayload(fd, to, n, e.payload_offset + done, path, failed);
    done += n;
    return n;
  };
  const codec::Sink crc_sink = [&](const uint8_t* data, size_t n) {
    crc = codec::Crc32(crc, data, n);
    return sink(data, n);
  };
  if (e.method != 0) {
    const absl::Status s =
        codec::InflateStream(codec::Format::kRawDeflate, source, crc_sink, e.size);
    if (!s.ok()) {
      TD_FAIL(MemmapError, failed, " (deflated, ", e.compressed_size, " bytes declaring ", e.size,
              "): ", s.message());
    }
  }
  while (e.method == 0 && done < e.size) {
    const size_t n = *source(buf.data(), buf.size());
    ThrowIfError<MemmapError>(crc_sink(buf.data(), n), failed);
  }
  return crc;
}

// A temporary name beside `target` (same file system) that the memmap loader and pack_memmap
// skip: `kind` "" for the archive's file, "stage." for save_archive's staging directory.
std::string TempBeside(const fs::path& target, const char* kind) {
  static std::atomic<uint64_t> counter{0};
  const std::string name =
      c10::str(mm::kTempPrefix, kind, target.filename().string(), ".", ::getpid(), ".", counter++);
  return (target.parent_path() / name).string();
}

// Appends the files of the directory `dir` (entry names under `rel`) in the archive's order.
void PackDir(const std::string& dir, const std::string& rel, int depth,
             std::vector<zip::ZipSource>* files) {
  if (depth > kMaxNestingDepth) {
    TD_FAIL(MemmapError, dir, ": directories nested more than ", kMaxNestingDepth, " deep");
  }
  const os::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot list", dir));
  // By name, meta.json first.
  std::vector<os::DirEntry> entries = ValueOrThrow<MemmapError>(os::ListDir(fd.get(), dir));
  std::stable_partition(entries.begin(), entries.end(),
                        [](const os::DirEntry& e) { return e.name == kMeta; });
  std::vector<std::string> subdirs;
  for (const auto& [name, type] : entries) {
    if (mm::IsTempName(name)) continue;
    if (type == os::EntryType::kDirectory) {
      subdirs.push_back(name);
      continue;
    }
    const std::string path = JoinPath(dir, name);
    if (type == os::EntryType::kSymlink) {
      TD_FAIL(MemmapError, "cannot pack ", path,
              ": it is a symlink (a memmap directory holds none)");
    }
    if (type != os::EntryType::kFile) {
      TD_FAIL(MemmapError, "cannot pack ", path, ": not a file or a directory");
    }
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) TD_FAIL(MemmapError, "cannot stat ", path, ": ", ec.message());
    const bool align = name.size() > mm::kTensorSuffix.size() &&
                       name.compare(name.size() - mm::kTensorSuffix.size(),
                                    mm::kTensorSuffix.size(), mm::kTensorSuffix) == 0;
    files->push_back({JoinPath(rel, name), path, size, align});
  }
  for (const std::string& d : subdirs) {
    PackDir(JoinPath(dir, d), JoinPath(rel, d), depth + 1, files);
  }
}

// The archive's entries as a memmap tree (NOTE [ Memmap byte stores ] in
// td/backends/memmap/store.h) over one mapping of the file (NOTE [ Memmap archive format ]).
class ZipStore final : public mm::Store {
 public:
  ZipStore(const Tree& tree, MemmapMode mode) : tree_(tree) {
    std::error_code ec;
    const auto size = static_cast<int64_t>(fs::file_size(tree.path, ec));
    if (ec) TD_FAIL(MemmapError, "cannot stat ", tree.path, ": ", ec.message());
    base_ = MemoryMappedTensor::from_filename(tree.path, at::kByte, {size}, mode);
  }

  absl::StatusOr<std::vector<os::DirEntry>> List(const Dir& dir,
                                                const std::string& /*path*/) const override {
    std::vector<os::DirEntry> out;
    auto it = tree_.children.find(dir.prefix);
    if (it == tree_.children.end()) return out;
    for (const std::string& name : it->second) {
      out.push_back({name, tree_.IsDir(JoinPath(dir.prefix, name)) ? os::EntryType::kDirectory
                                                                   : os::EntryType::kFile});
    }
    return out;
  }

  absl::StatusOr<Dir> Open(const Dir& dir, const std::string& name,
                           const std::string& /*path*/) const override {
    const std::string full = JoinPath(dir.prefix, name);
    if (!tree_.IsDir(full)) {
      return absl::NotFoundError(absl::StrCat(tree_.Display(full), " is not a directory"));
    }
    return Dir{nullptr, full};
  }

  absl::StatusOr<std::string> Read(const Dir& dir, const std::string& name, size_t max_bytes,
                                   const std::string& /*path*/) const override {
    const std::string full = JoinPath(dir.prefix, name);
    if (!tree_.entries.count(full)) {
      return absl::NotFoundError(absl::StrCat(tree_.Display(full), ": no such entry"));
    }
    return Guarded([&] {
      const ZipEntry& e = tree_.Readable(full);
      if (e.size > max_bytes) {
        TD_FAIL(MemmapError, tree_.Display(full), " is larger than ", max_bytes, " bytes");
      }
      std::string text(static_cast<size_t>(e.size), '\0');
      Extract(full, e, reinterpret_cast<uint8_t*>(text.data()));
      return text;
    });
  }

  absl::StatusOr<at::Tensor> Map(const Dir& dir, const std::string& name,
                                 const std::string& /*path*/, const std::string& key,
                                 c10::ScalarType dtype, const std::vector<int64_t>& shape,
                                 int64_t nbytes, MemmapMode mode) const override {
    const std::string full = JoinPath(dir.prefix, name);
    return Guarded([&] {
      const ZipEntry& e = tree_.Readable(full);
      if (static_cast<int64_t>(e.size) != nbytes) {
        TD_FAIL(MemmapError, tree_.Display(full), ": key ", key, " of shape ",
                c10::IntArrayRef(shape), " and dtype ", dtype, " needs ", nbytes,
                " bytes, the entry holds ", e.size);
      }
      if (e.method != 0) {
        // Deflated (NOTE [ Memmap archive format ]): no write could reach the file.
        if (mode == MemmapMode::kReadWrite) {
          TD_FAIL(MemmapError, tree_.Display(full), ": the data of key ", key,
                  " is compressed (deflate), so it is inflated into memory and writes could not "
                  "reach the file: load it read-only, or save the archive without compression");
        }
        at::Tensor owned = at::empty({nbytes}, at::kByte);
        Extract(full, e, owned.data_ptr<uint8_t>());
        return owned.view(dtype).view(shape);
      }
      CheckMapped(full, e);
      at::Tensor flat = base_.narrow(0, static_cast<int64_t>(e.payload_offset), nbytes);
      if (e.payload_offset % c10::elementSize(dtype) != 0) {
        if (mode == MemmapMode::kReadWrite) {
          TD_FAIL(MemmapError, tree_.Display(full), ": the data of key ", key,
                  " is not aligned for ", dtype, " (the archive was written by another zip "
                  "tool), so it is copied and writes could not reach the file: load it "
                  "read-only");
        }
        flat = flat.clone();
      }
      return flat.view(dtype).view(shape);
    });
  }

  bool memmap_levels() const override { return false; }

 private:
  // fn()'s value, or its MemmapError as a status (the loader's errors are statuses).
  template <class F>
  static auto Guarded(F&& fn) -> absl::StatusOr<decltype(fn())> {
    try {
      return fn();
    } catch (const MemmapError& err) {
      return absl::DataLossError(err.what_without_backtrace());
    }
  }

  // MemmapError naming the entry unless its bytes lie inside the mapping (the file may have
  // shrunk since ReadZipDirectory checked them).
  void CheckMapped(const std::string& name, const ZipEntry& e) const {
    const uint64_t mapped = static_cast<uint64_t>(base_.numel());
    const uint64_t n = e.method == 0 ? e.size : e.compressed_size;
    if (e.payload_offset > mapped || n > mapped - e.payload_offset) {
      TD_FAIL(MemmapError, tree_.Display(name), ": its ", n, " bytes at byte ",
              e.payload_offset, " lie outside the archive's ", mapped,
              " bytes (the file changed while it was being loaded)");
    }
  }

  // The e.size bytes of the entry `name` into `out` (allocated by the caller): copied, or
  // inflated and CRC-checked (NOTE [ Bounded decompression ] in td/bytes/codec.h).
  void Extract(const std::string& name, const ZipEntry& e, uint8_t* out) const {
    CheckMapped(name, e);
    const uint8_t* payload = static_cast<const uint8_t*>(base_.data_ptr()) + e.payload_offset;
    const size_t n = static_cast<size_t>(e.size);
    if (e.method == 0) {
      std::memcpy(out, payload, n);
      return;
    }
    const absl::Status s = codec::Decompress(codec::Format::kRawDeflate, payload,
                                             static_cast<size_t>(e.compressed_size), out, n);
    if (!s.ok()) {
      TD_FAIL(MemmapError, tree_.Display(name), " (deflated, ", e.compressed_size,
              " bytes declaring ", e.size, "): ", s.message());
    }
    if (codec::Crc32(0, out, n) != e.crc) {
      TD_FAIL(MemmapError, tree_.Display(name),
              ": CRC-32 mismatch after inflating (the entry is corrupt)");
    }
  }

  const Tree& tree_;
  at::Tensor base_;
};

}  // namespace

bool is_memmap_archive(const std::string& path) { return ArchiveEntries(path).ok(); }

std::string pack_memmap(const std::string& prefix, const std::string& archive_path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(prefix) / kMeta, ec)) {
    TD_FAIL(ValueError, "pack_memmap: ", prefix,
            " does not look like a memmap directory (no meta.json found)");
  }
  if (fs::is_directory(archive_path, ec)) {
    TD_FAIL(ValueError, "pack_memmap: cannot write an archive at ", archive_path,
            ": it is an existing directory");
  }
  const std::string tmp = TempBeside(archive_path, "");
  ThrowIfError<MemmapError>(
      os::ReplaceFileAt(AT_FDCWD, archive_path, tmp, archive_path, /*sync=*/false, [&](int fd) {
        std::vector<zip::ZipSource> files;
        PackDir(prefix, "", 0, &files);
        return zip::WriteZip(fd, tmp, files);
      }));
  return archive_path;
}

std::string unpack_memmap(const std::string& archive_path, const std::string& prefix) {
  const Tree tree = Tree::Open<ValueError>(archive_path, "unpack_memmap");
  const os::UniqueFd in(::open(archive_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot open", archive_path));
  std::error_code ec;
  fs::create_directories(prefix, ec);
  if (ec) TD_FAIL(MemmapError, "cannot create ", prefix, ": ", ec.message());
  for (const auto& [d, names] : tree.children) {
    if (d.empty()) continue;
    const fs::path p = fs::path(prefix) / d;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (fs::is_symlink(st)) TD_FAIL(MemmapError, "unpack_memmap: ", p.string(), " is a symlink");
    if (!fs::exists(st)) {
      fs::create_directory(p, ec);
      if (ec) TD_FAIL(MemmapError, "cannot create ", p.string(), ": ", ec.message());
    } else if (!fs::is_directory(st)) {
      TD_FAIL(MemmapError, "unpack_memmap: ", p.string(), " exists and is not a directory");
    }
  }
  for (const auto& [name, entry] : tree.entries) {
    const ZipEntry& e = tree.Readable(name);
    const std::string out_path = (fs::path(prefix) / name).string();
    os::UniqueFd out(::open(out_path.c_str(),
                            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out.valid()) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot create", out_path));
    const std::string failed = c10::str("cannot extract ", tree.Display(name), " to ", out_path);
    const uint32_t crc = StreamEntry(
        in.get(), e, archive_path, failed,
        [&](const uint8_t* data, size_t n) { return os::WriteAll(out.get(), data, n, out_path); });
    ThrowIfError<MemmapError>(out.Close(out_path), failed);
    if (crc != e.crc) {
      TD_FAIL(MemmapError, tree.Display(name), ": CRC-32 mismatch (the data was changed in place; "
              "refresh_archive_checksums fixes the archive)");
    }
  }
  return prefix;
}

std::string refresh_archive_checksums(const std::string& archive_path) {
  const Tree tree = Tree::Open<ValueError>(archive_path, "refresh_archive_checksums");
  os::UniqueFd fd(::open(archive_path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot open", archive_path));
  for (const auto& [name, e] : tree.entries) {
    if (e.method != 0) continue;  // compressed payloads cannot have been written in place
    const std::string failed = "cannot refresh the checksum of " + tree.Display(name);
    const uint32_t crc = StreamEntry(fd.get(), e, archive_path, failed,
                                     [](const uint8_t*, size_t) { return absl::OkStatus(); });
    unsigned char le[4];
    for (int i = 0; i < 4; ++i) le[i] = static_cast<unsigned char>(crc >> (8 * i));
    uint64_t local = e.header_offset + 14;
    if (e.descriptor) {
      // The CRC follows the payload, after an optional "PK\7\8" signature.
      local = e.payload_offset + e.compressed_size;
      unsigned char sig[4] = {0, 0, 0, 0};
      ReadPayload(fd.get(), sig, 4, local, archive_path, failed);
      if (sig[0] == 'P' && sig[1] == 'K' && sig[2] == 7 && sig[3] == 8) local += 4;
    }
    for (const uint64_t at : {local, e.central_offset + 16}) {
      ThrowIfError<MemmapError>(
          os::WriteAll(fd.get(), le, 4, archive_path, static_cast<int64_t>(at)), failed);
    }
  }
  ThrowIfError<MemmapError>(fd.Close(archive_path));
  return archive_path;
}

namespace {

// load_archive, naming `caller` in its errors: `Error` when `archive_path` is not an archive,
// `MissingSub` for a missing sub_path.
template <class Error, class MissingSub>
TensorDict LoadArchive(const std::string& archive_path, MemmapMode mode,
                       const std::optional<NestedKey>& sub_path, const char* caller) {
  const Tree tree = Tree::Open<Error>(archive_path, caller);
  std::string root;
  if (sub_path) {
    for (const std::string& part : *sub_path) {
      const std::string escaped = JoinPath(root, mm::EscapeKey(part));
      const std::string raw = JoinPath(root, part);
      if (tree.IsDir(escaped)) {
        root = escaped;
      } else if (tree.IsDir(raw)) {
        root = raw;
      } else {
        TD_FAIL(MissingSub, caller, ": sub_path ", sub_path->repr(), " is not in ", archive_path,
                " (no directory ", escaped, ")");
      }
    }
  }
  const ZipStore store(tree, mode);
  return ValueOrThrow<MemmapError>(mm::LoadTree(store, mm::Store::Dir{nullptr, root},
                                                tree.Display(root), mode, {}));
}

// TensorDict::load_memmap of a file (NOTE [ load_memmap of an archive ] in
// td/backends/memmap/archive_hook.h): always copy-on-write, as upstream's "r" (options.mode()'s
// default kReadWrite cannot be told from an explicit one); a missing sub_path is a MemmapError.
TensorDict LoadMemmapArchive(const std::string& path, const LoadMemmapOptions& options) {
  return LoadArchive<ValueError, MemmapError>(path, MemmapMode::kReadOnly, options.sub_path(),
                                              "load_memmap");
}

// Fills the slot from this alwayslink library (//td/backends/memmap/archive).
const bool kLoadMemmapArchiveRegistered =
    internal::memmap::load_memmap_archive.Register(&LoadMemmapArchive);

}  // namespace

TensorDict load_archive(const std::string& archive_path, const ArchiveLoadOptions& options) {
  return LoadArchive<MemmapError, KeyError>(archive_path, options.mode(), options.sub_path(),
                                            "load_archive");
}

TensorDict save_archive(const TensorDict& td, const std::string& archive_path,
                        const MemmapOptions& options) {
  std::error_code ec;
  if (fs::is_directory(archive_path, ec)) {
    TD_FAIL(ValueError, "save: cannot write an archive at ", archive_path, ": it is a directory");
  }
  if (const auto* m = dynamic_cast<const MemmapStorage*>(&td.storage()); m != nullptr) {
    pack_memmap(m->path(), archive_path);
    return load_archive(archive_path);
  }
  // The staging only feeds the archive: mapped leaves are copied whatever copy_existing says,
  // as upstream 0.14's _write_archive_from_td does (it never refuses one either).
  const std::string staging = TempBeside(fs::absolute(archive_path), "stage.");
  {
    const absl::Cleanup remove_staging = [&] { fs::remove_all(staging, ec); };
    td.memmap(staging, MemmapOptions(options).copy_existing(true));
    pack_memmap(staging, archive_path);
  }
  return load_archive(archive_path);
}

namespace {

format::Driver ArchiveDriver() {
  format::Driver d;
  d.id = "tdz";
  d.summary = "a memmap archive: a memmap directory as one zip file (Python tensordict 0.14's "
              "save(..., archive=True) / pack_memmap)";
  d.suffixes = {".tdz"};
  d.traits.dtypes = format::EveryDtype();
  d.detect = is_memmap_archive;
  d.save = [](const TensorDict& td, const std::string& path) { save_archive(td, path); };
  d.load = [](const std::string& path) { return load_archive(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(ArchiveDriver());

}  // namespace

}  // namespace td
