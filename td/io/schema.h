// Upstream's `TensorDict.from_schema`: a zero-filled TensorDict preallocated from a schema of
// (element shape, dtype) per key, on the storage asked for.
//
//   td::TensorDict buffer = td::from_schema({{"obs", {{84, 84, 3}, at::kByte}},
//                                            {{"next", "reward"}, {{}, at::kFloat}}},
//                                           td::FromSchemaOptions().batch_size({1000}));
//   // buffer.get("obs"): uint8 [1000, 84, 84, 3]; buffer.get({"next", "reward"}): float [1000]
//   auto ds = td::from_schema(schema, td::FromSchemaOptions().batch_size({1000000})
//                                         .storage(td::SchemaStorage::kMemmap).prefix("/data/ds"));
// Bazel: //td/io:schema (links the memmap, shared-memory and HDF5 backends). See docs/io.md.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// One key of a schema: the shape of one element (the batch dims are prepended) and the dtype.
struct FieldSchema {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
};
// Keys in order; a nested key creates its levels (with the same batch size).
using Schema = std::vector<std::pair<NestedKey, FieldSchema>>;

// Upstream's `storage=` selector (its "redis" / "dragonfly" stores and "zarr" PersistentTensorDict
// have no counterpart: write a zero store with td::to_zarr(from_schema(...), path) instead).
enum class SchemaStorage {
  kDense,   // plain tensors (upstream's None)
  kMemmap,  // memory-mapped files at `prefix`, created sparse (memmap_like): "memmap"
  kShared,  // one block of shared memory (share_memory_): "shared"
  kH5,      // an HDF5 file at `filename`, opened read-write (td::h5::to_h5): "h5"
};

struct FromSchemaOptions {
  // Prepended to every element shape; the result's batch size.
  TORCH_ARG(std::vector<int64_t>, batch_size) = {};
  // Where the zeros live (kDense and kShared only).
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  TORCH_ARG(SchemaStorage, storage) = SchemaStorage::kDense;
  // kMemmap: the directory (upstream's `prefix=`).
  TORCH_ARG(std::string, prefix) = "";
  // kH5: the file (upstream's `filename=`), replaced when it exists.
  TORCH_ARG(std::string, filename) = "";
};

// A TensorDict holding zeros of shape [*batch_size, *shape] and the schema's dtype under each
// key. Throws ValueError naming the key for a negative dim or a key given twice, and for options
// that do not fit the storage (no prefix / filename, a device with kMemmap or kH5); what
// memmap_like, share_memory_ and to_h5 throw.
TensorDict from_schema(const Schema& schema, const FromSchemaOptions& options = {});

}  // namespace td
