#include "td/parallel/progress.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace td {
namespace parallel {
namespace {

constexpr int kBarWidth = 20;

// 00:07, 12:34, 1:02:03.
std::string Clock(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace

std::string ProgressBar::FormatLine(int64_t done, int64_t total, double elapsed_seconds,
                                    const std::string& desc, const std::string& unit,
                                    bool with_bar) {
  const double fraction =
      total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  std::string line;
  if (!desc.empty()) line += desc + ": ";
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(std::floor(fraction * 100)));
  line += pct;
  if (with_bar) {
    const int filled = static_cast<int>(std::floor(fraction * kBarWidth));
    line += "|" + std::string(filled, '#') + std::string(kBarWidth - filled, ' ') + "|";
  }
  line += " " + std::to_string(done) + "/" + std::to_string(total);
  const bool known = elapsed_seconds > 0 && done > 0;
  const double rate = known ? static_cast<double>(done) / elapsed_seconds : 0;
  line += " [" + Clock(elapsed_seconds) + "<";
  line += known ? Clock(static_cast<double>(std::max<int64_t>(0, total - done)) / rate) : "?";
  char rate_buf[64];
  if (known) {
    std::snprintf(rate_buf, sizeof(rate_buf), "%.2f", rate);
  } else {
    std::snprintf(rate_buf, sizeof(rate_buf), "?");
  }
  line += ", " + std::string(rate_buf) + unit + "/s]";
  return line;
}

ProgressBar::ProgressBar(int64_t total, ProgressBarOptions options)
    : total_(total),
      options_(std::move(options)),
      out_(options_.stream() ? *options_.stream() : std::cerr),
      tty_(options_.tty().value_or(options_.stream() == nullptr && StderrIsTerminal())),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  TORCH_CHECK_VALUE(total >= 0, "ProgressBar: expected a total >= 0, got ", total);
  if (tty_) {
    std::lock_guard<std::mutex> lock(mu_);
    DrawLocked();
  }
}

ProgressBar::~ProgressBar() { close(); }

int64_t ProgressBar::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void ProgressBar::update(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  done_ += n;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (tty_) {
    if (since >= options_.redraw_seconds() || done_ >= total_) DrawLocked();
    return;
  }
  const int64_t tenth = total_ > 0 ? std::min<int64_t>(10, done_ * 10 / total_) : 10;
  if (tenth > last_tenth_ || since >= options_.line_seconds()) {
    last_tenth_ = std::max(last_tenth_, tenth);
    DrawLocked();
  }
}

void ProgressBar::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  if (tty_ || last_drawn_done_ != done_) DrawLocked();
  if (tty_) {
    out_ << '\n';
    out_.flush();
  }
  closed_ = true;
}

void ProgressBar::DrawLocked() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = FormatLine(done_, total_, elapsed, options_.desc(), options_.unit(), tty_);
  if (tty_) {
    const size_t width = line.size();
    if (width < last_width_) line += std::string(last_width_ - width, ' ');
    last_width_ = width;
    out_ << '\r' << line;
  } else {
    out_ << line << '\n';
  }
  out_.flush();
  last_draw_ = now;
  last_drawn_done_ = done_;
}

}  // namespace parallel
}  // namespace td
