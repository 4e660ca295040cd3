// ZarrError, the error of Zarr stores (td/io/zarr.h), in a header of its own so that the format
// code (//td/io:zarr_format, which its fuzz target builds alone) needs nothing of the rest.
#pragma once

#include <c10/util/Exception.h>

namespace td {

// A Zarr store that cannot be read or written, or whose content does not fit a TensorDict
// (malformed or unsupported metadata, a bad chunk, leading dims that are not the batch size, a
// directory symlink or non-regular file); the message names the store, the node and the problem.
class ZarrError : public c10::Error {
 public:
  using c10::Error::Error;
};

}  // namespace td
