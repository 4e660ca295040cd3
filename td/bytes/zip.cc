#include "td/bytes/zip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
constexpr uint16_t kPadExtraId = 0x6474;  // "td", the padding block (NOTE [ Memmap archive format ])
constexpr uint64_t kAlignment = 64;
constexpr uint16_t kVersionNeeded = 45;          // zip64
constexpr uint16_t kVersionMadeBy = (3 << 8) | 45;  // Unix, 4.5
constexpr size_t kChunk = size_t{16} << 20;

uint16_t Get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t Get64(const unsigned char* p) {
  return static_cast<uint64_t>(Get32(p)) | (static_cast<uint64_t>(Get32(p + 4)) << 32);
}
void Put16(std::string* s, uint64_t v) {
  s->push_back(static_cast<char>(v & 0xFF));
  s->push_back(static_cast<char>((v >> 8) & 0xFF));
}
void Put32(std::string* s, uint64_t v) {
  Put16(s, v & 0xFFFF);
  Put16(s, (v >> 16) & 0xFFFF);
}
void Put64(std::string* s, uint64_t v) {
  Put32(s, v & 0xFFFFFFFFu);
  Put32(s, v >> 32);
}

// A malformed zip (kDataLoss: the archive makes it a MemmapError).
template <class... Args>
absl::Status Bad(const Args&... args) {
  return absl::DataLossError(absl::StrCat(args...));
}

// pread(2) of exactly `n` bytes at `offset`, or an error naming the file and what was read.
absl::Status ReadAt(int fd, uint64_t offset, void* out, size_t n, const std::string& path,
                    const char* what) {
  const std::string where = absl::StrCat("the ", what, " of the zip archive ", path, " at byte ",
                                         offset);
  const absl::StatusOr<size_t> got = os::ReadAll(fd, out, n, where, static_cast<int64_t>(offset));
  if (!got.ok()) return got.status();
  return *got < n ? Bad("cannot read ", where, ": the file ends first") : absl::OkStatus();
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
  // The end record: 22 bytes, then a comment of at most 65535 bytes.
  const uint64_t tail = std::min<uint64_t>(file_size, 22 + 65535);
  if (tail < 22) return Bad(path, " is not a zip archive: ", file_size, " bytes");
  std::vector<unsigned char> buf(tail);
  absl::Status s = ReadAt(fd.get(), file_size - tail, buf.data(), tail, path, "end record");
  if (!s.ok()) return s;
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i) {
    if (Get32(&buf[i]) == kEndSig && i + 22 + Get16(&buf[i + 20]) == static_cast<int64_t>(tail)) {
      at = i;
      break;
    }
  }
  if (at < 0) return Bad(path, " is not a zip archive: no end of central directory record");
  const uint64_t end_offset = file_size - tail + static_cast<uint64_t>(at);
  uint64_t count = Get16(&buf[at + 10]);
  uint64_t cd_size = Get32(&buf[at + 12]);
  uint64_t cd_offset = Get32(&buf[at + 16]);
  if (count == 0xFFFF || cd_size == kLimit32 || cd_offset == kLimit32) {
    unsigned char loc[20];
    if (end_offset < 20) return Bad(path, ": zip64 end record locator missing");
    if (s = ReadAt(fd.get(), end_offset - 20, loc, 20, path, "zip64 locator"); !s.ok()) return s;
    if (Get32(loc) != kLocator64Sig) return Bad(path, ": zip64 end record locator missing");
    const uint64_t end64 = Get64(loc + 8);
    unsigned char rec[56];
    if (end64 > file_size || file_size - end64 < 56) {
      return Bad(path, ": zip64 end record at byte ", end64, " lies outside the file");
    }
    if (s = ReadAt(fd.get(), end64, rec, 56, path, "zip64 end record"); !s.ok()) return s;
    if (Get32(rec) != kEnd64Sig) return Bad(path, ": bad zip64 end record signature");
    count = Get64(rec + 32);
    cd_size = Get64(rec + 40);
    cd_offset = Get64(rec + 48);
  }
  if (cd_offset > file_size || cd_size > file_size - cd_offset) {
    return Bad(path, ": the central directory (", cd_size, " bytes at ", cd_offset,
               ") lies outside the file of ", file_size, " bytes");
  }
  std::vector<unsigned char> cd(cd_size);
  if (cd_size > 0) s = ReadAt(fd.get(), cd_offset, cd.data(), cd_size, path, "central directory");
  if (!s.ok()) return s;
  std::map<std::string, ZipEntry> out;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_size - pos < 46 || Get32(&cd[pos]) != kCentralSig) {
      return Bad(path, ": central directory record ", i, " is truncated or corrupt");
    }
    const unsigned char* r = &cd[pos];
    ZipEntry e;
    e.flags = Get16(r + 8);
    e.method = Get16(r + 10);
    e.crc = Get32(r + 16);
    e.compressed_size = Get32(r + 20);
    e.size = Get32(r + 24);
    const uint16_t name_len = Get16(r + 28), extra_len = Get16(r + 30), comment_len = Get16(r + 32);
    e.header_offset = Get32(r + 42);
    e.central_offset = cd_offset + pos;
    if (cd_size - pos < 46u + name_len + extra_len + comment_len) {
      return Bad(path, ": central directory record ", i, " is truncated");
    }
    e.name.assign(reinterpret_cast<const char*>(r + 46), name_len);
    // zip64 extra: the fields whose 32-bit value is 0xFFFFFFFF, in this order.
    const unsigned char* x = r + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      const uint16_t id = Get16(x + k), len = Get16(x + k + 2);
      if (k + 4 + len > extra_len) break;
      if (id == kZip64ExtraId) {
        size_t f = k + 4;
        auto take = [&](uint64_t* v) {  // false: the field is short
          if (*v != kLimit32) return true;
          if (f + 8 > k + 4 + len) return false;
          *v = Get64(x + f);
          f += 8;
          return true;
        };
        if (!take(&e.size) || !take(&e.compressed_size) || !take(&e.header_offset)) {
          return Bad(path, ": entry '", e.name, "' has a short zip64 extra field");
        }
      }
      k += 4 + len;
    }
    pos += 46u + name_len + extra_len + comment_len;
    if (!e.name.empty() && e.name.back() == '/') continue;  // a directory entry
    if (e.flags & 1) return Bad(path, ": entry '", e.name, "' is encrypted");
    // A stored entry's bytes are its data: every reader takes `size` bytes from the payload, so
    // the two sizes must agree (and the payload lie in the file, checked below).
    if (e.method == 0 && e.size != e.compressed_size) {
      return Bad(path, ": entry '", e.name, "' is stored (uncompressed) but declares ", e.size,
                 " bytes of data and ", e.compressed_size, " stored bytes; the two must be equal");
    }
    e.descriptor = (e.flags & 8) != 0;
    unsigned char local[30];
    if (e.header_offset > file_size || file_size - e.header_offset < 30) {
      return Bad(path, ": the local header of entry '", e.name, "' at byte ", e.header_offset,
                 " lies outside the file");
    }
    if (s = ReadAt(fd.get(), e.header_offset, local, 30, path, "local header"); !s.ok()) return s;
    if (Get32(local) != kLocalSig) {
      return Bad(path, ": bad local header signature for entry '", e.name, "'");
    }
    e.payload_offset = e.header_offset + 30 + Get16(local + 26) + Get16(local + 28);
    if (e.payload_offset > file_size || e.compressed_size > file_size - e.payload_offset) {
      return Bad(path, ": the data of entry '", e.name, "' (", e.compressed_size, " bytes at byte ",
                 e.payload_offset, ") lies outside the file of ", file_size, " bytes");
    }
    const std::string name = e.name;
    if (!out.emplace(name, std::move(e)).second) {
      return Bad(path, ": entry '", name, "' appears twice");
    }
  }
  return out;
}

ZipWriter::ZipWriter(int fd, const std::string& path) : fd_(fd), path_("the archive " + path) {}

absl::Status ZipWriter::Write(const void* data, size_t n) {
  offset_ += n;
  return os::WriteAll(fd_, data, n, path_);
}

absl::Status ZipWriter::AddFile(const std::string& name, const std::string& source,
                                uint64_t size, bool align) {
  const uint64_t header_offset = offset_;
  // Local extra: the padding block (when aligning), then zip64 sizes (as force_zip64 writes).
  std::string zip64;
  Put16(&zip64, kZip64ExtraId);
  Put16(&zip64, 16);
  Put64(&zip64, size);
  Put64(&zip64, size);
  std::string extra;
  if (align) {
    const uint64_t start = header_offset + 30 + name.size() + 4 + zip64.size();
    const uint64_t pad = (kAlignment - start % kAlignment) % kAlignment;
    Put16(&extra, kPadExtraId);
    Put16(&extra, pad);
    extra.append(pad, '\0');
  }
  extra += zip64;
  bool ascii = true;
  for (char c : name) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  std::string h;
  Put32(&h, kLocalSig);
  Put16(&h, kVersionNeeded);
  Put16(&h, ascii ? 0 : 0x800);
  Put16(&h, 0);       // stored
  Put16(&h, 0);       // time 00:00:00
  Put16(&h, 0x21);    // date 1980-01-01: archives of the same data are the same bytes
  Put32(&h, 0);       // CRC, patched below
  Put32(&h, kLimit32);
  Put32(&h, kLimit32);
  Put16(&h, name.size());
  Put16(&h, extra.size());
  h += name;
  h += extra;
  if (absl::Status s = Write(h.data(), h.size()); !s.ok()) return s;

  const os::UniqueFd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return os::ErrnoError(errno, "cannot open", source);
  std::vector<char> chunk(std::min<uint64_t>(kChunk, std::max<uint64_t>(size, 1)));
  uint32_t crc = 0;
  uint64_t copied = 0;
  while (true) {
    const absl::StatusOr<size_t> n = os::ReadAll(in.get(), chunk.data(), chunk.size(), source);
    if (!n.ok()) return n.status();
    copied += *n;
    if (*n == 0 || copied > size) break;
    crc = codec::Crc32(crc, chunk.data(), *n);
    if (absl::Status s = Write(chunk.data(), *n); !s.ok()) return s;
  }
  if (copied != size) {
    return Bad("cannot pack ", source, ": expected ", size, " bytes, read ",
               copied > size ? "more" : std::to_string(copied));
  }
  std::string crc_bytes;  // into the local header, which was written with a zero CRC
  Put32(&crc_bytes, crc);
  written_[header_offset] = Written{name, crc, size, header_offset};
  return os::WriteAll(fd_, crc_bytes.data(), 4, path_, static_cast<int64_t>(header_offset + 14));
}

absl::Status ZipWriter::Finish() {
  const uint64_t cd_offset = offset_;
  std::string cd;
  for (const auto& [offset, w] : written_) {
    std::string extra;
    const bool big_size = w.size >= kLimit32, big_offset = w.header_offset >= kLimit32;
    if (big_size || big_offset) {
      Put16(&extra, kZip64ExtraId);
      Put16(&extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
      if (big_size) {
        Put64(&extra, w.size);
        Put64(&extra, w.size);
      }
      if (big_offset) Put64(&extra, w.header_offset);
    }
    bool ascii = true;
    for (char c : w.name) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    Put32(&cd, kCentralSig);
    Put16(&cd, kVersionMadeBy);
    Put16(&cd, kVersionNeeded);
    Put16(&cd, ascii ? 0 : 0x800);
    Put16(&cd, 0);
    Put16(&cd, 0);
    Put16(&cd, 0x21);
    Put32(&cd, w.crc);
    Put32(&cd, big_size ? kLimit32 : w.size);
    Put32(&cd, big_size ? kLimit32 : w.size);
    Put16(&cd, w.name.size());
    Put16(&cd, extra.size());
    Put16(&cd, 0);  // comment
    Put16(&cd, 0);  // disk
    Put16(&cd, 0);  // internal attributes
    Put32(&cd, uint64_t{0100644} << 16);  // a regular file, rw-r--r--
    Put32(&cd, big_offset ? kLimit32 : w.header_offset);
    cd += w.name;
    cd += extra;
  }
  const uint64_t count = written_.size(), cd_size = cd.size();
  if (count >= 0xFFFF || cd_size >= kLimit32 || cd_offset >= kLimit32) {
    const uint64_t end64 = cd_offset + cd_size;
    Put32(&cd, kEnd64Sig);
    Put64(&cd, 44);
    Put16(&cd, kVersionMadeBy);
    Put16(&cd, kVersionNeeded);
    Put32(&cd, 0);
    Put32(&cd, 0);
    Put64(&cd, count);
    Put64(&cd, count);
    Put64(&cd, cd_size);
    Put64(&cd, cd_offset);
    Put32(&cd, kLocator64Sig);
    Put32(&cd, 0);
    Put64(&cd, end64);
    Put32(&cd, 1);
  }
  Put32(&cd, kEndSig);
  Put16(&cd, 0);
  Put16(&cd, 0);
  Put16(&cd, std::min<uint64_t>(count, 0xFFFF));
  Put16(&cd, std::min<uint64_t>(count, 0xFFFF));
  Put32(&cd, std::min<uint64_t>(cd_size, kLimit32));
  Put32(&cd, std::min<uint64_t>(cd_offset, kLimit32));
  Put16(&cd, 0);
  return Write(cd.data(), cd.size());
}

}  // namespace zip
}  // namespace internal
}  // namespace td
