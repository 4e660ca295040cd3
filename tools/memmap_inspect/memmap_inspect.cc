// memmap_inspect: validates a memmap directory (written by TensorDict::memmap or by Python
// tensordict) and prints what it holds, without modifying anything (files are opened
// read-only).
//
//   memmap_inspect DIR [KEY...]
//
// KEY... opens a sub-TensorDict only (as LoadMemmapOptions().sub_path({KEY...})). Prints the
// TensorDict as Python prints it, then one line per tensor: key, dtype, shape, bytes, file.
// Exits 0 when the directory is valid; 1 with the problem (the file and what is wrong) otherwise.
// Also lists the temporaries (".td-tmp-...") a killed writer left in or next to DIR: loading
// ignores them and the next write there removes them.
#include <dirent.h>

#include <cstdio>
#include <string>
#include <vector>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/dtype.h"
#include "td/core/tensordict.h"

namespace {

// Prints every ".td-tmp-" name below `dir` (recursively) and, for `base`, next to it.
void ListTemps(const std::string& dir, int depth) {
  if (depth > 128) return;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::pair<std::string, bool>> names;
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n, e->d_type == DT_DIR);
  }
  ::closedir(d);
  for (const auto& [n, is_dir] : names) {
    if (n.rfind(".td-tmp-", 0) == 0) {
      std::printf("leftover temporary (ignored): %s/%s\n", dir.c_str(), n.c_str());
    } else if (is_dir) {
      ListTemps(dir + "/" + n, depth + 1);
    }
  }
}

void ListSiblingTemps(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  const std::string base = slash == std::string::npos ? dir : dir.substr(slash + 1);
  DIR* d = ::opendir(parent.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(".td-tmp-", 0) == 0 && n.size() > base.size() &&
        n.compare(n.size() - base.size() - 1, std::string::npos, "-" + base) == 0) {
      std::printf("leftover temporary (ignored): %s/%s\n", parent.c_str(), n.c_str());
    }
  }
  ::closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(stderr, "usage: memmap_inspect DIR [KEY...]\n");
    return argc < 2 ? 2 : 0;
  }
  td::LoadMemmapOptions options = td::LoadMemmapOptions().mode(td::MemmapMode::kReadOnly);
  if (argc > 2) options.sub_path(td::NestedKey(std::vector<std::string>(argv + 2, argv + argc)));
  try {
    td::TensorDict td = td::TensorDict::load_memmap(argv[1], options);
    std::printf("%s\n\n", td.repr().c_str());
    int64_t total = 0;
    for (const auto& [key, value] :
         td.items(td::KeysOptions().include_nested(true).leaves_only(true))) {
      if (!value.is_tensor()) continue;
      const at::Tensor& t = value.tensor();
      const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
      total += bytes;
      std::printf("%-30s %-15s %-28s %12lld  %s\n", key.repr().c_str(),
                  td::DtypeName(t.scalar_type()).c_str(), td::SizeRepr(t.sizes()).c_str(),
                  static_cast<long long>(bytes),
                  td::MemoryMappedTensor::filename_of(t).value_or("?").c_str());
    }
    ListSiblingTemps(argv[1]);
    ListTemps(argv[1], 0);
    std::printf("valid: %lld bytes of tensor data\n", static_cast<long long>(total));
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "invalid: %s\n", e.what_without_backtrace());
    return 1;
  }
}
