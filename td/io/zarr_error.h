// ZarrError, the error of Zarr stores (td/io/zarr.h), in a header of its own so that the format
// code (//td/io:zarr_format, which its fuzz target builds alone) needs nothing of the rest.
#pragma once

#include <c10/util/Exception.h>

namespace td {

// A Zarr store that cannot be read or written, or whose content does not fit a TensorDict (an
// array whose leading dims disagree with the batch size, a truncated chunk, a compressor, a FIFO
// or a directory symlink, a fill value the dtype cannot hold, malformed metadata): the message
// names the store path, the array or group and the problem.
class ZarrError : public c10::Error {
 public:
  using c10::Error::Error;
};

}  // namespace td
