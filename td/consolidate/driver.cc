// The "consolidated" format driver (NOTE [ Format drivers ] in td/format/format.h): one file,
// NOTE [ Consolidated file format ] in file.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "td/consolidate/file.h"
#include "td/format/format.h"

namespace td {
namespace {

// A regular file ending in [metadata | n] whose n fits and whose metadata is a JSON object that
// starts with a "cls" field, as both writers put it first ('{"cls":' here, '{"cls": ' Python's).
bool IsConsolidatedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 8 + 8;
  int64_t n = 0;
  char head[7] = {};
  if (ok) ok = ::pread(fd, &n, 8, st.st_size - 8) == 8 && n >= 8 && n <= st.st_size - 8;
  if (ok) ok = ::pread(fd, head, 7, st.st_size - 8 - n) == 7;
  ::close(fd);
  return ok && std::memcmp(head, "{\"cls\":", 7) == 0;
}

format::Driver ConsolidatedDriver() {
  format::Driver d;
  d.id = "consolidated";
  d.summary = "a consolidated file: every leaf in one buffer, JSON metadata at its end (Python "
              "tensordict's consolidate(filename=...) / from_consolidated)";
  // Upstream 0.14 can neither write nor read float8 in this format.
  d.traits.dtypes = format::DtypesExcept({}, /*float8=*/false);
  d.traits.meta_data = false;  // written and read as NonTensorData, as upstream's
  d.traits.names = true;
  d.traits.keeps_key_order = false;  // a level reads non-tensors, leaves, then sub-levels
  d.detect = IsConsolidatedFile;
  d.save = [](const TensorDict& td, const std::string& path) { save_consolidated(td, path); };
  d.load = [](const std::string& path) { return load_consolidated(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(ConsolidatedDriver());

}  // namespace
}  // namespace td
