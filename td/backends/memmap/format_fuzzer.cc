// libFuzzer target for the memmap metadata reader (NOTE [ Memmap directory format ]): any bytes
// given as a level's meta.json, a non-tensor entry's meta.json, or a key must give a status or a
// value, never a crash, a hang or an uncaught exception; and what is accepted must keep the
// reader's promises:
//   * every entry's file name stays inside its directory (no '/', never "." or "..");
//   * tensor shapes start with the batch size and their byte counts do not overflow;
//   * writing an accepted meta.json back and reading it again gives the same metadata;
//   * EscapeKey / UnescapeKey are inverse and escaped names never leave the directory;
//   * raw (pre-0.13) file names and nested tensors' sizes files never leave it either;
//   * any directory's meta.json (lazy stack, NonTensorStack, tensorclass) parses or is refused.
// Built with clang by tests/fuzz/run.sh (`-fsanitize=fuzzer,address,undefined`), and replayed
// over the seed corpus by //tests/fuzz:memmap_meta_replay_test in every normal test run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "td/backends/memmap/format.h"

namespace {

using td::internal::memmap::EntryKind;
using td::internal::memmap::LevelMeta;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "format_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

bool SafeName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

void CheckAccepted(const LevelMeta& meta) {
  for (const auto& e : meta.entries) {
    Require(SafeName(e.file_name), "an entry's file name leaves its directory");
    Require(e.file_name == td::internal::memmap::EntryFileName(e.key, e.kind), "file name != key's");
    Require(e.legacy_file_name.empty() || SafeName(e.legacy_file_name),
            "an entry's legacy file name leaves its directory");
    Require(e.legacy_file_name.empty() || (e.legacy_file_name.find('\\') == std::string::npos &&
                                           e.legacy_file_name != e.file_name),
            "a legacy file name with a backslash, or equal to the escaped one");
    if (e.kind != EntryKind::kTensor) continue;
    Require(e.nbytes >= 0, "negative byte count");
    if (e.is_nested) {
      Require(e.shape.size() == 2, "a nested tensor's sizes are not [components, dims]");
      Require(meta.batch_size.empty() || e.shape[0] == meta.batch_size[0],
              "a nested tensor's components do not match the batch size");
      Require(SafeName(td::internal::memmap::NestedShapeFileName(e.file_name)),
              "a nested tensor's sizes file leaves its directory");
      continue;
    }
    Require(e.shape.size() >= meta.batch_size.size(), "shape shorter than the batch size");
    for (size_t i = 0; i < meta.batch_size.size(); ++i) {
      Require(e.shape[i] == meta.batch_size[i], "shape does not start with the batch size");
    }
  }
  // Round trip: what was accepted is written back and read again identically.
  const std::string again = td::internal::memmap::LevelMetaJson(meta);
  absl::StatusOr<LevelMeta> back = td::internal::memmap::ParseLevelMeta(again, "again/meta.json");
  Require(back.ok(), "a written meta.json is refused");
  Require(back->batch_size == meta.batch_size, "round trip changed the batch size");
  Require(back->entries.size() == meta.entries.size(), "round trip changed the entries");
  for (size_t i = 0; i < meta.entries.size(); ++i) {
    const auto& a = meta.entries[i];
    const auto& b = back->entries[i];
    Require(a.key == b.key && a.kind == b.kind && a.file_name == b.file_name &&
                a.legacy_file_name == b.legacy_file_name && a.type_name == b.type_name &&
                a.is_nested == b.is_nested,
            "round trip changed an entry");
    if (a.kind == EntryKind::kTensor) {
      Require(a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes,
              "round trip changed a tensor entry");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<LevelMeta> meta = td::internal::memmap::ParseLevelMeta(text, "fuzz/meta.json");
  if (meta.ok()) {
    CheckAccepted(*meta);
  } else {
    Require(meta.status().message().find("fuzz/meta.json") != absl::string_view::npos,
            "an error does not name the file");
  }

  // Any directory's meta.json: a status or a value; stacks have a stack dim in range, and a
  // NonTensorStack's data is a list.
  absl::StatusOr<td::internal::memmap::DirMeta> dir = td::internal::memmap::ParseDirMeta(text, "fuzz/d");
  if (dir.ok()) {
    using td::internal::memmap::DirType;
    if (dir->type == DirType::kLazyStack || dir->type == DirType::kNonTensorStack) {
      Require(dir->stack_dim >= 0, "negative stack dim accepted");
    }
    if (dir->type == DirType::kNonTensorStack) Require(dir->data.is_array(), "stack data not a list");
    if (dir->type == DirType::kTensorDict) CheckAccepted(dir->level);
  } else {
    Require(dir.status().message().find("fuzz/d") != absl::string_view::npos,
            "an error does not name the file");
  }

  absl::StatusOr<nlohmann::json> data_value =
      td::internal::memmap::ParseNonTensorMeta(text, "fuzz/s/meta.json");
  if (data_value.ok()) {
    // Accepted data is written back and read again identically.
    absl::StatusOr<nlohmann::json> again = td::internal::memmap::ParseNonTensorMeta(
        td::internal::memmap::NonTensorMetaJson(*data_value), "again");
    Require(again.ok() && *again == *data_value, "non-tensor data does not round-trip");
  }

  const std::string key(text);
  const std::string name = td::internal::memmap::EscapeKey(key);
  Require(SafeName(name), "an escaped key leaves its directory");
  std::optional<std::string> back = td::internal::memmap::UnescapeKey(name);
  Require(back.has_value() && *back == key, "UnescapeKey(EscapeKey(k)) != k");
  if (std::optional<std::string> k = td::internal::memmap::UnescapeKey(key)) {
    Require(td::internal::memmap::EscapeKey(*k) == key, "EscapeKey(UnescapeKey(n)) != n");
  }
  return 0;
}
