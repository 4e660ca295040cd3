// A thread-safe text progress bar (what td::parallel::map draws with `pbar(true)`): items done,
// rate and time left, redrawn in place on a terminal and as occasional plain lines otherwise.
//
//   td::parallel::ProgressBar bar(1000, td::parallel::ProgressBarOptions().desc("preprocess"));
//   for (int i = 0; i < 1000; ++i) { work(i); bar.update(); }   // any thread may call update()
//   bar.close();                                                // or let the destructor do it
//
// On a terminal (stderr is a tty) one line is redrawn in place with '\r', at most every
// `redraw_seconds`, and ends with a newline at close():
//   preprocess:  45%|#########           | 450/1000 [00:01<00:02, 312.50it/s]
// Elsewhere (a log file, a pipe, a test) a plain line is written each time another tenth of the
// total is done, and at least every `line_seconds` while work goes on, plus one at close() if the
// last line did not show the final count.
#pragma once

#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

namespace td {
namespace parallel {

struct ProgressBarOptions {
  using StreamPtr = std::ostream*;  // TORCH_ARG spells `const T&`, which needs a single-token T

  // Printed before the bar ("desc: ").
  TORCH_ARG(std::string, desc) = "";
  // The name of one item in the rate ("it/s").
  TORCH_ARG(std::string, unit) = "it";
  // Where to draw; nullptr means stderr (std::cerr).
  TORCH_ARG(StreamPtr, stream) = nullptr;
  // Redraw in place; nullopt means "stderr is a terminal" when drawing to stderr, and false for
  // any other stream.
  TORCH_ARG(std::optional<bool>, tty) = std::nullopt;
  // Terminal: the shortest time between two redraws.
  TORCH_ARG(double, redraw_seconds) = 0.1;
  // Not a terminal: the longest time between two lines while items keep completing.
  TORCH_ARG(double, line_seconds) = 30.0;
};

class ProgressBar {
 public:
  // A bar for `total` items (>= 0). Draws the empty bar at once on a terminal.
  // Throws c10::ValueError when total < 0.
  explicit ProgressBar(int64_t total, ProgressBarOptions options = {});
  // Calls close().
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Counts `n` more items done (from any thread) and redraws if it is time to.
  void update(int64_t n = 1);
  // Draws the final state and ends the line; later calls (and update()) do nothing.
  void close();

  int64_t done() const;
  int64_t total() const { return total_; }
  bool tty() const { return tty_; }

  // One line of the bar, without '\r' or '\n' (tty: with the bar; plain: without it):
  //   FormatLine(450, 1000, 1.44, "map", "it", true)
  //     == "map:  45%|#########           | 450/1000 [00:01<00:01, 312.50it/s]"
  // The rate and time left read "?" until some time has passed and an item is done.
  static std::string FormatLine(int64_t done, int64_t total, double elapsed_seconds,
                                const std::string& desc, const std::string& unit, bool with_bar);

 private:
  void DrawLocked();

  const int64_t total_;
  const ProgressBarOptions options_;
  std::ostream& out_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;

  mutable std::mutex mu_;
  int64_t done_ = 0;
  bool closed_ = false;
  std::chrono::steady_clock::time_point last_draw_;
  int64_t last_drawn_done_ = -1;
  int64_t last_tenth_ = 0;   // plain mode: tenths of the total already reported
  size_t last_width_ = 0;    // tty mode: length of the line on screen
};

}  // namespace parallel
}  // namespace td
