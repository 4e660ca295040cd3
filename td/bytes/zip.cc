#include "td/bytes/zip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/bytes/codec.h"
#include "td/os/fd.h"

namespace td {
namespace internal {
namespace zip {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr uint64_t kLimit32 = 0xFFFFFFFFu;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPadExtraId = 0x6474;  // "td": the padding (NOTE [ Memmap archive format ])
constexpr uint64_t kAlignment = 64;
constexpr uint16_t kVersionNeeded = 45;          // zip64
constexpr uint16_t kVersionMadeBy = (3 << 8) | 45;  // Unix, 4.5
constexpr uint16_t kDate1980 = 0x21;  // 1980-01-01: archives of the same data are the same bytes
constexpr size_t kChunk = size_t{16} << 20;

// The records the reader and the writer share (APPNOTE.TXT 4.3): the width in bytes of each
// field, in order; Get and Put take or give the fields' values in the same order.
template <size_t N>
using Layout = std::array<int, N>;
// Local header: signature, version needed, flags, method, time, date, CRC-32, compressed size,
// size, name length, extra length.
constexpr Layout<11> kLocal = {4, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2};
// Central directory record: signature, version made by, then as the local header from version
// needed to extra length, comment length, disk, internal and external attributes, offset of
// the local header.
constexpr Layout<17> kCentral = {4, 2, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2, 4, 4};
// End record: signature, disk, directory's disk, entries on this disk, entries, directory size,
// directory offset, comment length.
constexpr Layout<8> kEnd = {4, 2, 2, 2, 2, 4, 4, 2};
// Zip64 end record: signature, record size, version made by, version needed, disk, directory's
// disk, entries on this disk, entries, directory size, directory offset. Its locator:
// signature, disk, offset of the zip64 end record, disks.
constexpr Layout<10> kEnd64 = {4, 8, 2, 2, 4, 4, 8, 8, 8, 8};
constexpr Layout<4> kLocator64 = {4, 4, 8, 4};
// An extra block's id and length.
constexpr Layout<2> kExtraHeader = {2, 2};

// A little-endian integer of `width` bytes, as zip stores them.
uint64_t Get(const unsigned char* p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
template <size_t N>
std::array<uint64_t, N> Get(const unsigned char* p, const Layout<N>& layout) {
  std::array<uint64_t, N> v{};
  for (size_t f = 0; f < N; p += layout[f++]) v[f] = Get(p, layout[f]);
  return v;
}
template <size_t N>
void Put(std::string* s, const Layout<N>& layout, const std::array<uint64_t, N>& v) {
  for (size_t f = 0; f < N; ++f) {
    for (int i = 0; i < layout[f]; ++i) s->push_back(static_cast<char>((v[f] >> (8 * i)) & 0xFF));
  }
}

// General purpose flags of `name`: bit 11 for a UTF-8 name.
uint64_t NameFlags(const std::string& name) {
  const bool ascii = std::all_of(name.begin(), name.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? 0 : 0x800;
}

// A malformed zip (kDataLoss: the archive makes it a MemmapError).
template <class... Args>
absl::Status Bad(const Args&... args) {
  return absl::DataLossError(absl::StrCat(args...));
}

}  // namespace

absl::StatusOr<std::map<std::string, ZipEntry>> ReadZipDirectory(const std::string& path) {
  const os::UniqueFd fd(
      ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // a FIFO: no wait
  if (!fd.valid()) return os::ErrnoError(errno, "cannot open the archive", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Bad(path, " is not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // An error unless the `n` bytes at `at` (the `what`) lie inside the file.
  auto inside = [&](uint64_t at, uint64_t n, const std::string& what) {
    if (at <= file_size && n <= file_size - at) return absl::OkStatus();
    return Bad(path, ": the ", what, " (", n, " bytes at byte ", at, ") lies outside the file of ",
               file_size, " bytes");
  };
  // pread(2) of exactly `n` bytes at `at`, or an error naming the file and `what` was read.
  auto read = [&](uint64_t at, void* out, size_t n, const std::string& what) -> absl::Status {
    if (absl::Status s = inside(at, n, what); !s.ok()) return s;
    const std::string where =
        absl::StrCat("the ", what, " of the zip archive ", path, " at byte ", at);
    const absl::StatusOr<size_t> got =
        os::ReadAll(fd.get(), out, n, where, static_cast<int64_t>(at));
    if (!got.ok()) return got.status();
    return *got < n ? Bad("cannot read ", where, ": the file ends first") : absl::OkStatus();
  };
  // The end record: 22 bytes, then a comment of at most 65535 bytes.
  const uint64_t tail = std::min<uint64_t>(file_size, 22 + 65535);
  if (tail < 22) return Bad(path, " is not a zip archive: ", file_size, " bytes");
  std::vector<unsigned char> buf(tail);
  absl::Status s = read(file_size - tail, buf.data(), tail, "end record");
  if (!s.ok()) return s;
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i) {
    if (Get(&buf[i], 4) == kEndSig && i + 22 + Get(&buf[i + 20], 2) == tail) {
      at = i;
      break;
    }
  }
  if (at < 0) return Bad(path, " is not a zip archive: no end of central directory record");
  const uint64_t end_offset = file_size - tail + static_cast<uint64_t>(at);
  const std::array<uint64_t, 8> end = Get(&buf[at], kEnd);
  uint64_t count = end[4], cd_size = end[5], cd_offset = end[6];
  if (count == 0xFFFF || cd_size == kLimit32 || cd_offset == kLimit32) {
    unsigned char loc[20];
    if (end_offset < 20) return Bad(path, ": zip64 end record locator missing");
    if (s = read(end_offset - 20, loc, 20, "zip64 locator"); !s.ok()) return s;
    const std::array<uint64_t, 4> locator = Get(loc, kLocator64);
    if (locator[0] != kLocator64Sig) return Bad(path, ": zip64 end record locator missing");
    unsigned char rec[56];
    if (s = read(locator[2], rec, 56, "zip64 end record"); !s.ok()) return s;
    const std::array<uint64_t, 10> end64 = Get(rec, kEnd64);
    if (end64[0] != kEnd64Sig) return Bad(path, ": bad zip64 end record signature");
    count = end64[7];
    cd_size = end64[8];
    cd_offset = end64[9];
  }
  if (s = inside(cd_offset, cd_size, "central directory"); !s.ok()) return s;
  std::vector<unsigned char> cd(cd_size);
  if (s = read(cd_offset, cd.data(), cd_size, "central directory"); !s.ok()) return s;
  std::map<std::string, ZipEntry> out;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_size - pos < 46 || Get(&cd[pos], 4) != kCentralSig) {
      return Bad(path, ": central directory record ", i, " is truncated or corrupt");
    }
    const unsigned char* r = &cd[pos];
    const std::array<uint64_t, 17> c = Get(r, kCentral);
    ZipEntry e;
    const uint64_t flags = c[3], name_len = c[10], extra_len = c[11], comment_len = c[12];
    e.method = static_cast<uint16_t>(c[4]);
    e.crc = static_cast<uint32_t>(c[7]);
    e.compressed_size = c[8];
    e.size = c[9];
    e.header_offset = c[16];
    e.central_offset = cd_offset + pos;
    if (cd_size - pos < 46 + name_len + extra_len + comment_len) {
      return Bad(path, ": central directory record ", i, " is truncated");
    }
    e.name.assign(reinterpret_cast<const char*>(r + 46), name_len);
    // zip64 extra: the fields whose 32-bit value is 0xFFFFFFFF, in this order.
    const unsigned char* x = r + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      const uint64_t id = Get(x + k, 2), len = Get(x + k + 2, 2);
      if (k + 4 + len > extra_len) break;
      if (id == kZip64ExtraId) {
        size_t f = k + 4;
        auto take = [&](uint64_t* v) {  // false: the field is short
          if (*v != kLimit32) return true;
          if (f + 8 > k + 4 + len) return false;
          *v = Get(x + f, 8);
          f += 8;
          return true;
        };
        if (!take(&e.size) || !take(&e.compressed_size) || !take(&e.header_offset)) {
          return Bad(path, ": entry '", e.name, "' has a short zip64 extra field");
        }
      }
      k += 4 + len;
    }
    pos += 46 + name_len + extra_len + comment_len;
    if (!e.name.empty() && e.name.back() == '/') continue;  // a directory entry
    if (flags & 1) return Bad(path, ": entry '", e.name, "' is encrypted");
    // Every reader takes `size` bytes from a stored payload: the two sizes must agree.
    if (e.method == 0 && e.size != e.compressed_size) {
      return Bad(path, ": entry '", e.name, "' is stored (uncompressed) but declares ", e.size,
                 " bytes of data and ", e.compressed_size, " stored bytes; the two must be equal");
    }
    e.descriptor = (flags & 8) != 0;
    unsigned char local[30];
    const std::string header = absl::StrCat("local header of entry '", e.name, "'");
    if (s = read(e.header_offset, local, 30, header); !s.ok()) return s;
    const std::array<uint64_t, 11> l = Get(local, kLocal);
    if (l[0] != kLocalSig) {
      return Bad(path, ": bad local header signature for entry '", e.name, "'");
    }
    e.payload_offset = e.header_offset + 30 + l[9] + l[10];
    s = inside(e.payload_offset, e.compressed_size, absl::StrCat("data of entry '", e.name, "'"));
    if (!s.ok()) return s;
    const std::string name = e.name;
    if (!out.emplace(name, std::move(e)).second) {
      return Bad(path, ": entry '", name, "' appears twice");
    }
  }
  return out;
}

absl::Status WriteZip(int fd, const std::string& path, const std::vector<ZipSource>& files) {
  const std::string display = "the archive " + path;
  uint64_t offset = 0;  // bytes written so far
  auto write = [&](const void* data, size_t n) {
    offset += n;
    return os::WriteAll(fd, data, n, display);
  };
  std::vector<ZipEntry> written;
  for (const ZipSource& f : files) {
    const uint64_t header_offset = offset;
    // Local extra: the padding block (when aligning), then zip64 sizes (as force_zip64 writes).
    std::string extra;
    if (f.align) {
      const uint64_t start = header_offset + 30 + f.name.size() + 4 + 20;  // 20: the zip64 block
      const uint64_t pad = (kAlignment - start % kAlignment) % kAlignment;
      Put(&extra, kExtraHeader, {kPadExtraId, pad});
      extra.append(pad, '\0');
    }
    Put(&extra, Layout<4>{2, 2, 8, 8}, {kZip64ExtraId, 16, f.size, f.size});
    std::string h;  // with a zero CRC, patched below
    Put(&h, kLocal,
        {kLocalSig, kVersionNeeded, NameFlags(f.name), 0, 0, kDate1980, 0, kLimit32, kLimit32,
         f.name.size(), extra.size()});
    h += f.name;
    h += extra;
    if (absl::Status s = write(h.data(), h.size()); !s.ok()) return s;

    const os::UniqueFd in(::open(f.source.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) return os::ErrnoError(errno, "cannot open", f.source);
    std::vector<char> chunk(std::min<uint64_t>(kChunk, std::max<uint64_t>(f.size, 1)));
    uint32_t crc = 0;
    uint64_t copied = 0;
    while (true) {
      const absl::StatusOr<size_t> n = os::ReadAll(in.get(), chunk.data(), chunk.size(), f.source);
      if (!n.ok()) return n.status();
      copied += *n;
      if (*n == 0 || copied > f.size) break;
      crc = codec::Crc32(crc, chunk.data(), *n);
      if (absl::Status s = write(chunk.data(), *n); !s.ok()) return s;
    }
    if (copied != f.size) {
      return Bad("cannot pack ", f.source, ": expected ", f.size, " bytes, read ",
                 copied > f.size ? "more" : std::to_string(copied));
    }
    std::string crc_bytes;  // into the local header, which was written with a zero CRC
    Put(&crc_bytes, Layout<1>{4}, {crc});
    written.push_back(ZipEntry{f.name, 0, crc, f.size, f.size, header_offset});
    const int64_t at = static_cast<int64_t>(header_offset + 14);
    if (absl::Status s = os::WriteAll(fd, crc_bytes.data(), 4, display, at); !s.ok()) return s;
  }

  const uint64_t cd_offset = offset;
  std::string cd;
  for (const ZipEntry& w : written) {
    const bool big_size = w.size >= kLimit32, big_offset = w.header_offset >= kLimit32;
    std::string extra;
    if (big_size || big_offset) {
      Put(&extra, kExtraHeader, {kZip64ExtraId, (big_size ? 16u : 0u) + (big_offset ? 8u : 0u)});
      if (big_size) Put(&extra, Layout<2>{8, 8}, {w.size, w.size});
      if (big_offset) Put(&extra, Layout<1>{8}, {w.header_offset});
    }
    const uint64_t size32 = big_size ? kLimit32 : w.size;
    // External attributes: a regular file, rw-r--r--.
    Put(&cd, kCentral,
        {kCentralSig, kVersionMadeBy, kVersionNeeded, NameFlags(w.name), 0, 0, kDate1980, w.crc,
         size32, size32, w.name.size(), extra.size(), 0, 0, 0, uint64_t{0100644} << 16,
         big_offset ? kLimit32 : w.header_offset});
    cd += w.name;
    cd += extra;
  }
  const uint64_t count = written.size(), cd_size = cd.size();
  if (count >= 0xFFFF || cd_size >= kLimit32 || cd_offset >= kLimit32) {
    Put(&cd, kEnd64,
        {kEnd64Sig, 44, kVersionMadeBy, kVersionNeeded, 0, 0, count, count, cd_size, cd_offset});
    Put(&cd, kLocator64, {kLocator64Sig, 0, cd_offset + cd_size, 1});
  }
  const uint64_t count16 = std::min<uint64_t>(count, 0xFFFF);
  Put(&cd, kEnd,
      {kEndSig, 0, 0, count16, count16, std::min(cd_size, kLimit32), std::min(cd_offset, kLimit32),
       0});
  return write(cd.data(), cd.size());
}

}  // namespace zip
}  // namespace internal
}  // namespace td
