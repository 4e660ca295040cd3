// Internal to //td/backends/h5: every HDF5 call of the backend, behind one lock: the walk of a
// file's groups into a Node tree (walk.cc, also fuzzed), dataset reads and writes, attributes.
//
// NOTE [ One HDF5 lock ]
// Debian's libhdf5 is the serial build (no --enable-threadsafe): two threads inside the library
// at once corrupt its global state, even on different files. Every HDF5 call of this backend
// runs under one process-wide recursive mutex, Lock() (a write may walk and read), which also
// guards the Node trees. Reads of several threads are serialised in the library and parallel
// outside it (reordering rows, the core's copies). A program calling HDF5 itself from other
// threads must take td::h5::internal::Lock() too.
//
// NOTE [ HDF5 errors ]
// HDF5's automatic error printing is off; ErrorText() turns its error stack into our message.
// Every problem with a file is a td::h5::H5Error naming the file and the key: a file that is
// missing, truncated or not HDF5 (HDF5's reason), a dtype with no tensor counterpart (vlen
// sequences, compounds, references, unsigned 16-64 bit where LibTorch lacks them: the class
// named; opaque data is non-tensor data), an external link (its target named), a dangling soft
// link, a link cycle, groups nested past kMaxNestingDepth, and what a structure::Builder refuses
// (NOTE [ Structure codec ] in td/structure/structure.h: leading dims that are not the batch
// size, both shapes named, or bytes past int64). All of it is checked on opening; later reads
// meet only I/O errors, sizes past the machine's memory and opaque data too large for a value
// (kMaxOpaqueBytes). Bad arguments stay ValueError / KeyError / TypeError, as on every backend.
#pragma once

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace td::h5::internal {

// An H5Literate / H5Aiterate2 callback appending each name to the std::vector<std::string> `out`.
template <class Info>
herr_t AppendName(hid_t, const char* name, const Info*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// The lock of NOTE [ One HDF5 lock ]. Also turns HDF5's error printing off, once.
std::recursive_mutex& Lock();
using Guard = std::lock_guard<std::recursive_mutex>;

// HDF5's error stack as one line ("H5Fopen: unable to open file: ...; ..."), then cleared.
std::string ErrorText();

// An HDF5 identifier, closed on destruction (with the call its type needs). Use under Lock().
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : id_(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, -1)) {}
  Hid& operator=(Hid&& o) noexcept {  // the old identifier closes here, under the caller's lock
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
};

// One entry of a level, as the walk found it.
struct Node {
  enum class Kind {
    kGroup,    // a nested TensorDict
    kTensor,   // a dataset read as a tensor
    kString,   // a scalar string dataset: a JSON string
    kStrings,  // an array of strings: a JSON array of strings
    kJson,     // a scalar string dataset with the attribute tensordict_json: parsed JSON
    kOpaque,   // an opaque dataset: NOTE [ HDF5 opaque data ] in npy_opaque.h
  };
  Kind kind = Kind::kGroup;
  at::ScalarType dtype = at::kFloat;  // kTensor
  std::vector<int64_t> shape;         // kTensor, kStrings, kOpaque: the dataset's shape
  std::vector<int64_t> batch;         // kGroup: the level's batch size in the file
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> children;  // kGroup, in order
  // kTensor: the dataset, opened on its first read and kept open while the node lives.
  Hid dataset;

  Node* child(std::string_view name) const;
  bool erase(std::string_view name);
};

// NOTE [ HDF5 bools ]
// h5py stores a bool as an enum of int8 {FALSE = 0, TRUE = 1}, but another writer may store other
// bytes (5, 0xff), which HDF5's enum conversion does not check, and a LibTorch bool holding a
// byte other than 0 or 1 is undefined behaviour. So bools are read as their stored bytes (the
// file's type as the memory type) and compared with 0: nonzero reads as true, as in numpy.

// The tensor dtype of an HDF5 datatype (NOTE [ HDF5 layout ] in h5.h), or kInvalidArgument
// naming the HDF5 class of a type without one.
absl::StatusOr<at::ScalarType> TensorDtypeOf(hid_t type);
// The in-memory HDF5 type of a dtype (h5py's bool enum, h5py's float16), or kInvalidArgument
// naming a dtype HDF5 cannot hold here (complex, bfloat16, quantized).
absl::StatusOr<Hid> MemType(at::ScalarType dtype);
// A string attribute (fixed or variable length) of `obj`.
absl::StatusOr<std::string> ReadStringAttr(hid_t obj, const char* name);
// "[3, 4]".
std::string ShapeText(const std::vector<int64_t>& shape);

// The attribute every group we write carries (NOTE [ HDF5 layout ] in h5.h).
inline constexpr const char* kMetaAttr = "__tensordict__";
// The attribute of a string dataset holding JSON text.
inline constexpr const char* kJsonAttr = "tensordict_json";

// Walks the group `group` of `file` (named `filename` in errors) into a tree, checking what
// NOTE [ HDF5 errors ] lists; `batch`: the group's batch size when given. kDataLoss for a file
// that does not fit (H5Error), kNotFound for a missing group.
absl::StatusOr<std::unique_ptr<Node>> Walk(hid_t file, const std::string& filename,
                                           const std::string& group,
                                           const std::optional<std::vector<int64_t>>& batch);

// A selection of one batch dim: one position (the dim is dropped), an arithmetic range, or a
// list of positions (any order, repeats allowed).
struct DimSel {
  enum class Kind { kInt, kRange, kList };
  Kind kind = Kind::kRange;
  int64_t start = 0;  // kInt: the position
  int64_t step = 1;
  int64_t count = 0;
  std::vector<int64_t> list;

  static DimSel All(int64_t size) { return DimSel{Kind::kRange, 0, 1, size, {}}; }
  int64_t size() const { return kind == Kind::kInt ? 1 : kind == Kind::kList ? list.size() : count; }
  int64_t at(int64_t i) const {
    return kind == Kind::kList ? list[i] : kind == Kind::kInt ? start : start + i * step;
  }
};
// The leading dims' selections; empty: everything.
using Selection = std::vector<DimSel>;

// The shape a selection gives a file shape: kept dims' sizes, then the dims after the selection.
std::vector<int64_t> SelectedShape(const Selection& sel, const std::vector<int64_t>& shape);

// Reads the dataset at `path` (absolute; `dataset`, when open, is used instead) through `sel`
// into a new tensor of `dtype` and SelectedShape(sel, shape).
absl::StatusOr<at::Tensor> ReadTensor(hid_t file, const std::string& path, at::ScalarType dtype,
                                      const std::vector<int64_t>& shape, const Selection& sel,
                                      hid_t dataset = -1);
// Writes `value` (SelectedShape(sel, shape), any dtype: converted to `dtype`) into the selection.
absl::Status WriteTensor(hid_t file, const std::string& path, at::ScalarType dtype,
                         const std::vector<int64_t>& shape, const Selection& sel,
                         const at::Tensor& value);

struct CreateLayout {
  bool gzip = false;
  int level = 4;
  int64_t chunk_rows = 0;
};
// Creates a dataset (zero-filled) of `shape` and `dtype` at `path`. TypeError-worthy dtypes are
// kInvalidArgument naming the dtype.
absl::Status CreateDataset(hid_t file, const std::string& path, at::ScalarType dtype,
                           const std::vector<int64_t>& shape, const CreateLayout& layout);
// Creates a group that tracks link creation order, with the batch-size attribute.
absl::Status CreateGroup(hid_t file, const std::string& path, const std::vector<int64_t>& batch);
absl::Status WriteBatchAttr(hid_t file, const std::string& path, const std::vector<int64_t>& batch);

// A non-tensor entry (Kind kString, kStrings, kJson, kOpaque) as JSON.
absl::StatusOr<nlohmann::json> ReadNonTensor(hid_t file, const std::string& path, Node::Kind kind);
// Writes `value` as NOTE [ HDF5 layout ] in h5.h says; returns the Kind written (kString,
// kOpaque, kJson), kInvalidArgument for a malformed {"hdf5_opaque": ...} description.
absl::StatusOr<Node::Kind> WriteNonTensor(hid_t file, const std::string& path,
                                          const nlohmann::json& value);

// Every attribute of the object at `path` as a JSON object (h5py.Empty: null).
absl::StatusOr<nlohmann::json> ReadAttrs(hid_t file, const std::string& path);
// Writes attribute `name` (what H5TensorDict::set_attr takes), replacing one of that name.
absl::Status WriteAttr(hid_t file, const std::string& path, const std::string& name,
                       const nlohmann::json& value);

// `parent` + "/" + `name` (parent "/" gives "/name").
std::string JoinPath(const std::string& parent, std::string_view name);

}  // namespace td::h5::internal
