// The zip reading and writing behind memmap archives (NOTE [ Memmap archive format ] in
// td/backends/memmap/archive/archive.h). Not API. Failures are Status messages naming the file
// (kDataLoss for a malformed zip, os::ErrnoError's codes for I/O).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace td {
namespace internal {
namespace zip {

// One entry of an archive, from its central directory record and its local header.
struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0: stored
  uint32_t crc = 0;
  uint64_t size = 0;             // uncompressed
  uint64_t compressed_size = 0;
  uint64_t header_offset = 0;    // of the local header
  uint64_t payload_offset = 0;   // of the data
  uint64_t central_offset = 0;   // of the central directory record
  bool descriptor = false;       // flag bit 3: the CRC also follows the payload
};

// The entries of the zip file `path` by name, directory entries left out; payloads are located,
// not read. An error naming the file and the problem when it is not a readable zip (a record
// outside the file, a bad signature, an encrypted entry, a repeated name, ...).
absl::StatusOr<std::map<std::string, ZipEntry>> ReadZipDirectory(const std::string& path);

// A file for WriteZip: the entry `name` with the content of the file `source` (`size` bytes), its
// payload aligned to 64 bytes when `align`.
struct ZipSource {
  std::string name;
  std::string source;
  uint64_t size = 0;
  bool align = false;
};

// Writes the zip of `files`, in this order, in the layout of NOTE [ Memmap archive format ], to
// the new empty file `fd` (the caller's to close and rename); `path` names it in messages. An
// error naming a source that cannot be read or does not hold exactly `size` bytes.
absl::Status WriteZip(int fd, const std::string& path, const std::vector<ZipSource>& files);

}  // namespace zip
}  // namespace internal
}  // namespace td
