// NOTE [ Crash-safe level writes ] (memmap_internal.h), tested by killing writers: a fork()ed
// child loads an on-disk TensorDict, unlocks it and runs a fixed sequence of structural writes
// (set of a new key, set replacing a leaf with another shape / dtype / kind, del_, rename_key_,
// nested set, update, non-tensor data) until it is SIGKILLed. The directory must then load and
// equal one of the states of the sequence (an update of several keys counts each key's write as
// one state; rename_key_ its del_ and its set). The next child continues from the state found,
// so 40 kills land at 40 different points of a long sequence. Where a kill lands is chosen by the
// child's progress and by what it has on disk, not by time (see the test's comment).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/test_util.h"
#include "td/backends/memmap/writer_testing.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using Fn = std::function<void(TensorDict&)>;

// One state change of the sequence: `dense` applies it to the in-memory model. A group (an
// update) is one call on the memmap TensorDict (`group`, on its first step) and several states.
struct Step {
  Fn dense;
  Fn single;          // the same change alone on the memmap TensorDict
  Fn group;           // first step of a group: the whole group as one call
  int group_len = 1;  // steps the group covers (on its first step)
};

at::Tensor Full(std::vector<int64_t> shape, double v, at::ScalarType dtype) {
  return at::full(shape, v, at::TensorOptions().dtype(dtype));
}

// The steps, with every tensor built up front (the forked child then only writes files).
std::vector<Step> MakeSteps(int n) {
  std::vector<Step> steps;
  const at::ScalarType dtypes[] = {at::kFloat, at::kDouble, at::kInt, at::kByte};
  for (int i = 0; static_cast<int>(steps.size()) < n; ++i) {
    const double v = i;
    switch (i % 8) {
      case 0: {  // a new key
        const std::string k = "k" + std::to_string(i);
        at::Tensor t = Full({4, 1 + i % 3}, v, at::kFloat);
        Fn f = [k, t](TensorDict& td) { td.set(k, t); };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
      case 1: {  // replace a leaf with another shape and dtype
        at::Tensor t = Full({4, 1 + i % 5}, i % 200, dtypes[(i / 8) % 4]);
        Fn f = [t](TensorDict& td) { td.set("a", t); };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
      case 2: {  // delete the oldest "k" key
        Fn f = [](TensorDict& td) {
          for (const NestedKey& k : td.keys()) {
            if (k.back()[0] == 'k') {
              td.del_(k);
              return;
            }
          }
        };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
      case 3: {  // rename within the level, back and forth: the core's del_, then set
        const bool forth = (i / 8) % 2 == 0;
        const std::string from = forth ? "r1" : "r2", to = forth ? "r2" : "r1";
        const at::Tensor r = at::arange(4, at::kFloat);
        Fn del = [from](TensorDict& td) { td.del_(from); };
        Fn set = [to, r](TensorDict& td) { td.set(to, r); };
        Fn group = [from, to](TensorDict& td) { td.rename_key_(from, to); };
        steps.push_back({del, del, group, 2});
        steps.push_back({set, set, nullptr, 1});
        break;
      }
      case 4: {  // nested set: a new key, then a replacement with another shape
        at::Tensor t = Full({4, 2 + i % 4}, v, at::kFloat);
        const std::string k = (i / 8) % 2 ? "x" : "y";
        Fn f = [t, k](TensorDict& td) { td.set(NestedKey{"n", k}, t); };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
      case 5: {  // update of two keys on two levels: two states
        at::Tensor u = Full({4}, v, at::kLong);
        at::Tensor z = Full({4, 3}, v, at::kDouble);
        Fn su = [u](TensorDict& td) { td.set("u", u); };
        Fn sz = [z](TensorDict& td) { td.set(NestedKey{"n", "z"}, z); };
        Fn group = [u, z](TensorDict& td) {
          td.update(TensorDict({{"u", u}, {"n", TensorDict({{"z", z}}, {4})}}, {4}));
        };
        steps.push_back({su, su, group, 2});
        steps.push_back({sz, sz, nullptr, 1});
        break;
      }
      case 6: {  // a key that changes kind: tensor <-> sub-TensorDict <-> non-tensor data
        Value val = i % 3 == 0   ? Value(Full({4, 2}, v, at::kFloat))
                    : i % 3 == 1 ? Value(TensorDict({{"q", Full({4}, v, at::kInt)}}, {4}))
                                 : Value(NonTensorData(nlohmann::json("text " + std::to_string(i))));
        Fn f = [val](TensorDict& td) { td.set("kind", val); };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
      case 7: {  // replace a whole nested level
        at::Tensor t = Full({4, 1}, v, at::kFloat);
        Fn f = [t](TensorDict& td) { td.set("sub", TensorDict({{"w", t}, {"m", TensorDict({{"w", t}}, {4})}}, {4})); };
        steps.push_back({f, f, nullptr, 1});
        break;
      }
    }
  }
  steps.resize(n);
  if (steps.back().group_len > 1) steps.back().group_len = 1, steps.back().group = nullptr;
  return steps;
}

TensorDict Initial() {
  return TensorDict({{"a", at::zeros({4, 2})},
                     {"r1", at::arange(4, at::kFloat)},
                     {"n", TensorDict({{"x", at::zeros({4, 1})}}, {4})}},
                    {4});
}

// Every entry (nested keys, sub-TensorDicts included), printed with its data.
std::map<std::string, std::string> Describe(const TensorDict& td) {
  std::map<std::string, std::string> out;
  for (const TensorDict::Item& item : td.items(KeysOptions().include_nested(true))) {
    const Value& v = item.second;
    std::string d;
    if (v.is_tensor()) {
      std::ostringstream ss;
      ss << v.tensor().scalar_type() << v.tensor().sizes() << v.tensor().to(at::kDouble).sum().item<double>();
      d = ss.str();
    } else if (v.is_tensordict()) {
      d = "td";
    } else {
      d = v.non_tensor().dump();
    }
    out[item.first.repr()] = d;
  }
  return out;
}

// Reads the state indices a writer child reports (one int after each call it completed) from
// `fd` into `*done` until one is >= `target`, or until the pipe closes (target < 0: read all).
// Returns "" when reached, else why not.
std::string ReadProgress(int fd, int target, int* done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (target < 0 || *done < target) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return "the writer did not reach state " + std::to_string(target) + " within " +
             std::to_string(timeout.count()) + " s (it reported " + std::to_string(*done) + ")";
    }
    struct pollfd p = {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    int value = 0;
    const ssize_t n = ::read(fd, &value, sizeof(value));  // writes of one int are atomic
    if (n == 0) {
      return target < 0 ? "" : "the writer ended at state " + std::to_string(*done) +
                                   " before state " + std::to_string(target);
    }
    if (n != static_cast<ssize_t>(sizeof(value))) {
      if (n < 0 && errno == EINTR) continue;
      return "short read from the progress pipe";
    }
    *done = value;
  }
  return "";
}

// Each round: a child continues the sequence from the state on disk and reports after every
// call; the parent waits until it has completed a few calls, then kills it. Even rounds kill
// after a random pause of up to 3 ms (anywhere in the next calls), odd rounds while the child is
// stopped inside a write (writer_testing.h): kills inside writes do not depend on timing.
// The directory must then hold the state after the last call the child completed, or a state
// inside the call it was making: never an older one, never a state it had not reached.
TEST(MemmapLevelCrashTest, KilledStructuralWritesLeaveTheStateBeforeOrAfter) {
  constexpr int kSteps = 1500;
  const std::vector<Step> steps = MakeSteps(kSteps);
  // states[i]: the state before step i.
  std::vector<std::map<std::string, std::string>> states;
  {
    TensorDict model = Initial();
    for (const Step& s : steps) {
      states.push_back(Describe(model));
      s.dense(model);
    }
    states.push_back(Describe(model));
  }
  const std::string root = testing_util::FreshDir("level-crash");
  const std::string dir = root + "/td";
  Initial().memmap(dir);
  std::mt19937 rng(1234);
  int at = 0;  // the state the directory holds
  int mid_write = 0;
  int stopped_in_write = 0;
  const int kRounds = 40;
  // Generous bounds (ASan on a loaded machine), well under the test's Bazel timeout.
  const auto kWait = std::chrono::seconds(120);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " from state " + std::to_string(at));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      TensorDict td = TensorDict::load_memmap(dir);
      td.unlock_();
      for (int i = at; i < kSteps;) {
        if (steps[i].group) {
          steps[i].group(td);
          i += steps[i].group_len;
        } else {
          steps[i].single(td);
          ++i;
        }
        if (::write(fds[1], &i, sizeof(i)) != static_cast<ssize_t>(sizeof(i))) ::_exit(4);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    int done = at;
    const int target = at + std::uniform_int_distribution<int>(1, 6)(rng);
    std::string why = ReadProgress(fds[0], target, &done, kWait);
    const bool stop_in_write = round % 2 == 1;
    if (why.empty() && stop_in_write) why = testing_util::StopInsideWrite(pid, root, kWait);
    if (why.empty() && !stop_in_write) {
      // Somewhere in the next call or few (the verdict below reads what the child completed).
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
    }
    if (!why.empty()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(fds[0]);
      FAIL() << why;
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child ran out of steps before the kill";
    why = ReadProgress(fds[0], -1, &done, kWait);  // what it reported before it died
    ::close(fds[0]);
    ASSERT_EQ(why, "");
    const bool left_temp = testing_util::HasTempOf(pid, root);
    if (left_temp) ++mid_write;
    if (stop_in_write) {
      ++stopped_in_write;
      EXPECT_TRUE(left_temp) << "stopped inside a write, yet no temporary is left";
    }
    TensorDict loaded;
    try {
      loaded = TensorDict::load_memmap(dir);
    } catch (const c10::Error& e) {
      FAIL() << "the directory does not load: " << e.what_without_backtrace();
    }
    const auto got = Describe(loaded);
    // The call in progress at the kill covers states done .. last.
    const int last = done < kSteps && steps[done].group ? done + steps[done].group_len : done + 1;
    int found = -1;
    for (int i = done; i <= std::min(last, kSteps); ++i) {
      if (states[i] == got) {
        found = i;
        break;
      }
    }
    ASSERT_GE(found, 0) << "the directory is in none of the states " << done << ".." << last
                        << " (after the last completed call, or inside the next one)";
    at = found;
    ASSERT_LT(at, kSteps) << "the child ran out of steps";
  }
  // Every round completed at least one call, and half of them were killed inside a write.
  EXPECT_GE(at, kRounds);
  EXPECT_GE(mid_write, stopped_in_write);
  // Kills between the temporary's creation and its removal leave one next to (or inside) the
  // directory; the next write removes those of dead writers.
  TensorDict td = TensorDict::load_memmap(dir);
  td.unlock_();
  td.set("final", at::ones({4}));
  for (const std::string& name : testing_util::ListNames(root)) EXPECT_EQ(name, "td");
  for (const std::string& name : testing_util::ListNames(dir)) {
    EXPECT_NE(name.rfind(".td-tmp-", 0), 0u) << name;
  }
  std::cout << "reached state " << at << "; kills that left a temporary: " << mid_write << " ("
            << stopped_in_write << " stopped inside a write)\n";
}

}  // namespace
}  // namespace td
