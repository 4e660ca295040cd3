// Test helper: `attach_helper <handle>` attaches to a shared TensorDict holding "x" (float, all
// equal to 1) and {"n", "y"} (int64), checks the values, then writes x = 42 and y += 1000.
// Exits 0 on success, 1 with a message otherwise.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>

#include "td/backends/shared_memory/shared_memory.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: attach_helper <handle>\n");
    return 1;
  }
  try {
    td::TensorDict shared = td::AttachSharedMemory(argv[1]);
    if (shared.backend() != "shared_memory" || !shared.is_shared()) {
      std::fprintf(stderr, "attached TensorDict is not shared\n");
      return 1;
    }
    if (!shared.get("x").eq(1).all().item<bool>()) {
      std::fprintf(stderr, "x is not all ones\n");
      return 1;
    }
    shared.get("x").fill_(42);
    shared.get({"n", "y"}).add_(1000);
    std::printf("%s\n", shared.get_non_tensor("tag").get<std::string>().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attach_helper: %s\n", e.what());
    return 1;
  }
}
