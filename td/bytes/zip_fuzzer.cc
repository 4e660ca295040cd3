// libFuzzer target for the central directory of memmap archives (zip::ReadZipDirectory,
// NOTE [ Memmap archive format ] in td/backends/memmap/archive/archive.h): any bytes as a .tdz
// file must give an error Status or a directory, never a crash, a hang or an exception; and what
// it accepts must keep the promises the archive loader, unpack_memmap and
// refresh_archive_checksums rely on:
//   * every entry's stored bytes [payload_offset, payload_offset + compressed_size) lie in the file;
//   * a stored (uncompressed) entry declares as many bytes as it stores, so reading its `size`
//     bytes never passes the file's end (each is read back here, as unpack_memmap does);
//   * no entry is a directory entry (a name ending in '/').
// The input is the whole archive, held in a memfd (no disk) and opened through /proc/self/fd.
// Built with clang by tests/fuzz/run.sh (`-fsanitize=fuzzer,address,undefined`), and replayed
// over the seed corpus by //tests/fuzz:zip_directory_replay_test in every normal test run.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "td/bytes/codec.h"
#include "td/bytes/zip.h"

namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "zip_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("tdz", MFD_CLOEXEC);
  Require(fd >= 0, "memfd_create failed");
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, data + done, size - done);
    Require(w > 0, "cannot write the memfd");
    done += static_cast<size_t>(w);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const auto entries = td::internal::zip::ReadZipDirectory(path);
  if (!entries.ok()) {
    ::close(fd);
    return 0;
  }
  std::vector<char> buf;
  for (const auto& [name, e] : *entries) {
    Require(name == e.name, "an entry filed under another name");
    Require(name.empty() || name.back() != '/', "a directory entry");
    Require(e.payload_offset <= size && e.compressed_size <= size - e.payload_offset,
            "an entry's stored bytes lie outside the file");
    if (e.method != 0) continue;  // compressed: refused by every reader
    Require(e.size == e.compressed_size, "a stored entry declares more bytes than it stores");
    buf.resize(e.size);
    Require(e.size == 0 || ::pread(fd, buf.data(), e.size, static_cast<off_t>(e.payload_offset)) ==
                               static_cast<ssize_t>(e.size),
            "a stored entry cannot be read whole");
    (void)td::internal::codec::Crc32(0, buf.data(), buf.size());
  }
  ::close(fd);
  return 0;
}
