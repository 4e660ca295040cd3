// The consolidated file writer's internals (consolidate.cc and file.cc), beside the public
// save_consolidated / load_consolidated of td/consolidate/file.h.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "td/consolidate/internal/layout.h"
#include "td/core/tensordict.h"
#include "td/os/files.h"

namespace td {

namespace internal {

// What a file of `td` laid out as `layout` (which describes td's leaves) holds after its data:
// the metadata text, then its length (8 bytes). Throws as save_consolidated() (file.h), naming
// `filename` for text that is not UTF-8.
std::string MetadataTail(const TensorDict& td, const BufferLayout& layout,
                         const std::string& filename);

// Writes the consolidated file `filename`: `bytes` (1-D uint8 on the CPU: the data), then
// `tail` (MetadataTail), with pwrite(2) into a PendingFile.
void WriteFile(const std::string& filename, const std::string& tail, const at::Tensor& bytes);

// A file being written under a temporary name next to `filename`, `tail` after `data_bytes`
// bytes; with `map`, mapped shared for the caller to fill. Commit() renames it into place;
// destroyed without it, the temporary file is removed (os::FileReplacement).
class PendingFile {
 public:
  PendingFile(std::string filename, int64_t data_bytes, const std::string& tail, bool map = true);
  const at::Tensor& mapping() const { return mapping_; }
  const os::FileReplacement& file() const { return file_; }
  void Commit();

 private:
  std::string filename_;
  os::FileReplacement file_;
  at::Tensor mapping_;  // unmapped before file_ removes an uncommitted temporary
};

}  // namespace internal
}  // namespace td
