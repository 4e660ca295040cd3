// MemoryMappedTensor: a CPU tensor whose memory is a file mapping (Python tensordict's
// MemoryMappedTensor). It is an at::Tensor (every LibTorch op works on it); views and indexing
// results keep sharing the mapping, so `t.index({idx})` reads only the rows it touches.
//
//   auto t = td::MemoryMappedTensor::from_tensor(at::arange(10), "/tmp/x.memmap");
//   t.add_(1);                                            // writes go to the file
//   auto back = td::MemoryMappedTensor::from_filename("/tmp/x.memmap", at::kLong, {10});
//   std::string f = *td::MemoryMappedTensor::filename_of(back.narrow(0, 2, 3));
//
// The file holds exactly the tensor's C-order bytes, nothing else (the `.memmap` leaf files of
// NOTE [ Memmap directory format ] in td/backends/memmap/format.h). The mapping lives as long
// as any tensor or view using it; the file stays on disk.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// td::MemmapError is declared in td/core/errors.h (TensorDict::load_memmap throws it).

class MemoryMappedTensor : public at::Tensor {
 public:
  MemoryMappedTensor() = default;

  // A new file `filename` holding a copy of `tensor`'s values (any device, any strides), mapped
  // read-write. An existing file is replaced only with `exists_ok` (ValueError otherwise); a
  // symlink there is always refused. Throws MemmapError on I/O failure, ValueError for a
  // non-strided tensor.
  static MemoryMappedTensor from_tensor(const at::Tensor& tensor, const std::string& filename,
                                        bool exists_ok = false);
  // A new zero-filled file for a tensor of `shape` and `dtype`. The file is sparse: nothing is
  // written and no RAM is used until elements are touched. Throws as from_tensor().
  static MemoryMappedTensor empty(at::IntArrayRef shape, const std::string& filename,
                                  at::ScalarType dtype = at::kFloat, bool exists_ok = false);
  static MemoryMappedTensor zeros(at::IntArrayRef shape, const std::string& filename,
                                  at::ScalarType dtype = at::kFloat, bool exists_ok = false);
  static MemoryMappedTensor ones(at::IntArrayRef shape, const std::string& filename,
                                 at::ScalarType dtype = at::kFloat, bool exists_ok = false);
  static MemoryMappedTensor full(at::IntArrayRef shape, const at::Scalar& fill_value,
                                 const std::string& filename, at::ScalarType dtype = at::kFloat,
                                 bool exists_ok = false);
  // Maps an existing file as a tensor of `dtype` and `shape`. The file's size must be exactly
  // numel x element size: MemmapError names the file and both sizes otherwise.
  //   auto labels = td::MemoryMappedTensor::from_filename("/data/labels.memmap", at::kInt, {n});
  static MemoryMappedTensor from_filename(const std::string& filename, at::ScalarType dtype,
                                          at::IntArrayRef shape,
                                          MemmapMode mode = MemmapMode::kReadWrite);

  // The file `tensor` (or the tensor it is a view of) maps, or nullopt when its memory is not a
  // file mapping made by this library.
  static std::optional<std::string> filename_of(const at::Tensor& tensor);
  static bool is_memory_mapped(const at::Tensor& tensor) { return filename_of(tensor).has_value(); }

  // The mapped file (absolute path) and how it is mapped.
  std::string filename() const;
  MemmapMode mode() const;

 private:
  explicit MemoryMappedTensor(at::Tensor t) : at::Tensor(std::move(t)) {}
};

}  // namespace td
