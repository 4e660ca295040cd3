// main() for replaying a libFuzzer target without libFuzzer (any compiler): feeds every file of
// the directories given on the command line to LLVMFuzzerTestOneInput, then deterministic
// mutations of each (every truncation point of the first 512 bytes, single-byte flips and
// replacements with JSON punctuation). A crash or abort fails the test; tests/fuzz/run.sh does
// the real, coverage-guided fuzzing.
#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Feed(const std::string& s) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

void Mutations(const std::string& seed) {
  const size_t n = std::min<size_t>(seed.size(), 512);
  for (size_t i = 0; i <= n; ++i) Feed(seed.substr(0, i));
  static const char kPunct[] = "{}[]\":,-0e.\\";
  for (size_t i = 0; i < n; ++i) {
    std::string m = seed;
    m[i] = static_cast<char>(m[i] ^ 0x20);
    Feed(m);
    m[i] = kPunct[i % (sizeof(kPunct) - 1)];
    Feed(m);
    m = seed;
    m.erase(i, 1);
    Feed(m);
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t files = 0;
  for (int a = 1; a < argc; ++a) {
    DIR* dir = opendir(argv[a]);
    if (dir == nullptr) {
      std::fprintf(stderr, "cannot open corpus directory %s\n", argv[a]);
      return 1;
    }
    while (struct dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::ifstream in(std::string(argv[a]) + "/" + name, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      Mutations(ss.str());
      ++files;
    }
    closedir(dir);
  }
  if (files == 0) {
    std::fprintf(stderr, "no corpus files\n");
    return 1;
  }
  std::printf("replayed %zu corpus files and their mutations\n", files);
  return 0;
}
