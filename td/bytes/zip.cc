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
constexpr uint16_t kPadExtraId = 0x6474;  // "td": the padding (NOTE [ Memmap archive format ])
constexpr uint64_t kAlignment = 64;
constexpr uint16_t kVersionNeeded = 45;          // zip64
constexpr uint16_t kVersionMadeBy = (3 << 8) | 45;  // Unix, 4.5
constexpr size_t kChunk = size_t{16} << 20;

// Little-endian integers, as zip stores them.
template <class T>
T Get(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}
template <class T>
void Put(std::string* s, uint64_t v) {
  for (size_t i = 0; i < sizeof(T); ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// The fields a local header and a central directory record share, from "version needed to
// extract" to the extra field's length.
void PutEntryFields(std::string* s, const std::string& name, uint32_t crc, uint64_t size32,
                    size_t extra_len) {
  const bool ascii = std::all_of(name.begin(), name.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  Put<uint16_t>(s, kVersionNeeded);
  Put<uint16_t>(s, ascii ? 0 : 0x800);  // bit 11: a UTF-8 name
  Put<uint16_t>(s, 0);     // stored
  Put<uint16_t>(s, 0);     // time 00:00:00
  Put<uint16_t>(s, 0x21);  // date 1980-01-01: archives of the same data are the same bytes
  Put<uint32_t>(s, crc);
  Put<uint32_t>(s, size32);
  Put<uint32_t>(s, size32);
  Put<uint16_t>(s, name.size());
  Put<uint16_t>(s, extra_len);
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
    if (Get<uint32_t>(&buf[i]) == kEndSig &&
        i + 22 + Get<uint16_t>(&buf[i + 20]) == static_cast<int64_t>(tail)) {
      at = i;
      break;
    }
  }
  if (at < 0) return Bad(path, " is not a zip archive: no end of central directory record");
  const uint64_t end_offset = file_size - tail + static_cast<uint64_t>(at);
  uint64_t count = Get<uint16_t>(&buf[at + 10]);
  uint64_t cd_size = Get<uint32_t>(&buf[at + 12]);
  uint64_t cd_offset = Get<uint32_t>(&buf[at + 16]);
  if (count == 0xFFFF || cd_size == kLimit32 || cd_offset == kLimit32) {
    unsigned char loc[20];
    if (end_offset < 20) return Bad(path, ": zip64 end record locator missing");
    if (s = read(end_offset - 20, loc, 20, "zip64 locator"); !s.ok()) return s;
    if (Get<uint32_t>(loc) != kLocator64Sig) return Bad(path, ": zip64 end record locator missing");
    const uint64_t end64 = Get<uint64_t>(loc + 8);
    unsigned char rec[56];
    if (s = read(end64, rec, 56, "zip64 end record"); !s.ok()) return s;
    if (Get<uint32_t>(rec) != kEnd64Sig) return Bad(path, ": bad zip64 end record signature");
    count = Get<uint64_t>(rec + 32);
    cd_size = Get<uint64_t>(rec + 40);
    cd_offset = Get<uint64_t>(rec + 48);
  }
  if (s = inside(cd_offset, cd_size, "central directory"); !s.ok()) return s;
  std::vector<unsigned char> cd(cd_size);
  if (s = read(cd_offset, cd.data(), cd_size, "central directory"); !s.ok()) return s;
  std::map<std::string, ZipEntry> out;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_size - pos < 46 || Get<uint32_t>(&cd[pos]) != kCentralSig) {
      return Bad(path, ": central directory record ", i, " is truncated or corrupt");
    }
    const unsigned char* r = &cd[pos];
    ZipEntry e;
    const uint16_t flags = Get<uint16_t>(r + 8);
    e.method = Get<uint16_t>(r + 10);
    e.crc = Get<uint32_t>(r + 16);
    e.compressed_size = Get<uint32_t>(r + 20);
    e.size = Get<uint32_t>(r + 24);
    const uint16_t name_len = Get<uint16_t>(r + 28), extra_len = Get<uint16_t>(r + 30);
    const uint16_t comment_len = Get<uint16_t>(r + 32);
    e.header_offset = Get<uint32_t>(r + 42);
    e.central_offset = cd_offset + pos;
    if (cd_size - pos < 46u + name_len + extra_len + comment_len) {
      return Bad(path, ": central directory record ", i, " is truncated");
    }
    e.name.assign(reinterpret_cast<const char*>(r + 46), name_len);
    // zip64 extra: the fields whose 32-bit value is 0xFFFFFFFF, in this order.
    const unsigned char* x = r + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      const uint16_t id = Get<uint16_t>(x + k), len = Get<uint16_t>(x + k + 2);
      if (k + 4 + len > extra_len) break;
      if (id == kZip64ExtraId) {
        size_t f = k + 4;
        auto take = [&](uint64_t* v) {  // false: the field is short
          if (*v != kLimit32) return true;
          if (f + 8 > k + 4 + len) return false;
          *v = Get<uint64_t>(x + f);
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
    if (flags & 1) return Bad(path, ": entry '", e.name, "' is encrypted");
    // A stored entry's bytes are its data: every reader takes `size` bytes from the payload, so
    // the two sizes must agree (and the payload lie in the file, checked below).
    if (e.method == 0 && e.size != e.compressed_size) {
      return Bad(path, ": entry '", e.name, "' is stored (uncompressed) but declares ", e.size,
                 " bytes of data and ", e.compressed_size, " stored bytes; the two must be equal");
    }
    e.descriptor = (flags & 8) != 0;
    unsigned char local[30];
    const std::string header = absl::StrCat("local header of entry '", e.name, "'");
    if (s = read(e.header_offset, local, 30, header); !s.ok()) return s;
    if (Get<uint32_t>(local) != kLocalSig) {
      return Bad(path, ": bad local header signature for entry '", e.name, "'");
    }
    e.payload_offset = e.header_offset + 30 + Get<uint16_t>(local + 26) + Get<uint16_t>(local + 28);
    s = inside(e.payload_offset, e.compressed_size, absl::StrCat("data of entry '", e.name, "'"));
    if (!s.ok()) return s;
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
  std::string extra;
  if (align) {
    const uint64_t start = header_offset + 30 + name.size() + 4 + 20;  // 20: the zip64 block
    const uint64_t pad = (kAlignment - start % kAlignment) % kAlignment;
    Put<uint16_t>(&extra, kPadExtraId);
    Put<uint16_t>(&extra, pad);
    extra.append(pad, '\0');
  }
  Put<uint16_t>(&extra, kZip64ExtraId);
  Put<uint16_t>(&extra, 16);
  Put<uint64_t>(&extra, size);
  Put<uint64_t>(&extra, size);
  std::string h;
  Put<uint32_t>(&h, kLocalSig);
  PutEntryFields(&h, name, /*crc=*/0, kLimit32, extra.size());  // the CRC is patched below
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
  Put<uint32_t>(&crc_bytes, crc);
  written_[header_offset] = Written{name, crc, size};
  return os::WriteAll(fd_, crc_bytes.data(), 4, path_, static_cast<int64_t>(header_offset + 14));
}

absl::Status ZipWriter::Finish() {
  const uint64_t cd_offset = offset_;
  std::string cd;
  for (const auto& [header_offset, w] : written_) {
    const bool big_size = w.size >= kLimit32, big_offset = header_offset >= kLimit32;
    std::string extra;
    if (big_size || big_offset) {
      Put<uint16_t>(&extra, kZip64ExtraId);
      Put<uint16_t>(&extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
      if (big_size) {
        Put<uint64_t>(&extra, w.size);
        Put<uint64_t>(&extra, w.size);
      }
      if (big_offset) Put<uint64_t>(&extra, header_offset);
    }
    Put<uint32_t>(&cd, kCentralSig);
    Put<uint16_t>(&cd, kVersionMadeBy);
    PutEntryFields(&cd, w.name, w.crc, big_size ? kLimit32 : w.size, extra.size());
    Put<uint16_t>(&cd, 0);  // comment
    Put<uint16_t>(&cd, 0);  // disk
    Put<uint16_t>(&cd, 0);  // internal attributes
    Put<uint32_t>(&cd, uint64_t{0100644} << 16);  // a regular file, rw-r--r--
    Put<uint32_t>(&cd, big_offset ? kLimit32 : header_offset);
    cd += w.name;
    cd += extra;
  }
  const uint64_t count = written_.size(), cd_size = cd.size();
  if (count >= 0xFFFF || cd_size >= kLimit32 || cd_offset >= kLimit32) {
    const uint64_t end64 = cd_offset + cd_size;
    Put<uint32_t>(&cd, kEnd64Sig);
    Put<uint64_t>(&cd, 44);
    Put<uint16_t>(&cd, kVersionMadeBy);
    Put<uint16_t>(&cd, kVersionNeeded);
    Put<uint32_t>(&cd, 0);
    Put<uint32_t>(&cd, 0);
    Put<uint64_t>(&cd, count);
    Put<uint64_t>(&cd, count);
    Put<uint64_t>(&cd, cd_size);
    Put<uint64_t>(&cd, cd_offset);
    Put<uint32_t>(&cd, kLocator64Sig);
    Put<uint32_t>(&cd, 0);
    Put<uint64_t>(&cd, end64);
    Put<uint32_t>(&cd, 1);
  }
  Put<uint32_t>(&cd, kEndSig);
  Put<uint16_t>(&cd, 0);
  Put<uint16_t>(&cd, 0);
  Put<uint16_t>(&cd, std::min<uint64_t>(count, 0xFFFF));
  Put<uint16_t>(&cd, std::min<uint64_t>(count, 0xFFFF));
  Put<uint32_t>(&cd, std::min<uint64_t>(cd_size, kLimit32));
  Put<uint32_t>(&cd, std::min<uint64_t>(cd_offset, kLimit32));
  Put<uint16_t>(&cd, 0);
  return Write(cd.data(), cd.size());
}

}  // namespace zip
}  // namespace internal
}  // namespace td
