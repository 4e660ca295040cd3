// TensorDict::apply / apply_ / clone / to running leaves on td::parallel's threads: the same
// results as the serial run, errors naming the right key, serial below the threshold.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <atomic>
#include <string>
#include <thread>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"
#include "td/executor/executor.h"

namespace td {
namespace {

// 12 leaves over three levels, plus non-tensor data.
TensorDict Sample(int64_t feature = 5) {
  at::manual_seed(0);
  TensorDict t({}, {4, 3});
  for (int i = 0; i < 6; ++i) t.set("k" + std::to_string(i), at::randn({4, 3, feature}));
  t.set({"n", "x"}, at::randn({4, 3}));
  t.set({"n", "m", "y"}, at::randn({4, 3, 2}));
  t.set({"n", "m", "z"}, at::randint(0, 9, {4, 3}));
  t.set("last", at::randn({4, 3, feature}));
  t.set_non_tensor("s", "note");
  t.set({"n", "w"}, at::randn({4, 3, 7}));
  t.set("b", at::zeros({4, 3}, at::kBool));
  return t;
}

void ExpectIdentical(const TensorDict& a, const TensorDict& b) {
  const auto all = KeysOptions().include_nested(true);
  ASSERT_EQ(a.keys(all), b.keys(all));  // same keys in the same order
  ASSERT_EQ(a.batch_size(), b.batch_size());
  for (const auto& [key, va] : a.items(all)) {
    Value vb = b.get_value(key);
    ASSERT_EQ(va.kind(), vb.kind()) << key;
    if (va.is_tensor()) {
      EXPECT_TRUE(va.tensor().equal(vb.tensor())) << key;
      EXPECT_EQ(va.tensor().dtype(), vb.tensor().dtype()) << key;
    } else if (va.is_tensordict()) {
      EXPECT_EQ(va.tensordict().batch_size(), vb.tensordict().batch_size()) << key;
    } else {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << key;
    }
  }
}

TEST(ParallelApplyTest, ParallelEqualsSerial) {
  TensorDict t = Sample();
  auto fn = [](const at::Tensor& x) {
    // Drop the bool leaf, change the others' dtype or values: all must survive assembly.
    if (x.scalar_type() == at::kBool) return at::Tensor();
    return x.is_floating_point() ? x.exp() : x * 3;
  };
  TensorDict serial = t.apply(fn, ApplyOptions().parallel(false));
  for (int threads : {2, 3}) {
    TensorDict par = t.apply(fn, ApplyOptions().parallel(true).num_threads(threads));
    ExpectIdentical(serial, par);
    EXPECT_FALSE(par.contains("b"));
    EXPECT_EQ(par.get_non_tensor("s"), "note");
  }
  // named_apply and zipped apply too.
  auto named = [](const NestedKey& k, const at::Tensor& x) {
    return k.back() == "b" ? at::Tensor() : x * static_cast<double>(k.size());
  };
  ExpectIdentical(t.named_apply(named, ApplyOptions().parallel(false)),
                  t.named_apply(named, ApplyOptions().parallel(true)));
  auto add = [](const at::Tensor& x, const at::Tensor& y) { return x + y; };
  TensorDict other = t.clone();
  ExpectIdentical(t.apply(add, other, ApplyOptions().parallel(false)),
                  t.apply(add, other, ApplyOptions().parallel(true)));
  // A new batch size reaches nested levels the same way.
  auto flat = [](const at::Tensor& x) { return x.flatten(0, 1); };
  ExpectIdentical(
      t.apply(flat, ApplyOptions().batch_size(std::vector<int64_t>{12}).parallel(false)),
      t.apply(flat, ApplyOptions().batch_size(std::vector<int64_t>{12}).parallel(true)));
  EXPECT_EQ(t.apply(flat, ApplyOptions().batch_size(std::vector<int64_t>{12}).parallel(true))
                .get_tensordict({"n", "m"})
                .batch_size(),
            at::IntArrayRef({12}));
}

// Records which threads fn ran on. With `meet`, every call waits until calls have run on two
// threads (a barrier that needs two threads to pass): a plan that runs on two threads shows two
// however loaded the machine is, instead of the first thread finishing every leaf before the
// second starts. The wait is bounded (60 s, far more than a second thread needs to start on a
// loaded machine); once it has expired, `gave_up` says so and later calls no longer wait.
struct Threads {
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> ids;
  bool gave_up = false;
  TensorDict::LeafFn fn(bool meet) {
    return [this, meet](const at::Tensor& x) {
      std::unique_lock<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      cv.notify_all();
      if (meet && !gave_up &&
          !cv.wait_for(lock, std::chrono::seconds(60), [&] { return ids.size() >= 2; })) {
        gave_up = true;
      }
      return x + 1;
    };
  }
};

TEST(ParallelApplyTest, SmallTensorDictsStaySerialLargeOnesGoParallel) {
  TensorDict small = Sample();  // 12 leaves, ~400 elements
  Threads s;
  small.apply(s.fn(false), ApplyOptions().num_threads(2));
  EXPECT_EQ(s.ids, std::set<std::thread::id>{std::this_thread::get_id()});

  // The same leaves count as large once the threshold is below their total numel.
  Threads l;
  small.apply(l.fn(true), ApplyOptions().num_threads(2).min_cost(100));
  EXPECT_FALSE(l.gave_up) << "no second thread ran a leaf within 60 s";
  EXPECT_EQ(l.ids.size(), 2u);

  TensorDict large = Sample(/*feature=*/20000);  // > kDefaultMinParallelCost elements
  Threads d;
  large.apply(d.fn(true), ApplyOptions().num_threads(2));
  EXPECT_FALSE(d.gave_up) << "no second thread ran a leaf within 60 s";
  EXPECT_EQ(d.ids.size(), 2u);

  // parallel(false) wins over size; td::parallel::set_num_threads(1) turns everything serial.
  Threads off;
  large.apply(off.fn(false), ApplyOptions().num_threads(2).parallel(false));
  EXPECT_EQ(off.ids.size(), 1u);
  parallel::set_num_threads(1);
  Threads one;
  large.apply(one.fn(false));
  EXPECT_EQ(one.ids.size(), 1u);
  parallel::set_num_threads(0);
}

TEST(ParallelApplyTest, ErrorNamesTheFirstFailingKeyInKeyOrder) {
  TensorDict t = Sample();
  for (bool par : {false, true}) {
    TD_EXPECT_THROW_MSG(t.apply(
                            [](const at::Tensor& x) -> at::Tensor {
                              if (x.size(-1) == 2) TORCH_CHECK_VALUE(false, "two wide");
                              return x;
                            },
                            ApplyOptions().parallel(par)),
                        c10::ValueError, {"two wide", "('n', 'm', 'y')"});
    // Leaves k1 and ('n', 'm', 'y') fail; k1 comes first in key order.
    TD_EXPECT_THROW_MSG(t.apply(
                            [&](const at::Tensor& x) -> at::Tensor {
                              if (x.is_same(t.get("k1"))) throw std::runtime_error("k1 broke");
                              if (x.size(-1) == 2) TORCH_CHECK_VALUE(false, "two wide");
                              return x;
                            },
                            ApplyOptions().parallel(par)),
                        c10::Error, {"k1 broke", "'k1'"});
  }
}

TEST(ParallelApplyTest, FailedApplyInPlaceWritesNoResult) {
  for (bool par : {false, true}) {
    TensorDict t({}, {8});
    for (int i = 0; i < 16; ++i) t.set("k" + std::to_string(i), at::zeros({8, 1000}));
    // Results are returned (not written by fn): none may land when one leaf fails.
    TD_EXPECT_THROW_MSG(t.apply_(
                            [&](const at::Tensor& x) -> at::Tensor {
                              if (x.is_same(t.get("k9"))) TORCH_CHECK(false, "nine");
                              return x + 1;
                            },
                            ApplyOptions().parallel(par)),
                        c10::Error, {"nine", "'k9'", "wrote nothing"});
    for (int i = 0; i < 16; ++i) {
      EXPECT_TRUE(t.get("k" + std::to_string(i)).eq(0).all().item<bool>()) << i;
    }
    // fn that writes its argument itself: every key before the failing one was written.
    EXPECT_THROW(t.apply_(
                     [&](const at::Tensor& x) -> at::Tensor {
                       if (x.is_same(t.get("k9"))) TORCH_CHECK(false, "nine");
                       return x.add_(1);
                     },
                     ApplyOptions().parallel(par)),
                 c10::Error);
    for (int i = 0; i < 9; ++i) {
      EXPECT_TRUE(t.get("k" + std::to_string(i)).eq(1).all().item<bool>()) << i;
    }
    if (!par) {
      for (int i = 9; i < 16; ++i) {
        EXPECT_TRUE(t.get("k" + std::to_string(i)).eq(0).all().item<bool>()) << i;
      }
    }
  }
}

TEST(ParallelApplyTest, ApplyInPlaceInParallelWritesEveryLeaf) {
  TensorDict t = Sample(/*feature=*/20000);
  auto flip = [](const at::Tensor& x) {
    return x.scalar_type() == at::kBool ? x.logical_not() : x * 2;
  };
  TensorDict expected = t.apply(flip, ApplyOptions().parallel(false));
  t.apply_(flip, ApplyOptions().parallel(true));
  ExpectIdentical(expected, t);
}

TEST(ParallelApplyTest, TasksSeeTheCallersGradMode) {
  TensorDict t({}, {4});
  for (int i = 0; i < 8; ++i) t.set("p" + std::to_string(i), at::randn({4, 3}).requires_grad_());
  auto twice = [](const at::Tensor& x) { return x * 2; };
  {
    c10::AutoGradMode no_grad(false);
    TensorDict r = t.apply(twice, ApplyOptions().parallel(true));
    for (const Value& v : r.values()) EXPECT_FALSE(v.tensor().requires_grad());
  }
  TensorDict r = t.apply(twice, ApplyOptions().parallel(true));
  for (const Value& v : r.values()) EXPECT_TRUE(v.tensor().requires_grad());
}

TEST(ParallelApplyTest, CloneAndToOfLargeTensorDictsMatchTheSource) {
  TensorDict t = Sample(/*feature=*/20000);
  TensorDict c = t.clone();
  ExpectIdentical(t, c);
  EXPECT_FALSE(c.get("k0").is_same(t.get("k0")));
  EXPECT_NE(c.get("k0").data_ptr(), t.get("k0").data_ptr());
  ExpectIdentical(t, t.to(at::kCPU));
  // to(dtype) casts every leaf, integer and bool ones included (Python's td.to(dtype)).
  ExpectIdentical(t.apply([](const at::Tensor& x) { return x.to(at::kDouble); },
                          ApplyOptions().parallel(false)),
                  t.to(at::kDouble));
  TensorDict strided = t.apply([](const at::Tensor& x) { return x.transpose(0, 1).contiguous().transpose(0, 1); });
  TensorDict dense = strided.contiguous();
  ExpectIdentical(t, dense);
  EXPECT_TRUE(dense.get("k0").is_contiguous());
  // stack / cat copy leaf by leaf in parallel too.
  TensorDict two = cat({t, t}, 0);
  EXPECT_TRUE(two.get("k2").equal(at::cat({t.get("k2"), t.get("k2")}, 0)));
  TensorDict stacked = stack({t, t, t}, 1);
  EXPECT_TRUE(stacked.get({"n", "m", "y"}).equal(at::stack({t.get({"n", "m", "y"}),
                                                            t.get({"n", "m", "y"}),
                                                            t.get({"n", "m", "y"})}, 1)));
}

TEST(ParallelApplyTest, LibTorchOpsInsideLeavesRunSingleThreaded) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  TensorDict t({}, {2});
  for (int i = 0; i < 4; ++i) t.set("k" + std::to_string(i), at::zeros({2}));
  std::atomic<int> wide{0};
  t.apply(
      [&](const at::Tensor& x) {
        if (at::get_num_threads() != 1) ++wide;
        return x;
      },
      ApplyOptions().parallel(true).num_threads(2));
  EXPECT_EQ(wide.load(), 0);
  at::set_num_threads(before);
}

}  // namespace
}  // namespace td
