// The process-wide print options (td/core/print_options.h).
#include "td/core/print_options.h"

#include <mutex>
#include <utility>

namespace td {
namespace {

std::mutex& OptionsMutex() {
  static std::mutex m;
  return m;
}

PrintOptions& Current() {
  static PrintOptions* options = new PrintOptions();  // never destroyed: printed at exit too
  return *options;
}

}  // namespace

PrintOptions get_printoptions() {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  return Current();
}

void set_printoptions(PrintOptions options) {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  Current() = std::move(options);
}

PrintOptionsGuard::PrintOptionsGuard(PrintOptions options) {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  previous_ = std::exchange(Current(), std::move(options));
}

PrintOptionsGuard::~PrintOptionsGuard() {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  Current() = std::move(previous_);
}

}  // namespace td
