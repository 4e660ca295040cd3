// Tensorclass directories: NOTE [ Tensorclass directory layout ] (td/tensorclass/memmap.h).
#include "td/tensorclass/memmap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/os/files.h"

namespace td {
namespace internal::tensorclass {
namespace {

using os::JoinPath;

constexpr std::string_view kMeta = "meta.json";
constexpr std::string_view kInner = "_tensordict";
constexpr std::string_view kTensorDictType = "<class 'tensordict._td.TensorDict'>";

// lstat(2)'s st_mode of `path`, 0 (errno set) when it cannot be had.
mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}
bool IsEmptyDir(const std::string& path) {
  const os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot open directory", path));
  return ValueOrThrow<MemmapError>(os::ListDir(fd.get(), path)).empty();
}

// meta.json of `prefix`, parsed (nullopt when absent, MemmapError when `required`). Throws
// MemmapError when it is not a JSON object with a string "_type".
std::optional<nlohmann::json> ReadMeta(const std::string& prefix, bool required) {
  const std::string path = JoinPath(prefix, kMeta);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (required) TD_FAIL(MemmapError, path, ": missing (not a memmap directory)");
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) TD_FAIL(MemmapError, path, " is not a regular file");
  if (st.st_size > (int64_t{64} << 20)) TD_FAIL(MemmapError, path, " is larger than 64 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowIfError<MemmapError>(os::ErrnoError(errno, "cannot open", path));
  std::stringstream buf;
  buf << in.rdbuf();
  // NOTE [ Untrusted JSON ] in td/core/internal/structure_check.h.
  absl::StatusOr<nlohmann::json> parsed = ParseUntrustedJson<nlohmann::json>(buf.str());
  if (!parsed.ok()) TD_FAIL(MemmapError, path, ": ", parsed.status().message());
  nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("_type") || !j["_type"].is_string()) {
    TD_FAIL(MemmapError, path, ": expected a JSON object with a string \"_type\"");
  }
  return j;
}

// "a.b.C" from "<class 'a.b.C'>" (the string itself when it has another form).
std::string QualifiedName(const std::string& type) {
  const std::string open = "<class '";
  if (type.size() > open.size() + 2 && type.compare(0, open.size(), open) == 0 &&
      type.compare(type.size() - 2, 2, "'>") == 0) {
    return type.substr(open.size(), type.size() - open.size() - 2);
  }
  return type;
}
std::string LastComponent(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// The fields' TensorDict of a tensorclass directory, with meta.json's top-level fields merged.
TensorDict LoadFields(const std::string& prefix, const nlohmann::json& meta,
                      const LoadMemmapOptions& options, const std::vector<std::string_view>* fields,
                      std::string_view cls) {
  const std::string pickle = JoinPath(prefix, "other.pickle");
  if (ModeOf(pickle) != 0) {
    TD_FAIL(MemmapError, pickle, ": pickled non-tensor fields are not loaded (pickle can run "
            "code); store them as JSON-serialisable values");
  }
  const std::string inner = JoinPath(prefix, kInner);
  const mode_t mode = ModeOf(inner);
  const int err = errno;
  if (!S_ISDIR(mode)) {
    const std::string what =
        mode == 0       ? (err == ENOENT ? "missing"
                                         : absl::StrCat("unreadable (", std::strerror(err), ")"))
        : S_ISLNK(mode) ? "a symlink (refused, as everywhere in memmap "
                          "directories)"
        : S_ISREG(mode) ? "a regular file"
                        : "a special file";
    TD_FAIL(MemmapError, inner, " is ", what,
            ", but a tensorclass directory keeps its fields in the directory _tensordict");
  }
  TensorDict td = TensorDict::load_memmap(inner, options);
  std::vector<std::pair<std::string, nlohmann::json>> extra;
  for (const auto& [key, value] : meta.items()) {
    if (key == "_type" || value.is_null()) continue;
    if (fields && std::find(fields->begin(), fields->end(), key) == fields->end()) {
      TD_FAIL(MemmapError, JoinPath(prefix, kMeta), ": non-tensor field '", key,
              "' is not a field of ", cls);
    }
    if (td.contains(key)) {
      TD_FAIL(MemmapError, JoinPath(prefix, kMeta), ": field '", key,
              "' is stored both in meta.json and in _tensordict");
    }
    extra.emplace_back(key, value);
  }
  if (!extra.empty()) {
    td = td.copy();
    td.unlock_();
    for (auto& [key, value] : extra) td.set_non_tensor(key, std::move(value));
  }
  return td;
}

struct Registered {
  std::type_index type;
  std::string cls;
  ClassFactory factory;
};
// register_tensorclass's classes by Python name, under `mutex`.
struct Registry {
  std::mutex mutex;
  std::map<std::string, Registered> classes;
};
Registry& TheRegistry() {
  static auto* r = new Registry;
  return *r;
}

// The class registered as `qual`, else as its last component alone (ValueError when two are).
std::optional<Registered> FindClass(const std::string& qual, const std::string& type) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.classes.find(qual);
  if (it == r.classes.end()) {
    const std::string last = LastComponent(qual);
    for (auto i = r.classes.begin(); i != r.classes.end(); ++i) {
      if (LastComponent(i->first) != last) continue;
      if (it != r.classes.end()) {
        TD_FAIL(ValueError, "load_memmap_any: ", type, " matches both ", it->first, " and ",
                i->first, " by class name; register the full name ", qual);
      }
      it = i;
    }
  }
  if (it == r.classes.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::string PrepareClassDir(const std::string& prefix, bool exists_ok) {
  if (prefix.empty()) TD_FAIL(ValueError, "memmap: empty prefix");
  if (const mode_t mode = ModeOf(prefix); mode != 0) {
    if (!S_ISDIR(mode)) TD_FAIL(ValueError, "memmap: ", prefix, " exists and is not a directory");
    std::optional<nlohmann::json> meta = ReadMeta(prefix, /*required=*/false);
    if (meta) {
      if ((*meta)["_type"].get<std::string>() == kTensorDictType) {
        TD_FAIL(ValueError, "memmap: ", prefix, " holds a TensorDict memmap directory; a "
                         "tensorclass is written as meta.json + _tensordict/, choose another "
                         "prefix or remove it");
      }
      if (!exists_ok) {
        TD_FAIL(ValueError, "memmap: ", prefix, " already holds a tensorclass directory and "
                         "MemmapOptions::exists_ok is false");
      }
    } else if (!IsEmptyDir(prefix)) {
      TD_FAIL(ValueError, "memmap: ", prefix, " is a non-empty directory without meta.json (not a "
                       "memmap directory); it is never written into");
    }
  } else {
    ThrowIfError<MemmapError>(os::MakeDirs(prefix));
  }
  return JoinPath(prefix, kInner);
}

void WriteClassMeta(const std::string& prefix, std::string_view python_name, bool fsync) {
  static std::atomic<uint64_t> counter{0};
  const std::string data = nlohmann::json{{"_type", PythonTypeString(python_name)}}.dump();
  const std::string tmp = JoinPath(prefix, absl::StrCat(".td-tmp-meta-", ::getpid(), "-",
                                                    counter.fetch_add(1), ".json"));
  const std::string path = JoinPath(prefix, kMeta);
  // The file's content is durable (fsynced) before its name replaces the old one.
  ThrowIfError<MemmapError>(
      os::ReplaceFileAt(AT_FDCWD, path, tmp, path, /*sync=*/true, [&](int fd) {
        return os::WriteAll(fd, data.data(), data.size(), tmp);
      }));
  if (fsync) ThrowIfError<MemmapError>(os::SyncDirPath(prefix));
}

TensorDict LoadClassTensorDict(const std::string& prefix, std::string_view cls,
                               std::string_view python_name, const LoadMemmapOptions& options,
                               const std::vector<std::string_view>& fields) {
  std::optional<nlohmann::json> meta = ReadMeta(prefix, /*required=*/true);
  const std::string type = (*meta)["_type"].get<std::string>();
  if (type == kTensorDictType) {
    TD_FAIL(MemmapError, prefix, " holds a TensorDict, not a ", cls,
                      " (load it with TensorDict::load_memmap and ", cls,
                      "::from_tensordict)");
  }
  const std::string qual = QualifiedName(type);
  const std::string want(python_name);
  if (qual != want && LastComponent(qual) != LastComponent(want)) {
    TD_FAIL(MemmapError, JoinPath(prefix, kMeta), ": \"_type\" is ", type, ", but ", cls, " is ",
                      PythonTypeString(want));
  }
  return LoadFields(prefix, *meta, options, &fields, cls);
}

void RegisterClass(const std::string& python_name, const std::type_info& type, const char* cls,
                   ClassFactory factory) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.classes.find(python_name);
  if (it != r.classes.end()) {
    if (it->second.type == std::type_index(type)) return;
    TD_FAIL(ValueError, "register_tensorclass: '", python_name, "' is already registered for ",
                     it->second.cls, ", cannot register ", cls);
  }
  r.classes.emplace(python_name, Registered{std::type_index(type), cls, std::move(factory)});
}

}  // namespace internal::tensorclass

LoadedMemmap load_memmap_any(const std::string& prefix, const LoadMemmapOptions& options) {
  namespace tc = internal::tensorclass;
  const nlohmann::json meta = *tc::ReadMeta(prefix, /*required=*/true);
  const std::string type = meta["_type"].get<std::string>();
  const std::string qual = tc::QualifiedName(type);
  if (!S_ISDIR(tc::ModeOf(internal::os::JoinPath(prefix, tc::kInner)))) {
    // Not a tensorclass directory: a TensorDict (or whatever the core loader accepts).
    return LoadedMemmap(qual, TensorDict::load_memmap(prefix, options), std::any());
  }
  const std::optional<tc::Registered> found = tc::FindClass(qual, type);
  TensorDict td = tc::LoadFields(prefix, meta, options, nullptr, found ? found->cls : qual);
  std::any object = found ? found->factory(td) : std::any();
  return LoadedMemmap(qual, std::move(td), std::move(object));
}

}  // namespace td
