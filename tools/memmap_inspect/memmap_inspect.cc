// memmap_inspect: validates a memmap directory (written by TensorDict::memmap or by Python
// tensordict) and prints what it holds, without modifying anything (files are opened
// read-only).
//
//   memmap_inspect DIR [KEY...]
//
// KEY... opens a sub-TensorDict only (as MemmapOptions().sub_path({KEY...})). Prints the
// TensorDict as Python prints it, then one line per tensor: key, dtype, shape, bytes, file.
// Exits 0 when the directory is valid; 1 with the problem (the file and what is wrong) otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/dtype.h"
#include "td/core/tensordict.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fprintf(stderr, "usage: memmap_inspect DIR [KEY...]\n");
    return argc < 2 ? 2 : 0;
  }
  td::MemmapOptions options = td::MemmapOptions().mode(td::MemmapMode::kReadOnly);
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
    std::printf("valid: %lld bytes of tensor data\n", static_cast<long long>(total));
    return 0;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "invalid: %s\n", e.what_without_backtrace());
    return 1;
  }
}
