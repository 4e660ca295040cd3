// Memmap archives (".tdz"): a memmap directory as ONE zip file, Python tensordict's
// `pack_memmap` / `unpack_memmap` / `is_memmap_archive` / `refresh_archive_checksums` and the
// archive mode of `save` / `memmap` / `load_memmap` (tensordict/_archive.py in 0.14), so archives
// go both ways between Python and C++.
//
//   td.memmap("/ckpt/run1");
//   td::pack_memmap("/ckpt/run1", "/ckpt/run1.tdz");           // one file, Python loads it
//   td::TensorDict back = td::load_archive("/ckpt/run1.tdz");   // every leaf a view of one mapping
//   td::unpack_memmap("/ckpt/run1.tdz", "/ckpt/copy");         // a memmap directory again
//
// NOTE [ Memmap archive format ]
// A standard zip file whose entries are the files of a memmap directory (NOTE [ Memmap directory
// format ] in td/backends/memmap/format.h) under their relative paths ("meta.json",
// "next/obs.memmap", ...), so `unzip` gives a directory load_memmap opens and `zip -0 -r` over
// a directory gives an archive. What upstream writes and this library writes:
//  * entries in a fixed order: at each level its meta.json, then its other files by name, then
//    its sub-directories by name, recursively; no directory entries.
//  * every entry STORED; a `.memmap` payload starts at a multiple of 64 bytes of the file: its
//    local header carries an extra block with id 0x6474 ("td") of the padding, then a zip64
//    extra block (local 32-bit sizes 0xFFFFFFFF), as Python's zipfile with force_zip64=True.
//  * the central directory's zip64 extra blocks, and the zip64 end record and locator, only
//    where a value does not fit in 32 bits; CRC-32s are those of the payloads as written.
// Reading accepts any zip whose entries are STORED (aligned or not, zip64 or not; directory
// entries skipped) or deflated (method 8: upstream's `save(..., compression="deflate")`, no
// zero-copy). A deflated leaf is inflated into memory of its own and CRC-checked (NOTE [ Bounded
// decompression ] in td/bytes/codec.h); with MemmapMode::kReadWrite it is a MemmapError, as
// upstream's mode="r+" (writes could not reach the file). Other methods (bzip2, lzma),
// encrypted entries, payloads outside the file and names leaving the directory ("..",
// absolute) are MemmapErrors naming the entry. load_archive maps the file once, private and
// copy-on-write (upstream's default mode "r"); aligned stored leaves are views into that
// mapping, unaligned ones copies.
// TensorDict::load_memmap of a file loads it through load_archive too, when this library is
// linked (NOTE [ load_memmap of an archive ] in td/backends/memmap/archive_hook.h).
// Bazel: //td/backends/memmap/archive (alwayslink; //td/io includes it).
#pragma once

#include <torch/arg.h>

#include <optional>
#include <string>

#include "td/core/tensordict.h"

namespace td {

// True when `path` is a file holding a zip archive with a top-level "meta.json" entry (the mark
// of a memmap archive); false otherwise, never throwing (a malformed file is not an archive).
bool is_memmap_archive(const std::string& path);

// Packs the memmap directory `prefix` (from memmap() or Python) into the archive `archive_path`
// (NOTE [ Memmap archive format ]), atomically replaced. Returns `archive_path`. Throws
// ValueError when `prefix` has no meta.json, MemmapError naming the file on I/O failure or a
// symlink in the directory.
std::string pack_memmap(const std::string& prefix, const std::string& archive_path);

// Extracts the archive into the directory `prefix` (created if missing; files of the same names
// replaced), the inverse of pack_memmap. Returns `prefix`. Throws ValueError when
// `archive_path` is not a memmap archive, MemmapError naming an entry that cannot be extracted
// (bzip2 / lzma, corrupt deflate stream or CRC-32, outside the file, a name leaving `prefix`).
std::string unpack_memmap(const std::string& archive_path, const std::string& prefix);

// Recomputes every entry's CRC-32 (local headers and central directory) after payloads were
// changed in place, so that unzip, Python's zipfile and unpack_memmap accept the archive again.
// Returns `archive_path`. Throws ValueError when it is not a memmap archive, MemmapError naming
// the entry for a corrupt header.
std::string refresh_archive_checksums(const std::string& archive_path);

// Writes `td` as the archive `archive_path` and returns it loaded (load_archive), as Python
// tensordict 0.14's save(td, path, archive=True): a memmap-backed TensorDict is packed from its
// directory, another staged beside it first (`options` as TensorDict::memmap's). Throws
// ValueError when `archive_path` is a directory, and as TensorDict::memmap and pack_memmap do.
TensorDict save_archive(const TensorDict& td, const std::string& archive_path,
                        const MemmapOptions& options = {});

// Options of load_archive.
struct ArchiveLoadOptions {
  // kReadOnly (upstream's default mode "r"): the mapping is private and copy-on-write, writes
  // to the leaves stay in this process. kReadWrite (upstream's "r+"): writes reach the file
  // (then refresh_archive_checksums before handing it to a tool that checks CRCs).
  TORCH_ARG(MemmapMode, mode) = MemmapMode::kReadOnly;
  // Load the sub-TensorDict at this key only.
  TORCH_ARG(std::optional<NestedKey>, sub_path) = std::nullopt;
};

// Loads a memmap archive as a TensorDict on the CPU ("dense" backend, locked like load_memmap's
// result), leaves viewing one mapping (NOTE [ Memmap archive format ]), through load_memmap's
// own loader (NOTE [ Memmap byte stores ] in td/backends/memmap/store.h): what a directory
// loads or refuses, its archive loads or refuses. Throws MemmapError naming the archive, the
// entry ("run.tdz::next/meta.json") and the problem, KeyError for a missing sub_path.
//   td::TensorDict params = td::load_archive("/ckpt/run1.tdz",
//                                            td::ArchiveLoadOptions().sub_path("params"));
TensorDict load_archive(const std::string& archive_path, const ArchiveLoadOptions& options = {});

}  // namespace td
