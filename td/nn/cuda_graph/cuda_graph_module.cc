#include "td/nn/cuda_graph/cuda_graph_module.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td::nn {
namespace {

const KeysOptions kLeafKeys = KeysOptions().include_nested(true).leaves_only(true);

// Upstream's message for a leaf that requires grad.
constexpr const char* kRequiresGrad =
    "CudaGraphModule cannot be part of a graph (or leaves variables): pass tensors that require "
    "gradients to the wrapped module as its own parameters or buffers, not in the input";

c10::cuda::CUDAStream AsCuda(const c10::Stream& s) {
  return c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, s);
}

// Python's waiter.wait_stream(done): work queued on `waiter` from now on starts after the work
// queued on `done` so far.
void WaitStream(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& done) {
  at::cuda::CUDAEvent event;
  event.record(done);
  event.block(waiter);
}

bool Contains(const std::vector<NestedKey>& keys, const NestedKey& k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

}  // namespace

CudaGraphModule::CudaGraphModule(std::shared_ptr<TensorDictModuleBase> module,
                                 CudaGraphOptions options)
    : module_(std::move(module)), warmup_(options.warmup()) {
  if (!module_) TD_FAIL(ValueError, "CudaGraphModule: the module is null");
  if (warmup_ < 1) {
    TD_FAIL(ValueError, "CudaGraphModule: warmup must be an integer greater than 0, got ",
            warmup_);
  }
  if (options.device() && !options.device()->is_cuda()) {
    TD_FAIL(ValueError, "CudaGraphModule: device must be a CUDA device, got ",
            options.device()->str());
  }
  has_cuda_ = torch::cuda::is_available();
  if (!has_cuda_) {
    TORCH_WARN("CudaGraphModule: no CUDA device is available; every call runs ", module_->name(),
               " eagerly, without a CUDA graph");
    return;
  }
  const c10::DeviceIndex index = options.device() && options.device()->has_index()
                                     ? options.device()->index()
                                     : c10::cuda::current_device();
  device_ = at::Device(at::kCUDA, index);
  warmup_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index).unwrap();
  capture_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index).unwrap();
}

CudaGraphModule::~CudaGraphModule() = default;

bool CudaGraphModule::captured() const { return graph_ != nullptr; }

void CudaGraphModule::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  graph_.reset();
  counter_ = 0;
  signature_.clear();
  batch_size_.clear();
  static_in_ = TensorDict();
  static_out_ = TensorDict();
  out_is_input_ = false;
  written_.clear();
}

TensorDict CudaGraphModule::operator()(const TensorDict& td) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_cuda_) return module_->forward(td);
  c10::cuda::CUDAGuard guard(device_);
  if (graph_) return replay(td);
  check_leaves(td, counter_ < warmup_ - 1 ? "warm-up" : "capture");
  if (counter_ < warmup_ - 1) return warm_up(td);
  return capture(td);
}

void CudaGraphModule::check_leaves(const TensorDict& td, const char* when) const {
  for (const auto& [k, v] : td.items(kLeafKeys)) {
    if (!v.is_tensor()) continue;
    const at::Tensor& t = v.tensor();
    if (t.device() != device_) {
      TD_FAIL(ValueError, "CudaGraphModule (", when, " call): key ", k, " is on ",
              t.device().str(), "; every tensor leaf must be on ", device_.str(),
              " (move the TensorDict there first: td.to(\"", device_.str(), "\"))");
    }
    if (t.requires_grad()) TD_FAIL(c10::Error, kRequiresGrad, " (key ", k, ")");
  }
}

TensorDict CudaGraphModule::warm_up(const TensorDict& td) {
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
  const c10::cuda::CUDAStream warm = AsCuda(*warmup_stream_);
  WaitStream(warm, current);
  TensorDict out;
  {
    c10::cuda::CUDAStreamGuard on_warm(warm);
    out = module_->forward(td);
  }
  WaitStream(current, warm);
  ++counter_;
  return out;
}

TensorDict CudaGraphModule::capture(const TensorDict& td) {
  std::vector<Leaf> signature;
  for (const auto& [k, v] : td.items(kLeafKeys)) {
    if (!v.is_tensor()) continue;
    const at::Tensor& t = v.tensor();
    signature.push_back({k, t.sizes().vec(), t.scalar_type()});
  }
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
  const c10::cuda::CUDAStream warm = AsCuda(*warmup_stream_);
  const c10::cuda::CUDAStream side = AsCuda(*capture_stream_);
  torch::cuda::synchronize(device_.index());
  WaitStream(warm, current);
  TensorDict this_out;
  TensorDict static_in;
  {
    // The static input is the graph's own copy; the eager run (the last warm-up) fills the
    // caching allocator with what the module needs, so the capture allocates from its pool.
    c10::cuda::CUDAStreamGuard on_warm(warm);
    static_in = td.clone();
    this_out = module_->forward(td);
  }
  WaitStream(side, warm);
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  TensorDict out;
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    graph->capture_begin();
    try {
      out = module_->forward(static_in);
    } catch (const std::exception& e) {
      try {
        graph->capture_end();  // ends the stream's capture; the invalidated graph is an error
      } catch (const std::exception&) {
      }
      (void)cudaGetLastError();  // a failed capture is not a sticky error: clear it
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      TD_FAIL(c10::Error, "CudaGraphModule: capturing ", module_->name(),
              "'s forward into a CUDA graph failed (a graph cannot hold host synchronisation "
              "such as .item(), CPU tensors or data-dependent shapes; the next call tries "
              "again): ",
              c10_error ? c10_error->what_without_backtrace() : e.what());
    }
    graph->capture_end();
  }
  WaitStream(current, side);
  out.lock_();  // the graph's memory: no key may be added or removed
  out_is_input_ = out.is_same(static_in);
  written_.clear();
  if (out_is_input_) {
    for (const NestedKey& k : out.keys(kLeafKeys)) {
      if (!out.get_value(k).is_tensor()) continue;
      const bool is_out_key = Contains(module_->out_keys(), k);
      const bool was_input = std::any_of(signature.begin(), signature.end(),
                                         [&](const Leaf& l) { return l.key == k; });
      if (is_out_key || (module_->out_keys().empty() && !was_input)) written_.push_back(k);
    }
  }
  signature_ = std::move(signature);
  batch_size_ = td.batch_size().vec();
  static_in_ = std::move(static_in);
  static_out_ = std::move(out);
  graph_ = std::move(graph);
  ++counter_;
  return this_out;
}

void CudaGraphModule::check_replay_input(const TensorDict& td) const {
  if (td.batch_size() != at::IntArrayRef(batch_size_)) {
    TD_FAIL(ValueError, "CudaGraphModule: the input's batch size ", SizeRepr(td.batch_size()),
            " is not the captured ", SizeRepr(batch_size_),
            "; a CUDA graph replays fixed shapes (reset() to capture again)");
  }
  for (const NestedKey& k : td.keys(kLeafKeys)) {
    if (!td.get_value(k).is_tensor()) continue;
    const bool known = std::any_of(signature_.begin(), signature_.end(),
                                   [&](const Leaf& l) { return l.key == k; });
    if (!known && !Contains(written_, k) && !Contains(module_->out_keys(), k)) {
      TD_FAIL(ValueError, "CudaGraphModule: key ", k,
              " is new: the graph was captured without it and cannot read it (reset() to "
              "capture again)");
    }
  }
  for (const Leaf& leaf : signature_) {
    if (!td.contains(leaf.key)) {
      TD_FAIL(KeyError, "CudaGraphModule: key ", leaf.key,
              " was in the captured input and is missing");
    }
    const at::Tensor t = td.get(leaf.key);
    if (t.device() != device_) {
      TD_FAIL(ValueError, "CudaGraphModule: key ", leaf.key, " is on ", t.device().str(),
              "; the graph was captured on ", device_.str());
    }
    if (t.sizes() != at::IntArrayRef(leaf.shape)) {
      TD_FAIL(ValueError, "CudaGraphModule: key ", leaf.key, " has shape ", SizeRepr(t.sizes()),
              ", captured with ", SizeRepr(leaf.shape),
              "; a CUDA graph replays fixed shapes (reset() to capture again)");
    }
    if (t.scalar_type() != leaf.dtype) {
      TD_FAIL(TypeError, "CudaGraphModule: key ", leaf.key, " has dtype ",
              DtypeRepr(t.scalar_type()), ", captured with ", DtypeRepr(leaf.dtype));
    }
    if (t.requires_grad()) TD_FAIL(c10::Error, kRequiresGrad, " (key ", leaf.key, ")");
  }
}

TensorDict CudaGraphModule::replay(const TensorDict& td) {
  check_replay_input(td);
  // On the caller's current stream, which the replay and the copies out use too.
  for (const Leaf& leaf : signature_) {
    at::Tensor dst = static_in_.get(leaf.key);
    const at::Tensor src = td.get(leaf.key);
    if (!dst.is_same(src)) dst.copy_(src, /*non_blocking=*/true);
  }
  graph_->replay();
  if (!out_is_input_) return static_out_.clone();
  TensorDict result = td;
  for (const NestedKey& k : written_) result.set(k, static_out_.get(k).clone());
  return result;
}

}  // namespace td::nn
