#include "td/parallel/progress.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "td/core/testing.h"

namespace td {
namespace parallel {
namespace {

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ProgressBarTest, FormatLine) {
  EXPECT_EQ(ProgressBar::FormatLine(450, 1000, 1.44, "map", "it", true),
            "map:  45%|#########           | 450/1000 [00:01<00:01, 312.50it/s]");
  EXPECT_EQ(ProgressBar::FormatLine(450, 1000, 1.44, "", "rows", false),
            " 45% 450/1000 [00:01<00:01, 312.50rows/s]");
  EXPECT_EQ(ProgressBar::FormatLine(0, 10, 0.0, "x", "it", true),
            "x:   0%|                    | 0/10 [00:00<?, ?it/s]");
  EXPECT_EQ(ProgressBar::FormatLine(10, 10, 4000.0, "x", "it", true),
            "x: 100%|####################| 10/10 [1:06:40<00:00, 0.00it/s]");
  EXPECT_EQ(ProgressBar::FormatLine(0, 0, 1.0, "", "it", false), "100% 0/0 [00:01<?, ?it/s]");
  // Time left: 90 items left at 1 item/s.
  EXPECT_EQ(ProgressBar::FormatLine(10, 100, 10.0, "", "it", false),
            " 10% 10/100 [00:10<01:30, 1.00it/s]");
}

TEST(ProgressBarTest, PlainLinesEveryTenthAndNothingMore) {
  std::ostringstream out;
  {
    // No time-based lines (line_seconds): the count below does not depend on the machine's speed.
    ProgressBar bar(1000, ProgressBarOptions().desc("load").stream(&out).line_seconds(1e9));
    EXPECT_FALSE(bar.tty());
    EXPECT_EQ(out.str(), "");  // nothing until a tenth is done
    for (int i = 0; i < 1000; ++i) bar.update();
    EXPECT_EQ(bar.done(), 1000);
  }
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 10u) << out.str();
  const std::regex line(R"(load: +(\d+)% (\d+)/1000 \[\d\d:\d\d<(\d\d:\d\d|\?), ([0-9.]+|\?)it/s\])");
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, line)) << lines[i];
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(10 * (i + 1)));
    EXPECT_EQ(std::stoi(m[2]), static_cast<int>(100 * (i + 1)));
  }
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(ProgressBarTest, PlainCloseReportsWhereItStopped) {
  std::ostringstream out;
  ProgressBar bar(100, ProgressBarOptions().stream(&out).line_seconds(1e9));
  bar.update(5);
  EXPECT_EQ(out.str(), "");
  bar.close();
  bar.close();      // idempotent
  bar.update(50);   // ignored after close
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("  5% 5/100"), std::string::npos) << lines[0];
}

TEST(ProgressBarTest, PlainLinesAlsoComeWithTime) {
  std::ostringstream out;
  ProgressBar bar(1000, ProgressBarOptions().stream(&out).line_seconds(0));
  bar.update(1);
  bar.update(1);
  EXPECT_EQ(Lines(out.str()).size(), 2u);
}

TEST(ProgressBarTest, TerminalRedrawsInPlace) {
  std::ostringstream out;
  {
    ProgressBar bar(4, ProgressBarOptions().desc("t").stream(&out).tty(true).redraw_seconds(0));
    for (int i = 0; i < 4; ++i) bar.update();
  }
  const std::string s = out.str();
  // Initial draw, one per update, a newline at the end, and no other newline.
  EXPECT_EQ(std::count(s.begin(), s.end(), '\r'), 6);
  EXPECT_EQ(s.back(), '\n');
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1);
  EXPECT_NE(s.find("\rt:   0%|                    | 0/4 [00:00<?, ?it/s]"), std::string::npos) << s;
  EXPECT_NE(s.find("\rt: 100%|####################| 4/4 ["), std::string::npos) << s;
}

TEST(ProgressBarTest, TerminalThrottlesRedraws) {
  std::ostringstream out;
  {
    ProgressBar bar(1000, ProgressBarOptions().stream(&out).tty(true).redraw_seconds(3600));
    for (int i = 0; i < 1000; ++i) bar.update();
  }
  const std::string s = out.str();
  // The initial draw, the one at 100%, and the final one at close.
  EXPECT_EQ(std::count(s.begin(), s.end(), '\r'), 3) << s;
}

TEST(ProgressBarTest, UpdatesFromManyThreadsAddUp) {
  std::ostringstream out;
  ProgressBar bar(8000, ProgressBarOptions().stream(&out).line_seconds(1e9));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) bar.update();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bar.done(), 8000);
  bar.close();
  EXPECT_EQ(Lines(out.str()).size(), 10u);
}

TEST(ProgressBarTest, NegativeTotalIsRejected) {
  TD_EXPECT_THROW_MSG(ProgressBar(-1), c10::ValueError, {"total >= 0", "-1"});
}

}  // namespace
}  // namespace parallel
}  // namespace td
