// The "shm_handle" format driver (NOTE [ Format drivers ] in td/format/format.h): the handle of a
// TensorDict in shared memory, NOTE [ Shared-memory handles ] in handle.h. Its bytes name memory
// the encoding process holds: encode takes a TensorDict already in shared memory
// (share_memory_()), and a decode sees that memory while the TensorDict lives.
#include <string>

#include "td/backends/shared_memory/shared_memory.h"
#include "td/format/format.h"

namespace td {
namespace {

format::Driver HandleDriver() {
  format::Driver d;
  d.id = "shm_handle";
  d.summary = "a shared-memory handle: JSON naming the segments of a TensorDict in shared memory "
              "(SharedMemoryHandle / AttachSharedMemory)";
  d.traits.dtypes = format::EveryDtype();
  d.encode = [](const TensorDict& td) { return SharedMemoryHandle(td); };
  d.decode = [](const std::string& handle) { return AttachSharedMemory(handle); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(HandleDriver());

}  // namespace
}  // namespace td
