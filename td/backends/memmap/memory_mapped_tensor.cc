#include "td/backends/memmap/memory_mapped_tensor.h"

#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "td/os/fd.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td {
namespace internal {
namespace memmap {
namespace {

// The context of every mapping made here; the DataPtr deleter identifies our tensors.
struct Region {
  std::string path;
  MemmapMode mode;
  internal::os::MappedRegion mapping;  // unmapped when the last tensor using it goes away
};

void DeleteRegion(void* ctx) { delete static_cast<Region*>(ctx); }

const Region* RegionOf(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  const c10::DataPtr& dp = t.storage().data_ptr();
  if (dp.get_deleter() != &DeleteRegion) return nullptr;
  return static_cast<const Region*>(dp.get_context());
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::string full = path;
  if (path.empty() || path[0] != '/') {
    std::vector<char> buf(4096);
    while (::getcwd(buf.data(), buf.size()) == nullptr && errno == ERANGE) buf.resize(buf.size() * 2);
    full = JoinPath(buf.data(), path);
  }
  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(full, '/')) {
    if (p.empty() || p == ".") continue;
    if (p == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.emplace_back(p);
  }
  return "/" + absl::StrJoin(parts, "/");
}

absl::StatusOr<at::Tensor> MapFile(int fd, const std::string& path, c10::ScalarType dtype,
                                   const std::vector<int64_t>& shape, MemmapMode mode) {
  absl::StatusOr<int64_t> nbytes = internal::memmap::TensorBytes(shape, dtype, path);
  if (!nbytes.ok()) return nbytes.status();
  absl::StatusOr<int64_t> size = FileSize(fd, path);
  if (!size.ok()) return size.status();
  if (*size != *nbytes) {
    return absl::DataLossError(absl::StrCat(
        path, " has ", *size, " bytes, but a tensor of shape ", SizeRepr(shape), " and dtype ",
        DtypeName(dtype), " needs ", *nbytes, " (a truncated or foreign file?)"));
  }
  const int flags = mode == MemmapMode::kReadOnly ? (MAP_PRIVATE | MAP_NORESERVE) : MAP_SHARED;
  absl::StatusOr<internal::os::MappedRegion> mapping = internal::os::MappedRegion::Map(
      fd, static_cast<size_t>(*nbytes), PROT_READ | PROT_WRITE, flags, path);
  if (!mapping.ok()) return mapping.status();
  void* addr = mapping->addr();
  auto* region = new Region{path, mode, *std::move(mapping)};
  return at::for_blob(addr, shape)
      .context(region, &DeleteRegion)
      .target_device(at::Device(at::kCPU))
      .options(at::TensorOptions().dtype(dtype).device(at::kCPU))
      .make_tensor();
}

absl::Status WriteTensor(int fd, const at::Tensor& tensor, const std::string& path) {
  if (tensor.is_nested() || tensor.layout() != at::kStrided) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write a ", tensor.is_nested() ? "nested (ragged)" : c10::str(tensor.layout()),
        " tensor to ", path, ": only strided (dense) tensors have a memmap layout"));
  }
  at::Tensor t = tensor.resolve_conj().resolve_neg();
  const int64_t total = t.numel() * static_cast<int64_t>(t.element_size());
  if (total == 0) return absl::OkStatus();
  // Reserve the file's blocks in one call before copying: a full disk is reported before
  // anything is copied, and the file system can allocate the extents at once. File systems
  // without fallocate (EOPNOTSUPP) are written the plain way.
  int rc;
  do {
    rc = ::fallocate(fd, 0, 0, static_cast<off_t>(total));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
    return ErrnoError(errno, absl::StrCat("cannot allocate ", total, " bytes for"), path);
  }
  if (t.device().is_cpu() && t.is_contiguous()) {
    return WriteAll(fd, t.data_ptr(), static_cast<size_t>(total), path);
  }
  // Copy at most ~64 MiB at a time, so an expanded or strided view never materialises whole.
  if (t.dim() == 0) t = t.reshape({1});
  const int64_t rows = t.size(0);
  const int64_t row_bytes = total / rows;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(row_bytes, 1));
  for (int64_t r = 0; r < rows; r += chunk) {
    at::Tensor c = t.narrow(0, r, std::min(chunk, rows - r)).to(at::kCPU).contiguous();
    absl::Status s = WriteAll(fd, c.data_ptr(), static_cast<size_t>(c.numel() * c.element_size()),
                              path);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace memmap
}  // namespace internal

namespace {

namespace mm = internal::memmap;
using mm::UniqueFd;

// Creates `filename` (see from_tensor) filled with `data` or, without data, sparse zeros.
MemoryMappedTensor Create(at::IntArrayRef shape, at::ScalarType dtype, const std::string& filename,
                          bool exists_ok, const at::Tensor* data) {
  const std::string path = mm::AbsolutePath(filename);
  const int64_t nbytes = ValueOrThrow<MemmapError>(mm::TensorBytes(shape.vec(), dtype, path));
  int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  flags |= exists_ok ? O_TRUNC : O_EXCL;
  int raw = ::open(path.c_str(), flags, 0644);
  if (raw < 0 && errno == EEXIST) {
    TD_FAIL(ValueError, "MemoryMappedTensor: file ", path,
                     " already exists (pass exists_ok = true to replace it)");
  }
  if (raw < 0) ThrowIfError<MemmapError>(mm::ErrnoError(errno, "cannot create", path));
  UniqueFd fd(raw);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    TD_FAIL(MemmapError, "MemoryMappedTensor: ", path, " is not a regular file");
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  if (data != nullptr) {
    ThrowIfError<MemmapError>(mm::WriteTensor(fd.get(), *data, path));
  } else if (::ftruncate(fd.get(), static_cast<off_t>(nbytes)) != 0) {
    ThrowIfError<MemmapError>(mm::ErrnoError(errno, "cannot resize", path));
  }
  return MemoryMappedTensor::from_filename(path, dtype, shape, MemmapMode::kReadWrite);
}

}  // namespace

MemoryMappedTensor MemoryMappedTensor::from_tensor(const at::Tensor& tensor,
                                                   const std::string& filename, bool exists_ok) {
  TORCH_CHECK_VALUE(tensor.defined(), "MemoryMappedTensor::from_tensor: undefined tensor");
  if (tensor.is_nested() || tensor.layout() != at::kStrided) {
    TD_FAIL(ValueError, "MemoryMappedTensor::from_tensor: a ",
            tensor.is_nested() ? std::string("nested (ragged)") : c10::str(tensor.layout()),
            " tensor cannot be memory-mapped; only strided (dense) tensors can");
  }
  return Create(tensor.sizes(), tensor.scalar_type(), filename, exists_ok, &tensor);
}

MemoryMappedTensor MemoryMappedTensor::empty(at::IntArrayRef shape, const std::string& filename,
                                             at::ScalarType dtype, bool exists_ok) {
  return Create(shape, dtype, filename, exists_ok, nullptr);
}

MemoryMappedTensor MemoryMappedTensor::zeros(at::IntArrayRef shape, const std::string& filename,
                                             at::ScalarType dtype, bool exists_ok) {
  return Create(shape, dtype, filename, exists_ok, nullptr);
}

MemoryMappedTensor MemoryMappedTensor::ones(at::IntArrayRef shape, const std::string& filename,
                                            at::ScalarType dtype, bool exists_ok) {
  return full(shape, 1, filename, dtype, exists_ok);
}

MemoryMappedTensor MemoryMappedTensor::full(at::IntArrayRef shape, const at::Scalar& fill_value,
                                            const std::string& filename, at::ScalarType dtype,
                                            bool exists_ok) {
  MemoryMappedTensor t = Create(shape, dtype, filename, exists_ok, nullptr);
  t.fill_(fill_value);
  return t;
}

MemoryMappedTensor MemoryMappedTensor::from_filename(const std::string& filename,
                                                     at::ScalarType dtype, at::IntArrayRef shape,
                                                     MemmapMode mode) {
  const std::string path = mm::AbsolutePath(filename);
  const UniqueFd fd = ValueOrThrow<MemmapError>(
      mm::OpenFileAt(AT_FDCWD, path, mode == MemmapMode::kReadWrite, path));
  return MemoryMappedTensor(
      ValueOrThrow<MemmapError>(mm::MapFile(fd.get(), path, dtype, shape.vec(), mode)));
}

std::optional<std::string> MemoryMappedTensor::filename_of(const at::Tensor& tensor) {
  const mm::Region* r = mm::RegionOf(tensor);
  if (r == nullptr) return std::nullopt;
  return r->path;
}

std::string MemoryMappedTensor::filename() const {
  const mm::Region* r = mm::RegionOf(*this);
  TORCH_CHECK(r != nullptr, "this MemoryMappedTensor holds no file mapping");
  return r->path;
}

MemmapMode MemoryMappedTensor::mode() const {
  const mm::Region* r = mm::RegionOf(*this);
  TORCH_CHECK(r != nullptr, "this MemoryMappedTensor holds no file mapping");
  return r->mode;
}

}  // namespace td
