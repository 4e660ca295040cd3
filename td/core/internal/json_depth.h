// How deep [ and { nest in a JSON text, read before the text is parsed: every reader of a
// structure that comes from a file or another process (memmap metadata, consolidated metadata)
// refuses text nested past its limit before nlohmann/json, whose parser and destructor recurse
// once per level, sees it. Header-only, so the fuzz targets (tests/fuzz/run.sh) need no library.
#pragma once

#include <algorithm>
#include <string_view>

namespace td::internal {

// The deepest nesting of [ and { in `text` outside strings, or -1 as soon as it passes `limit`.
inline int JsonMaxDepth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return -1;
      max_depth = std::max(max_depth, depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace td::internal
