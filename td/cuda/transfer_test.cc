// Moving TensorDicts between the host and a CUDA device (docs/cuda.md): to("cuda") / cuda() /
// cpu() / device= constructors on every backend, to(device, non_blocking) and its
// synchronisation rule, pinned memory, consolidated moves as one copy, record_stream, files
// loaded onto the GPU, transfers from several threads. Each GPU case skips where no CUDA device
// is present, naming what it does not check; the CPU cases run everywhere.
#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/backends/shared_memory/shared_memory.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"
#include "td/core/operators.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"
#include "td/cuda/cuda_testing.h"

namespace {

using td::TensorDict;
using td::cuda_test::ExpectSameOn;
using td::cuda_test::OneStorage;

const at::Device kCpu("cpu");
const at::Device kCuda("cuda:0");

TensorDict Sample() {
  return TensorDict({{"a", at::randn({4, 3})},
                     {"n", {{"b", at::arange(4)}, {"m", at::ones({4, 2}, at::kBool)}}},
                     {"s", "a string"}},
                    {4});
}

std::string TmpDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root != nullptr ? root : "/tmp") + "/" + name;
}

// One TensorDict with Sample()'s entries per backend that can be moved: dense, a lazy stack, a
// lazy view, memory-mapped files and shared memory (the last two hold CPU leaves only; moving
// them to the GPU gives a dense TensorDict).
std::vector<std::pair<std::string, TensorDict>> Backends(const TensorDict& src,
                                                         const std::string& dir) {
  std::vector<TensorDict> members;
  for (int64_t i = 0; i < src.batch_size()[0]; ++i) members.push_back(src.index({i}).clone());
  return {{"dense", src},
          {"lazy_stack", td::lazy_stack(members, 0)},
          {"lazy_view", td::index_view(src, {at::indexing::Slice(0, 4)})},
          {"memmap", src.memmap(TmpDir(dir))},
          {"shared_memory", src.clone().share_memory_()}};
}

// On every backend, to("cpu", non_blocking) in both forms is a CPU TensorDict with the same
// entries (nothing to wait for: a host-to-host copy is synchronous).
TEST(CudaTransferTest, CpuRoundTripsOnEveryBackend) {
  const TensorDict src = Sample();
  for (const auto& [name, td] : Backends(src, "cpu_round_trip")) {
    for (bool non_blocking : {false, true}) {
      const TensorDict back = td.to("cpu", non_blocking);
      EXPECT_EQ(back.device(), kCpu) << name;
      ExpectSameOn(back, src, kCpu, name);
      EXPECT_EQ(back.get_non_tensor("s"), "a string") << name;
    }
    ExpectSameOn(td.cpu(), src, kCpu, name + " cpu()");
  }
}

// Without a CUDA device a move there is LibTorch's error, never a silent CPU TensorDict.
TEST(CudaTransferTest, WithoutADeviceMovingThereIsAnError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present: moves checked below";
  const TensorDict src = Sample();
  EXPECT_THROW(src.to("cuda:0"), c10::Error);
  EXPECT_THROW(src.cuda(), c10::Error);
  EXPECT_THROW(TensorDict({{"a", at::zeros({2})}}, {2}, kCuda), c10::Error);
  // Pinned memory needs an accelerator: the error names the key.
  TD_EXPECT_THROW_MSG(src.pin_memory(), c10::Error, {"pinning key 'a'"});
  // consolidate(pin_memory) ignores the option there (docs/consolidate.md): one plain buffer.
  const TensorDict c = td::consolidate(src, td::ConsolidateOptions().pin_memory(true));
  EXPECT_TRUE(td::is_consolidated(c));
  EXPECT_FALSE(c.get("a").is_pinned());
}

// to("cuda"), cuda(), to(Device, non_blocking) and back with cpu(), on every backend.
TEST(CudaTransferTest, ToCudaAndBackOnEveryBackend) {
  TD_REQUIRE_CUDA("to(\"cuda\") / cuda() / cpu() on every backend");
  const TensorDict src = Sample();
  for (const auto& [name, td] : Backends(src, "to_cuda")) {
    const TensorDict g = td.to("cuda");
    EXPECT_EQ(g.device(), kCuda) << name;
    EXPECT_TRUE(g.is_cuda()) << name;
    ExpectSameOn(g, src, kCuda, name + " to(\"cuda\")");
    ExpectSameOn(td.cuda(), src, kCuda, name + " cuda()");
    ExpectSameOn(td.cuda(0), src, kCuda, name + " cuda(0)");
    ExpectSameOn(td.to(kCuda, /*non_blocking=*/true), src, kCuda, name + " non_blocking");
    ExpectSameOn(td.to(kCuda, at::kDouble).to(at::kFloat).cpu().select({"a"}),
                 src.select({"a"}), kCpu, name + " to(device, dtype)");
    const TensorDict back = g.cpu();
    EXPECT_EQ(back.device(), kCpu) << name;
    ExpectSameOn(back, src, kCpu, name + " cpu()");
    EXPECT_EQ(back.get_non_tensor("s"), "a string") << name;
  }
}

// device= puts every tensor written on the device, at construction and later.
TEST(CudaTransferTest, DeviceConstructors) {
  TD_REQUIRE_CUDA("TensorDict(..., device) and set() on a CUDA TensorDict");
  TensorDict g({{"a", at::ones({4, 3})}, {"n", {{"b", at::arange(4)}}}}, {4}, kCuda);
  EXPECT_EQ(g.device(), kCuda);
  EXPECT_TRUE(g.get("a").is_cuda());
  EXPECT_TRUE(g.get({"n", "b"}).is_cuda());
  g.set("c", at::zeros({4}));
  EXPECT_TRUE(g.get("c").is_cuda());
  const TensorDict s = td::lazy_stack({g.index({0}), g.index({1})}, 0);
  EXPECT_TRUE(s.get("a").is_cuda());
  EXPECT_EQ(s.device(), kCuda);
}

// The non_blocking rule (docs/cuda.md, "Synchronisation"): a host-to-device move from
// pinned memory is ordered on the device's current stream, so device work queued after it sees
// the data without a host wait; a device-to-host move with non_blocking lands in pinned memory
// asynchronously, and the host reads it only after synchronising (torch::cuda::synchronize(), or
// the current stream's synchronize()).
TEST(CudaTransferTest, NonBlockingSynchronisationRule) {
  TD_REQUIRE_CUDA("the non_blocking synchronisation rule");
  // Separate allocations (not one buffer: a one-buffer move is a single synchronous copy).
  TensorDict host({{"a", at::randn({1 << 20})}, {"b", at::randn({1 << 20})},
                   {"n", {{"c", at::arange(1 << 20)}}}},
                  {});
  const TensorDict pinned = host.pin_memory();
  const TensorDict g = pinned.to(kCuda, /*non_blocking=*/true);
  // Device work on the current stream after the copy: no host wait needed.
  const at::Tensor sum_on_device = g.get("a").sum();
  EXPECT_TRUE(at::allclose(sum_on_device.cpu(), host.get("a").sum()));
  const TensorDict doubled = g * 2;
  const TensorDict back = doubled.to(kCpu, /*non_blocking=*/true);
  for (const td::NestedKey& k : back.keys(td::cuda_test::LeafKeys())) {
    EXPECT_TRUE(back.get(k).is_pinned()) << "a non_blocking D2H copy lands in pinned memory: "
                                         << k;
  }
  torch::cuda::synchronize();  // the rule: synchronise before the host reads
  ExpectSameOn(back, host * 2, kCpu, "doubled, back on the host");
}

// pin_memory() copies, pin_memory_() replaces in place; both then move with one non_blocking
// copy per leaf.
TEST(CudaTransferTest, PinMemory) {
  TD_REQUIRE_CUDA("pin_memory() / pin_memory_()");
  const TensorDict src = Sample();
  const TensorDict p = src.pin_memory();
  EXPECT_TRUE(p.get("a").is_pinned());
  EXPECT_TRUE(p.get({"n", "b"}).is_pinned());
  EXPECT_FALSE(src.get("a").is_pinned());
  TensorDict q = src.clone();
  TensorDict handle = q;
  q.pin_memory_();
  EXPECT_TRUE(handle.get("a").is_pinned());
  ExpectSameOn(q.to(kCuda, true), src, kCuda, "pinned, moved non_blocking");
}

// Leaves of one dtype (the condition of NOTE [ One buffer, one kernel ] in td/core/leafwise.cc).
TensorDict Floats() {
  return TensorDict({{"a", at::randn({4, 3})}, {"n", {{"b", at::randn({4, 5})}}}}, {4});
}

// consolidate(pin_memory) gives one pinned buffer; with one dtype, moving it is one
// host-to-device copy: the result's leaves all lie in one device buffer. Mixed dtypes move leaf
// by leaf, with the same values.
TEST(CudaTransferTest, ConsolidatedPinnedIsOneCopy) {
  TD_REQUIRE_CUDA("consolidate(pin_memory) then one host-to-device copy");
  const TensorDict floats = Floats();
  const TensorDict c = td::consolidate(floats, td::ConsolidateOptions().pin_memory(true));
  EXPECT_TRUE(td::is_consolidated(c));
  EXPECT_TRUE(c.get("a").is_pinned());
  EXPECT_TRUE(OneStorage(c));
  const TensorDict g = c.to(kCuda, /*non_blocking=*/true);
  EXPECT_TRUE(OneStorage(g)) << "one buffer on the device: one copy";
  ExpectSameOn(g, floats, kCuda, "consolidated, moved");
  const TensorDict src = Sample();
  const TensorDict mixed = td::consolidate(src, td::ConsolidateOptions().pin_memory(true));
  EXPECT_TRUE(mixed.get("a").is_pinned());
  ExpectSameOn(mixed.to(kCuda, true), src, kCuda, "consolidated mixed dtypes, moved");
  // Straight to the device: consolidate(device) is one buffer there.
  const TensorDict d = td::consolidate(src, td::ConsolidateOptions().device(kCuda));
  EXPECT_EQ(d.device(), kCuda);
  EXPECT_TRUE(OneStorage(d));
  ExpectSameOn(d, src, kCuda, "consolidate(device)");
}

// record_stream on CUDA leaves with a side stream; the stream stays associated (upstream).
TEST(CudaTransferTest, RecordStream) {
  TD_REQUIRE_CUDA("record_stream on CUDA leaves");
  const c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  const c10::Stream side = impl.getStreamFromGlobalPool(kCuda);
  TensorDict g = Sample().to(kCuda);
  {
    const c10::StreamGuard on_side(side);
    g.apply_([](const at::Tensor& t) { return t.is_floating_point() ? t * 2 : t; });
  }
  EXPECT_EQ(&g.record_stream(side), &g);
  g.record_stream(side);  // the same stream again
  const c10::Stream other = impl.getStreamFromGlobalPool(kCuda);
  if (other != side) {
    TD_EXPECT_THROW_MSG(g.record_stream(other), c10::ValueError, {"already associated"});
  }
  side.synchronize();
}

// Memory-mapped and consolidated files onto the GPU: load, then move (a consolidated file of one
// dtype is one mapped buffer, so one copy).
TEST(CudaTransferTest, FilesLoadedOntoTheGpu) {
  TD_REQUIRE_CUDA("memmap and consolidated files loaded onto the GPU");
  const TensorDict src = Sample();
  src.memmap(TmpDir("to_gpu_memmap"));
  const TensorDict m = TensorDict::load_memmap(TmpDir("to_gpu_memmap")).to(kCuda);
  ExpectSameOn(m, src, kCuda, "memmap");
  const TensorDict floats = Floats();
  td::save_consolidated(td::consolidate(floats), TmpDir("to_gpu.td"));
  const TensorDict loaded = td::load_consolidated(TmpDir("to_gpu.td"));
  const TensorDict c = loaded.to(kCuda, /*non_blocking=*/true);
  EXPECT_TRUE(OneStorage(c)) << "one buffer on the device: one copy";
  ExpectSameOn(c, floats, kCuda, "consolidated file");
  td::save_consolidated(td::consolidate(src), TmpDir("to_gpu_mixed.td"));
  ExpectSameOn(td::load_consolidated(TmpDir("to_gpu_mixed.td")).to(kCuda), src, kCuda,
               "consolidated file, mixed dtypes");
}

// Several threads moving their own TensorDicts at once, each on its own stream, and several
// threads reading one shared source: every result is right.
TEST(CudaTransferTest, ConcurrentTransfers) {
  TD_REQUIRE_CUDA("transfers from several threads");
  const TensorDict shared = Sample();
  constexpr int kThreads = 8;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        const c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
        const c10::Stream stream = impl.getStreamFromGlobalPool(kCuda);
        const c10::StreamGuard guard(stream);
        for (int round = 0; round < 20; ++round) {
          TensorDict own({{"x", at::full({1 << 16}, i * 100 + round)}}, {});
          const TensorDict back = (own.pin_memory().to(kCuda, true) + 1).to(kCpu, true);
          const TensorDict from_shared = shared.to(kCuda, true).cpu();
          stream.synchronize();
          if (!back.get("x").equal(at::full({1 << 16}, i * 100 + round + 1))) {
            failures[i] = "wrong values in round " + std::to_string(round);
          }
          if (!from_shared.get("a").equal(shared.get("a"))) failures[i] = "shared source";
        }
      } catch (const std::exception& e) {
        failures[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(failures[i], "") << "thread " << i;
}

}  // namespace
