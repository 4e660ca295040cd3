#include "td/consolidate/consolidate.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstring>
#include <utility>
#include <vector>

#include "td/consolidate/file.h"
#include "td/consolidate/internal/file.h"
#include "td/consolidate/internal/layout.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/leaves.h"
#include "td/executor/executor.h"

namespace td {

using internal::BufferLayout;

namespace {

// The buffer's memory per the options: shared, pinned or an ordinary allocation on `device`.
at::Tensor AllocateOwner(int64_t nbytes, at::Device device, const ConsolidateOptions& options) {
  at::TensorOptions opts = at::TensorOptions().dtype(at::kByte).device(device);
  if (device.is_cpu() && options.pin_memory() && at::globalContext().hasCUDA()) {
    return at::empty({nbytes}, opts.pinned_memory(true));
  }
  at::Tensor owner = device.is_cpu() ? internal::AllocateHost(nbytes, at::kByte)
                                     : at::empty({nbytes}, opts);
  if (device.is_cpu() && options.share_memory()) {
    // Through the member, so that this target does not depend on the shared-memory backend
    // (NOTE [ Backend entry points ]): one leaf, one segment.
    TensorDict holder({{"buffer", owner}}, {});
    holder.share_memory_();
    owner = holder.get("buffer");
  }
  return owner;
}

// Copies leaf i into view i; zeroes the bytes no leaf covers (`layout` is a Plan()).
void FillBuffer(const internal::LeafTree& tree, const std::vector<at::Tensor>& views,
                const at::Tensor& owner, const BufferLayout& layout,
                const parallel::ParallelOptions& threads) {
  const bool cpu = owner.device().is_cpu();
  auto* base = static_cast<uint8_t*>(owner.data_ptr());
  int64_t total = 0;
  for (const auto& s : layout.slots) total += s.nbytes;
  parallel::check_num_threads(threads.num_threads(), "ConsolidateOptions::num_threads");
  parallel::parallel_for(static_cast<int64_t>(views.size()), total, threads, [&](int64_t i) {
    const at::Tensor& src = tree.leaves()[i];
    const auto& slot = layout.slots[i];
    if (slot.nbytes == 0) return;
    try {
      if (cpu && src.device().is_cpu() && src.is_contiguous() && !src.is_conj() && !src.is_neg()) {
        std::memcpy(base + slot.offset, src.data_ptr(), static_cast<size_t>(slot.nbytes));
      } else {
        views[i].copy_(src);
      }
    } catch (...) {
      internal::RethrowWithKey(tree.key(static_cast<size_t>(i)), "consolidating");
    }
  });
  // The gaps: Plan() places each leaf at the aligned end of the one before it.
  for (const auto& s : layout.slots) {
    const int64_t end = s.offset + s.nbytes;
    const int64_t gap = internal::AlignUp(end) - end;
    if (gap > 0 && cpu) std::memset(base + end, 0, static_cast<size_t>(gap));
    if (gap > 0 && !cpu) owner.narrow(0, end, gap).zero_();
  }
}

}  // namespace

bool is_consolidated(const TensorDict& td) {
  return internal::BufferOfTensorDict(td).has_value();
}

std::optional<at::Tensor> consolidated_buffer(const TensorDict& td) {
  std::optional<internal::Buffer> buffer = internal::BufferOfTensorDict(td);
  if (!buffer) return std::nullopt;
  return internal::WholeBuffer(*buffer);
}

TensorDict consolidate(const TensorDict& td, const ConsolidateOptions& options) {
  internal::LeafTree tree(td);
  if (internal::BufferOf(tree.leaves())) return td;
  const std::vector<at::Tensor>& leaves = tree.leaves();
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].layout() != at::kStrided) {
      TD_FAIL(ValueError, "consolidate: the leaf ", tree.key(i).repr(), " is a ",
                       leaves[i].layout(), " tensor; only strided tensors can be consolidated");
    }
  }
  at::Device device = at::kCPU;  // also for a file
  if (options.device()) {
    device = *options.device();
  } else if (!options.filename()) {
    device = td.device() ? *td.device() : leaves.empty() ? device : leaves[0].device();
  }
  if (options.filename() && !device.is_cpu()) {
    TD_FAIL(ValueError, "consolidate: filename and device ", device,
                     " are exclusive (a consolidated file is on the CPU)");
  }
  auto layout = std::make_shared<BufferLayout>(BufferLayout::Plan(leaves));

  std::optional<internal::PendingFile> file;
  at::Tensor owner;
  if (options.filename()) {
    file.emplace(*options.filename(), layout->nbytes,
                 internal::MetadataTail(td, *layout, *options.filename()));
    owner = file->mapping().narrow(0, 0, layout->nbytes);
  } else {
    owner = AllocateOwner(layout->nbytes, device, options);
  }
  std::optional<internal::Buffer> buffer = internal::Adopt(owner, layout);
  TORCH_INTERNAL_ASSERT(buffer.has_value(), "consolidate: a fresh buffer was already registered");
  std::vector<at::Tensor> views = internal::SlotViews(*buffer);
  FillBuffer(tree, views, owner, *layout, options.parallel_options());
  if (file) file->Commit();

  std::optional<at::Device> result_device = td.device();
  if (options.device()) result_device = device;
  if (options.filename() && result_device && !result_device->is_cpu()) result_device = at::kCPU;
  return tree.Rebuild(std::move(views), td.batch_size(), /*check=*/false,
                      std::optional<std::optional<at::Device>>(result_device));
}

void save_consolidated(const TensorDict& td, const std::string& filename) {
  std::optional<internal::Buffer> buffer = internal::BufferOfTensorDict(td);
  if (!buffer) {
    consolidate(td, ConsolidateOptions().filename(filename));
    return;
  }
  const std::string tail = internal::MetadataTail(td, buffer->layout(), filename);
  at::Tensor bytes = internal::WholeBuffer(*buffer);
  internal::WriteFile(filename, tail, bytes.device().is_cpu() ? bytes : bytes.cpu());
}

}  // namespace td
