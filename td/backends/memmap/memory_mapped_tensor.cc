#include "td/backends/memmap/memory_mapped_tensor.h"

#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
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

const Region& MappedRegionOf(const at::Tensor& t) {
  const Region* r = RegionOf(t);
  TORCH_CHECK(r != nullptr, "this MemoryMappedTensor holds no file mapping");
  return *r;
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) {
    std::error_code ec;
    p = std::filesystem::current_path(ec) / p;
    if (ec) TD_FAIL(MemmapError, "cannot make ", path, " absolute: ", ec.message());
  }
  std::string out = p.lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();  // "/a/b/" from "/a/b/c/.."
  return out;
}

absl::StatusOr<at::Tensor> MapFile(int fd, const std::string& path, c10::ScalarType dtype,
                                   const std::vector<int64_t>& shape, MemmapMode mode) {
  absl::StatusOr<int64_t> nbytes = internal::memmap::TensorBytes(shape, dtype, path);
  if (!nbytes.ok()) return nbytes.status();
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (st.st_size != *nbytes) {
    return absl::DataLossError(absl::StrCat(
        path, " has ", st.st_size, " bytes, but a tensor of shape ", SizeRepr(shape), " and dtype ",
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

absl::Status CheckStrided(const at::Tensor& t, std::string_view what) {
  // A nested (ragged) tensor reports the strided layout: is_nested() is what tells it apart.
  if (!t.is_nested() && t.layout() == at::kStrided) return absl::OkStatus();
  return absl::InvalidArgumentError(
      c10::str(what, " holds a ", t.is_nested() ? "nested (ragged)" : c10::str(t.layout()),
               " tensor; only strided (dense) tensors can be memory-mapped",
               t.is_nested() ? " (TensorDict::to_padded_tensor pads it into one)" : ""));
}

absl::Status WriteTensor(int fd, const at::Tensor& tensor, const std::string& path) {
  if (absl::Status s = CheckStrided(tensor, path); !s.ok()) return s;
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
    return os::WriteAll(fd, t.data_ptr(), static_cast<size_t>(total), path);
  }
  // Copy at most ~64 MiB at a time, so an expanded or strided view never materialises whole.
  if (t.dim() == 0) t = t.reshape({1});
  const int64_t rows = t.size(0);
  const int64_t row_bytes = total / rows;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(row_bytes, 1));
  for (int64_t r = 0; r < rows; r += chunk) {
    at::Tensor c = t.narrow(0, r, std::min(chunk, rows - r)).to(at::kCPU).contiguous();
    absl::Status s =
        os::WriteAll(fd, c.data_ptr(), static_cast<size_t>(c.numel() * c.element_size()), path);
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
  absl::StatusOr<UniqueFd> created = mm::OpenFileAt(AT_FDCWD, path, /*writable=*/true, path,
                                                    O_CREAT | (exists_ok ? O_TRUNC : O_EXCL));
  if (absl::IsAlreadyExists(created.status())) {
    TD_FAIL(ValueError, "MemoryMappedTensor: file ", path,
                     " already exists (pass exists_ok = true to replace it)");
  }
  const UniqueFd fd = ValueOrThrow<MemmapError>(std::move(created));
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
  ThrowIfError(mm::CheckStrided(tensor, "MemoryMappedTensor::from_tensor: the tensor"));
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

std::string MemoryMappedTensor::filename() const { return mm::MappedRegionOf(*this).path; }

MemmapMode MemoryMappedTensor::mode() const { return mm::MappedRegionOf(*this).mode; }

}  // namespace td
