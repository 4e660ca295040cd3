// Memmap archives (".tdz"): a memmap directory as ONE zip file, Python tensordict's
// `pack_memmap` / `unpack_memmap` / `is_memmap_archive` / `refresh_archive_checksums` and the
// archive mode of `save` / `memmap` / `load_memmap` (tensordict/_archive.py in 0.14), so archives
// go both ways between Python and C++.
//
//   td.memmap("/ckpt/run1");
//   td::pack_memmap("/ckpt/run1", "/ckpt/run1.tdz");            // one file, Python loads it
//   td::TensorDict back = td::load_archive("/ckpt/run1.tdz");    // every leaf a view of one mapping
//   td::unpack_memmap("/ckpt/run1.tdz", "/ckpt/copy");          // a memmap directory again
//
// NOTE [ Memmap archive format ]
// A standard zip file whose entries are the files of a memmap directory (NOTE [ Memmap directory
// format ] in td/backends/memmap/format.h) under their relative paths ("meta.json",
// "obs.memmap", "next/meta.json", ...), so `unzip` gives a directory load_memmap opens and
// `zip -0 -r` over a directory gives an archive. What upstream writes and this library writes:
//  * entries in a fixed order: at each level its meta.json, then its other files by name, then
//    its sub-directories by name, recursively; no directory entries.
//  * every entry STORED (method 0, uncompressed); a `.memmap` payload starts at a multiple of
//    64 bytes of the file: its local header carries an extra block with id 0x6474 ("td") of
//    the padding length, followed by a zip64 extra block (the local header's 32-bit sizes are
//    0xFFFFFFFF), which is what Python's zipfile writes with force_zip64=True.
//  * the central directory carries a zip64 extra block when a size or offset does not fit in
//    32 bits, and a zip64 end record and locator when the entries, the directory's size or its
//    offset do not; CRC-32 checksums are those of the payloads as written.
// Reading accepts any zip whose entries are STORED (aligned or not, zip64 or not; directory
// entries are skipped) or deflated (method 8: upstream's `save(..., compression="deflate")`,
// which deflates the `.memmap` entries and gives up zero-copy loading). A deflated leaf is
// inflated into memory of its own, exactly its declared size, after that size was checked
// against what meta.json's shape and dtype need, and its CRC-32 is checked (NOTE [ Bounded
// decompression ] in td/bytes/codec.h); loading it with MemmapMode::kReadWrite is a MemmapError
// naming it (writes could not reach the file; upstream's mode="r+" refuses the same), while
// TensorDict::load_memmap of the archive, always copy-on-write, inflates it like load_archive's
// default. unpack_memmap streams deflated entries through inflate. bzip2 (12) and lzma (14)
// entries are refused with a MemmapError naming the entry and the method, as are encrypted
// entries, entries whose payload lies outside the file, and names that leave the directory
// ("..", absolute paths). load_archive maps the file once, private and copy-on-write (writes to
// the leaves stay in this process, as upstream's default mode "r"), and every aligned stored
// leaf is a view into that mapping; an unaligned one is copied. Writing (pack_memmap, save)
// stores every entry uncompressed.
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
// of a memmap archive); false for directories, missing files and other files. Never throws for
// an unreadable or malformed file (it is then not an archive).
bool is_memmap_archive(const std::string& path);

// Packs the memmap directory `prefix` (written by memmap() or by Python) into the archive
// `archive_path` (NOTE [ Memmap archive format ]), written under a temporary name and renamed
// into place. Returns `archive_path`. Throws ValueError when `prefix` has no meta.json (naming
// it), MemmapError on I/O failure or a symlink in the directory (naming the file).
std::string pack_memmap(const std::string& prefix, const std::string& archive_path);

// Extracts the archive into the directory `prefix` (created if missing; files already there
// with the archive's names are replaced), the inverse of pack_memmap. Returns `prefix`. Throws
// ValueError when `archive_path` is not a memmap archive, MemmapError for an entry that cannot
// be extracted (bzip2 / lzma, a corrupt deflate stream or CRC-32, outside the file, a name
// leaving `prefix`), each naming the entry.
std::string unpack_memmap(const std::string& archive_path, const std::string& prefix);

// Recomputes the CRC-32 of every entry (in the local headers and the central directory) after
// the payloads were changed in place, so that tools that check them (unzip, Python's zipfile,
// unpack_memmap) accept the archive again. Returns `archive_path`. Throws ValueError when it is
// not a memmap archive, MemmapError naming the entry for a corrupt header.
std::string refresh_archive_checksums(const std::string& archive_path);

// Writes `td` as the archive `archive_path` and returns it loaded (load_archive): save()'s archive
// mode, Python tensordict 0.14's save(td, path, archive=True). A TensorDict on the memmap backend
// is packed from its directory; another is written to a staging directory beside the archive
// (`options`: as TensorDict::memmap's, leaves already mapped elsewhere always copied), then
// packed, and the staging directory removed. Throws ValueError when `archive_path` is a
// directory, and as TensorDict::memmap and pack_memmap do.
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
// result): the file is mapped once and the leaves are views into the mapping (NOTE [ Memmap
// archive format ]). It is load_memmap's own loader over the archive's entries (NOTE [ Memmap
// byte stores ] in td/backends/memmap/store.h): every layout a directory loads from (Python
// tensordict 0.4-0.14, nested tensors included) loads from its archive, by the same rules, and
// what a directory refuses the archive refuses. Throws MemmapError naming the archive and the
// entry ("run.tdz::next/meta.json") and the problem, KeyError for a missing sub_path.
//   td::TensorDict params = td::load_archive("/ckpt/run1.tdz",
//                                            td::ArchiveLoadOptions().sub_path("params"));
TensorDict load_archive(const std::string& archive_path, const ArchiveLoadOptions& options = {});

}  // namespace td
