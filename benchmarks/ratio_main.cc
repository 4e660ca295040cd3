// main() for every benchmark binary: runs the benchmarks (5 repetitions by default, randomly
// interleaved: the repetitions of `<Case>/ours` and of its baselines alternate in time, so a
// drift in machine speed during the run, common on a shared VM, moves both sides of a ratio
// alike), then prints, for each benchmark named `<Case>/ours` and every baseline `<Case>/<name>`
// (the same work written by hand with plain LibTorch, or a std/absl map, in the same run), the
// ratio of their median real times. A ratio below 1 means ours is faster.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

// Whether a run failed: Google Benchmark before 1.8 says so in `error_occurred`, later versions
// in `skipped` (Debian 12 ships 1.7, Debian 13 ships 1.9).
template <class Run>
auto Failed(const Run& run, int) -> decltype(run.error_occurred, bool()) {
  return run.error_occurred;
}
template <class Run>
auto Failed(const Run& run, long) -> decltype(run.skipped, bool()) {
  return static_cast<int>(run.skipped) != 0;
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (Failed(run, 0)) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const bool single = run.run_type == Run::RT_Iteration && run.repetitions <= 1;
      if (!median && !single) continue;
      // The benchmark's own name, without its args and the "/real_time", "/iterations:N", ...
      // suffixes that options such as UseRealTime() append to the run name: each `<Case>/<who>`
      // is registered once (with at most one argument), so `Write/ours` with Arg(2) pairs with
      // `Write/hand`.
      const std::string& name = run.run_name.function_name;
      times_[name] = run.GetAdjustedRealTime();
      unit_[name] = benchmark::GetTimeUnitString(run.time_unit);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-40s %-10s %14s %14s %8s\n", "case (median real time)", "vs", "ours",
                "baseline", "ratio");
    for (const auto& [name, t] : times_) {
      const size_t slash = name.rfind('/');
      if (slash == std::string::npos || name.compare(slash, std::string::npos, "/ours") != 0) {
        continue;
      }
      const std::string base = name.substr(0, slash + 1);
      for (auto it = times_.lower_bound(base); it != times_.end(); ++it) {
        if (it->first.compare(0, base.size(), base) != 0) break;
        if (it->first == name || it->first.find('/', base.size()) != std::string::npos) continue;
        std::printf("%-40s %-10s %11.3f %-2s %11.3f %-2s %7.2fx\n",
                    name.substr(0, slash).c_str(), it->first.substr(base.size()).c_str(), t,
                    unit_[name].c_str(), it->second, unit_[it->first].c_str(), t / it->second);
      }
    }
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, std::string> unit_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool has_reps = false;
  bool has_interleaving = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--benchmark_repetitions", 0) == 0) has_reps = true;
    if (arg.rfind("--benchmark_enable_random_interleaving", 0) == 0) has_interleaving = true;
  }
  static char reps[] = "--benchmark_repetitions=5";
  static char only_aggregates[] = "--benchmark_report_aggregates_only=true";
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (!has_reps) {
    args.push_back(reps);
    args.push_back(only_aggregates);
  }
  if (!has_interleaving) args.push_back(interleave);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
