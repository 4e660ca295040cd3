// A list of tensors borrowed without touching their reference counts, as ATen's
// c10::MaybeOwned<Tensor> borrows one (c10::MaybeOwnedTraits, public in every LibTorch this
// library builds against; see NOTE [ LibTorch versions ] in td/compat/torch.h). Used where one
// ATen call takes a TensorList of tensors that stay alive elsewhere for the whole call, e.g. a
// lazy stack's get(): at::stack over its members' tensors. Tensors computed on the fly are kept
// in the list (own()) and borrowed from there. Borrows are released, never destroyed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/MaybeOwned.h>

#include <cstddef>
#include <vector>

namespace td::compat {

class BorrowedTensors {
 public:
  // Room for `n` tensors (borrowed and owned together).
  explicit BorrowedTensors(size_t n) : n_(n) { parts_.reserve(n); }
  BorrowedTensors(const BorrowedTensors&) = delete;
  BorrowedTensors& operator=(const BorrowedTensors&) = delete;
  ~BorrowedTensors() {
    for (at::Tensor& t : parts_) Traits::destroyBorrow(t);
  }
  // `t` must outlive this list.
  void borrow(const at::Tensor& t) { parts_.push_back(Traits::createBorrow(t)); }
  // Keeps `t` alive in the list, then borrows it.
  void own(at::Tensor t) {
    owned_.reserve(n_);  // never reallocates while borrowed from
    owned_.push_back(std::move(t));
    borrow(owned_.back());
  }
  const std::vector<at::Tensor>& parts() const { return parts_; }

 private:
  using Traits = c10::MaybeOwnedTraits<at::Tensor>;
  std::vector<at::Tensor> parts_;
  size_t n_;
  std::vector<at::Tensor> owned_;
};

}  // namespace td::compat
