// libFuzzer target for the consolidated file's metadata reader (NOTE [ Consolidated file format ]
// in td/consolidate/file.h, td/consolidate/metadata.h): any bytes given as the metadata of a
// file with 4096 data bytes must give a td::MemmapError naming the file or a Description, never a
// crash, a stack overflow, a hang or another exception; and what is accepted must keep the
// reader's promises, which load_consolidated() relies on to build tensors:
//   * levels nest at most td::kMaxNestingDepth deep;
//   * every key is non-empty and names one entry of its level;
//   * every leaf's byte range lies inside the data and holds its shape; every shape and every
//     sub-level's batch size start with the level's batch size;
//   * dim names are one per batch dim (or none) and unique;
//   * a lazy stack's members share a batch size, which is its own without the stack dim; a
//     NonTensorStack's data is a list as long as its first batch dim, within the value budget.
// Built with clang by tests/fuzz/run.sh (`-fsanitize=fuzzer,address,undefined`), and replayed
// over the seed corpus by //tests/fuzz:consolidated_meta_replay_test in every normal test run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "td/consolidate/metadata.h"

namespace {

using td::structure::EntryKind;
using td::structure::Level;
using td::structure::LevelKind;

constexpr int64_t kDataBytes = 4096;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "metadata_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

bool StartsWith(const std::vector<int64_t>& shape, const std::vector<int64_t>& batch) {
  if (shape.size() < batch.size()) return false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (shape[i] != batch[i]) return false;
  }
  return true;
}

void CheckAccepted(const Level& level, int depth) {
  Require(depth <= td::kMaxNestingDepth, "a level deeper than td::kMaxNestingDepth");
  if (level.kind() == LevelKind::kNonTensorStack) {
    Require(!level.batch_size().empty() && level.info.data.is_array() &&
                static_cast<int64_t>(level.info.data.size()) == level.batch_size()[0],
            "a NonTensorStack's data does not match its batch size");
    Require(level.entries().empty(), "a NonTensorStack with entries");
    return;
  }
  if (level.kind() == LevelKind::kLazyStack) {
    const auto& members = level.entries();
    Require(!members.empty() && members[0].level && level.info.stack_dim >= 0 &&
                level.info.stack_dim <=
                    static_cast<int64_t>(members[0].level->batch_size().size()),
            "a lazy stack without members or with its stack_dim out of range");
    std::vector<int64_t> batch = members[0].level->batch_size();
    batch.insert(batch.begin() + level.info.stack_dim, static_cast<int64_t>(members.size()));
    Require(batch == level.batch_size(), "a lazy stack's batch size is not its members'");
    for (const auto& m : members) {
      Require(m.level != nullptr, "a lazy stack member that is not a level");
      Require(m.level->kind() != LevelKind::kNonTensorStack,
              "a lazy stack member is a NonTensorStack");
      Require(m.level->batch_size() == members[0].level->batch_size(),
              "lazy stack members differ in batch");
      CheckAccepted(*m.level, depth + 1);
    }
    return;
  }
  const auto& names_ = level.info.names;
  Require(names_.empty() || names_.size() == level.batch_size().size(),
          "dim names that are not one per batch dim");
  std::set<std::string> dim_names;
  for (const auto& n : names_) {
    Require(!n || dim_names.insert(*n).second, "a dim name repeats");
  }
  std::set<std::string> names;
  for (const auto& e : level.entries()) {
    Require(!e.key.empty(), "an empty key accepted");
    Require(names.insert(e.key).second, "two entries of one level share a name");
    if (e.kind == EntryKind::kLeaf) {
      const int64_t start = e.location.start, stop = e.location.stop;
      Require(start >= 0 && start <= stop && stop <= kDataBytes, "a byte range outside the data");
      Require(e.nbytes >= 0 && e.nbytes <= stop - start, "a byte range too small for the shape");
      int64_t numel = 1;
      for (int64_t d : e.shape) {
        Require(d >= 0, "a negative dim");
        numel *= d;
      }
      Require(numel * static_cast<int64_t>(c10::elementSize(e.dtype)) == e.nbytes,
              "nbytes is not the shape's");
      Require(StartsWith(e.shape, level.batch_size()), "a leaf that does not fit the batch size");
    } else if (e.kind == EntryKind::kLevel) {
      Require(StartsWith(e.level->batch_size(), level.batch_size()),
              "a sub-level that does not fit the batch size");
      CheckAccepted(*e.level, depth + 1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    CheckAccepted(td::internal::ParseFileMetadata(text, "fuzz.td", kDataBytes).root(), 0);
  } catch (const td::MemmapError& e) {
    Require(std::string(e.what_without_backtrace()).find("fuzz.td") != std::string::npos,
            "an error does not name the file");
  }
  return 0;
}
