#include "td/format/format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_join.h"
#include "td/compat/dtypes.h"
#include "td/core/errors.h"

namespace td {
namespace format {
namespace {

// Drivers are registered at program start and never removed: lookups hand out references to
// entries of this map (std::map: its nodes do not move).
struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<const Driver>, std::less<>> drivers;
};

Registry& GetRegistry() {
  static Registry* r = new Registry;  // never destroyed: static initialisers register into it
  return *r;
}

// Every registered driver, sorted by id.
std::vector<const Driver*> Drivers() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const Driver*> out;
  for (const auto& [id, d] : r.drivers) out.push_back(d.get());
  return out;
}

}  // namespace

std::vector<c10::ScalarType> EveryDtype() {
  std::vector<c10::ScalarType> out = {
      c10::kBool,  c10::kByte,     c10::kChar,  c10::kShort,  c10::kInt,          c10::kLong,
      c10::kHalf,  c10::kBFloat16, c10::kFloat, c10::kDouble, c10::kComplexFloat, c10::kComplexDouble};
  for (const compat::NewerDtypeInfo& d : compat::kNewerDtypes) {
    if (d.type) out.push_back(*d.type);
  }
  return out;
}

std::vector<c10::ScalarType> DtypesExcept(std::vector<c10::ScalarType> excluded, bool float8) {
  for (const compat::NewerDtypeInfo& d : compat::kNewerDtypes) {
    if (d.type && d.is_float8 && !float8) excluded.push_back(*d.type);
  }
  std::vector<c10::ScalarType> out;
  for (c10::ScalarType t : EveryDtype()) {
    if (std::find(excluded.begin(), excluded.end(), t) == excluded.end()) out.push_back(t);
  }
  return out;
}

bool DirectoryHolds(const std::string& path, std::string_view name) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const std::string file = path + "/" + std::string(name);
  return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> FileBytes(const std::string& path, int64_t offset, size_t n,
                                     bool from_end) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string out(n, '\0');
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && offset >= 0;
  const int64_t at = from_end ? st.st_size - offset : offset;
  ok = ok && at >= 0 && at + static_cast<int64_t>(n) <= st.st_size &&
       ::pread(fd, out.data(), n, at) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok ? std::optional<std::string>(std::move(out)) : std::nullopt;
}

bool RegisterDriver(Driver driver) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string id = driver.id;
  return r.drivers.emplace(std::move(id), std::make_unique<const Driver>(std::move(driver)))
      .second;
}

std::vector<std::string> RegisteredDrivers() {
  std::vector<std::string> ids;
  for (const Driver* d : Drivers()) ids.push_back(d->id);
  return ids;
}

const Driver& GetDriver(std::string_view id) {
  for (const Driver* d : Drivers()) {
    if (d->id == id) return *d;
  }
  TD_FAIL(KeyError, "no format driver '", std::string(id), "'; registered: [",
          absl::StrJoin(RegisteredDrivers(), ", "),
          "] (a format's driver is registered by linking its library: NOTE [ Format drivers ] in "
          "td/format/format.h)");
}

const Driver* DriverForSuffix(std::string_view path) {
  for (const Driver* d : Drivers()) {
    for (const std::string& suffix : d->suffixes) {
      if (d->is_path_format() && path.size() >= suffix.size() &&
          path.substr(path.size() - suffix.size()) == suffix) {
        return d;
      }
    }
  }
  return nullptr;
}

const Driver* DetectDriver(const std::string& path) {
  const Driver* found = nullptr;
  for (const Driver* d : Drivers()) {
    if (!d->is_path_format() || !d->detect || !d->detect(path)) continue;
    if (found != nullptr) {
      TD_FAIL(ValueError, path, " reads as two formats, '", found->id, "' and '", d->id,
              "'; name the one to use (LoadOptions::format)");
    }
    found = d;
  }
  return found;
}

}  // namespace format
}  // namespace td
