// libFuzzer target for the consolidated file's metadata reader (NOTE [ Consolidated file format ]
// in td/consolidate/file.h, td/consolidate/metadata.h): any bytes given as the metadata of a
// file with 4096 data bytes must give a td::MemmapError naming the file or a LevelMeta, never a
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

using td::internal::LevelMeta;

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

void CheckAccepted(const LevelMeta& level, int depth) {
  Require(depth <= td::kMaxNestingDepth, "a level deeper than td::kMaxNestingDepth");
  using td::internal::LevelKind;
  if (level.kind == LevelKind::kNonTensorStack) {
    Require(!level.batch_size.empty() && level.data.is_array() &&
                static_cast<int64_t>(level.data.size()) == level.batch_size[0],
            "a NonTensorStack's data does not match its batch size");
    Require(level.subs.empty() && level.leaves.empty(), "a NonTensorStack with entries");
    return;
  }
  if (level.kind == LevelKind::kLazyStack) {
    Require(!level.subs.empty() && level.stack_dim >= 0 &&
                level.stack_dim <= static_cast<int64_t>(level.subs[0].batch_size.size()),
            "a lazy stack without members or with its stack_dim out of range");
    std::vector<int64_t> batch = level.subs[0].batch_size;
    batch.insert(batch.begin() + level.stack_dim, static_cast<int64_t>(level.subs.size()));
    Require(batch == level.batch_size, "a lazy stack's batch size is not its members'");
    for (const auto& sub : level.subs) {
      Require(sub.kind != LevelKind::kNonTensorStack, "a lazy stack member is a NonTensorStack");
      Require(sub.batch_size == level.subs[0].batch_size, "lazy stack members differ in batch");
      CheckAccepted(sub, depth + 1);
    }
    return;
  }
  Require(level.names.empty() || level.names.size() == level.batch_size.size(),
          "dim names that are not one per batch dim");
  std::set<std::string> dim_names;
  for (const auto& n : level.names) {
    Require(!n || dim_names.insert(*n).second, "a dim name repeats");
  }
  std::set<std::string> names;
  auto name = [&](const std::string& k) {
    Require(!k.empty(), "an empty key accepted");
    Require(names.insert(k).second, "two entries of one level share a name");
  };
  for (const auto& nt : level.non_tensors) name(nt.key);
  for (const auto& leaf : level.leaves) {
    name(leaf.key);
    Require(leaf.start >= 0 && leaf.start <= leaf.stop && leaf.stop <= kDataBytes,
            "a byte range outside the data");
    Require(leaf.nbytes >= 0 && leaf.nbytes <= leaf.stop - leaf.start,
            "a byte range too small for the shape");
    int64_t numel = 1;
    for (int64_t d : leaf.shape) {
      Require(d >= 0, "a negative dim");
      numel *= d;
    }
    Require(numel * static_cast<int64_t>(c10::elementSize(leaf.dtype)) == leaf.nbytes,
            "nbytes is not the shape's");
    Require(StartsWith(leaf.shape, level.batch_size), "a leaf that does not fit the batch size");
  }
  for (const auto& sub : level.subs) {
    name(sub.key);
    Require(StartsWith(sub.batch_size, level.batch_size),
            "a sub-level that does not fit the batch size");
    CheckAccepted(sub, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    CheckAccepted(td::internal::ParseFileMetadata(text, "fuzz.td", kDataBytes), 0);
  } catch (const td::MemmapError& e) {
    Require(std::string(e.what_without_backtrace()).find("fuzz.td") != std::string::npos,
            "an error does not name the file");
  }
  return 0;
}
