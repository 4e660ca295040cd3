#include "td/io/schema.h"

#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <set>

#include "td/backends/h5/h5.h"
#include "td/core/errors.h"

namespace td {

TensorDict from_schema(const Schema& schema, const FromSchemaOptions& options) {
  const SchemaStorage storage = options.storage();
  const bool on_disk = storage == SchemaStorage::kMemmap || storage == SchemaStorage::kH5;
  if (on_disk && options.device()) {
    TD_FAIL(ValueError, "from_schema: a device applies to dense and shared storage only, got ",
            *options.device());
  }
  if (storage == SchemaStorage::kMemmap && options.prefix().empty()) {
    TD_FAIL(ValueError, "from_schema: memmap storage needs a prefix (the directory)");
  }
  if (storage == SchemaStorage::kH5 && options.filename().empty()) {
    TD_FAIL(ValueError, "from_schema: h5 storage needs a filename");
  }
  const std::vector<int64_t>& batch = options.batch_size();
  for (int64_t d : batch) {
    if (d < 0) TD_FAIL(ValueError, "from_schema: batch_size ", c10::IntArrayRef(batch), " has a negative dim");
  }
  std::set<NestedKey> seen;
  TensorDict out({}, batch, on_disk ? std::nullopt : options.device());
  for (const auto& [key, field] : schema) {
    if (!seen.insert(key).second) TD_FAIL(ValueError, "from_schema: key ", key.repr(), " is given twice");
    std::vector<int64_t> shape = batch;
    for (int64_t d : field.shape) {
      if (d < 0) {
        TD_FAIL(ValueError, "from_schema: key ", key.repr(), " has the element shape ",
                c10::IntArrayRef(field.shape), " with a negative dim");
      }
      shape.push_back(d);
    }
    at::TensorOptions o = at::TensorOptions().dtype(field.dtype);
    if (!on_disk && options.device()) o = o.device(*options.device());
    // On disk, an expanded scalar: nothing the size of the data is allocated in memory.
    out.set(key, on_disk ? at::scalar_tensor(0, o).expand(shape) : at::zeros(shape, o));
  }
  switch (storage) {
    case SchemaStorage::kDense:
      return out;
    case SchemaStorage::kMemmap:
      return out.memmap_like(options.prefix());
    case SchemaStorage::kShared:
      out.share_memory_();
      return out;
    case SchemaStorage::kH5:
      return h5::to_h5(out, options.filename());
  }
  TD_FAIL(ValueError, "from_schema: unknown storage");
}

}  // namespace td
