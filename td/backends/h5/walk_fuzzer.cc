// libFuzzer target for the walk of an HDF5 file's groups (td::h5::internal::Walk, NOTE [ HDF5
// errors ] in h5_io.h). The input is a program that builds a file in memory with HDF5's own API
// (HDF5's core driver): groups nested to any depth, datasets of every type class and shape, soft,
// external and hard links (cycles included), and the batch-size attribute with any text. The walk
// must give a status or a tree, never a crash, a hang or an uncaught exception; and what it
// accepts must keep its promises: every tensor's shape and sub-group's batch size starts with its
// level's batch size, nesting stays within kMaxNestingDepth, only supported dtypes appear, and
// every non-tensor entry (opaque data with any tag and bytes included: NOTE [ HDF5 opaque data ]
// in npy_opaque.h) reads as JSON that serialises, or as an error with a message.
// Malformed bytes on disk are HDF5's own parser's business (fuzzed by HDF5 upstream), not the
// walk's, so the file itself is always well-formed here.
// Built with clang by tests/fuzz/run.sh (`-fsanitize=fuzzer,address,undefined`), and replayed
// over the seed corpus by //tests/fuzz:h5_walk_replay_test in every normal test run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "td/backends/h5/h5_io.h"
#include "td/core/errors.h"

namespace {

using td::h5::internal::Guard;
using td::h5::internal::Hid;
using td::h5::internal::Lock;
using td::h5::internal::Node;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "walk_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

void Check(hid_t file, const std::string& path, const Node& node, int depth) {
  Require(depth <= td::kMaxNestingDepth + 1, "nesting deeper than kMaxNestingDepth");
  Require(node.kind == Node::Kind::kGroup, "a level that is not a group");
  for (const auto& [name, child] : node.children) {
    Require(!name.empty(), "an empty key");
    if (child->kind == Node::Kind::kGroup) {
      Require(child->batch.size() >= node.batch.size(), "a sub-group's batch is shorter");
      for (size_t i = 0; i < node.batch.size(); ++i) {
        Require(child->batch[i] == node.batch[i], "a sub-group's batch does not start with its level's");
      }
      Check(file, td::h5::internal::JoinPath(path, name), *child, depth + 1);
    } else if (child->kind == Node::Kind::kTensor) {
      Require(child->shape.size() >= node.batch.size(), "a tensor shorter than the batch");
      for (size_t i = 0; i < node.batch.size(); ++i) {
        Require(child->shape[i] == node.batch[i], "a tensor that does not start with the batch");
      }
      Require(td::h5::internal::MemType(child->dtype).ok(), "a dtype without a memory type");
    } else {
      absl::StatusOr<nlohmann::json> v = td::h5::internal::ReadNonTensor(
          file, td::h5::internal::JoinPath(path, name), child->kind);
      if (v.ok()) {
        Require(!v->dump().empty(), "a non-tensor value that does not serialise");
      } else {
        Require(!v.status().message().empty(), "a non-tensor error without a message");
      }
    }
  }
}

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  bool done() const { return pos >= size; }
  uint8_t byte() { return pos < size ? data[pos++] : 0; }
  std::string name() {
    static const char kChars[] = "abcxyz01_./ ";
    std::string s;
    const int n = 1 + byte() % 3;
    for (int i = 0; i < n; ++i) s.push_back(kChars[byte() % (sizeof(kChars) - 1)]);
    return s;
  }
};

hid_t TypeOf(uint8_t choice, Hid* owned) {
  switch (choice % 14) {
    case 0: return H5T_NATIVE_INT8;
    case 1: return H5T_NATIVE_UINT8;
    case 2: return H5T_NATIVE_INT16;
    case 3: return H5T_NATIVE_UINT16;
    case 4: return H5T_NATIVE_INT32;
    case 5: return H5T_NATIVE_UINT64;
    case 6: return H5T_NATIVE_INT64;
    case 7: return H5T_NATIVE_FLOAT;
    case 8: return H5T_STD_I64BE;
    case 9: *owned = std::move(*td::h5::internal::MemType(c10::ScalarType::Bool)); return owned->get();
    case 10: *owned = std::move(*td::h5::internal::MemType(c10::ScalarType::Half)); return owned->get();
    case 11:
      *owned = Hid(H5Tcopy(H5T_C_S1));
      H5Tset_size(owned->get(), H5T_VARIABLE);
      return owned->get();
    case 12: *owned = Hid(H5Tvlen_create(H5T_NATIVE_INT)); return owned->get();
    default: {  // opaque data of 4 bytes, tagged as h5py tags numpy data (or not)
      static const char* const kTags[] = {"", "NUMPY:<i4", "NUMPY:<U1", "NUMPY:|b1",
                                          "NUMPY:<c16", "NUMPY:>f4", "NUMPY:|S4", "NUMPY:<U"};
      *owned = Hid(H5Tcreate(H5T_OPAQUE, 4));
      const char* tag = kTags[(choice / 14) % 8];
      if (tag[0] != '\0') H5Tset_tag(owned->get(), tag);
      return owned->get();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  Guard guard(Lock());
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_core(fapl.get(), 1 << 16, /*backing_store=*/0);
  Hid fcpl(H5Pcreate(H5P_FILE_CREATE));
  if (in.byte() % 2 == 0) {
    H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  }
  Hid file(H5Fcreate("walk_fuzzer.h5", H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!file.ok()) return 0;
  std::vector<std::string> stack = {"/"};
  std::vector<std::string> made = {"/"};
  int links = 0;  // few links: each may double the tree the walk builds (it bounds it anyway)
  for (int ops = 0; !in.done() && ops < 200; ++ops) {
    const std::string here = stack.back();
    const std::string path = td::h5::internal::JoinPath(here, in.name());
    switch (in.byte() % 8) {
      case 0: {  // a group, entered
        Hid g(H5Gcreate2(file.get(), path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        if (g.ok()) {
          stack.push_back(path);
          made.push_back(path);
        }
        break;
      }
      case 1:
        if (stack.size() > 1) stack.pop_back();
        break;
      case 2: {  // a dataset of some type and shape
        Hid owned;
        const hid_t type = TypeOf(in.byte(), &owned);
        const int rank = in.byte() % 4;
        std::vector<hsize_t> dims;
        for (int i = 0; i < rank; ++i) dims.push_back(in.byte() % 4);
        Hid space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr));
        Hid ds(H5Dcreate2(file.get(), path.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT));
        if (ds.ok() && H5Tget_class(type) == H5T_OPAQUE) {  // any bytes (else: zeros)
          std::vector<unsigned char> bytes(4 * H5Sget_simple_extent_npoints(space.get()));
          for (unsigned char& b : bytes) b = in.byte();
          if (!bytes.empty()) {
            H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
          }
        }
        if (ds.ok()) made.push_back(path);
        break;
      }
      case 3:  // a soft link: to something made, or to nowhere
        if (++links > 6) break;
        H5Lcreate_soft(in.byte() % 2 ? made[in.byte() % made.size()].c_str() : "/nowhere",
                       file.get(), path.c_str(), H5P_DEFAULT, H5P_DEFAULT);
        break;
      case 4:
        H5Lcreate_external("elsewhere.h5", "/x", file.get(), path.c_str(), H5P_DEFAULT,
                           H5P_DEFAULT);
        break;
      case 5:  // a hard link to something made (an ancestor makes a cycle)
        if (++links > 6) break;
        H5Lcreate_hard(file.get(), made[in.byte() % made.size()].c_str(), file.get(),
                       path.c_str(), H5P_DEFAULT, H5P_DEFAULT);
        break;
      case 6: {  // the batch-size attribute, with any text
        std::string text = in.byte() % 2 ? "{\"batch_size\": [" : "";
        const int n = in.byte() % 12;
        for (int i = 0; i < n; ++i) text.push_back(static_cast<char>(in.byte()));
        (void)td::h5::internal::WriteAttr(file.get(), here, td::h5::internal::kMetaAttr, text);
        break;
      }
      default: {  // the JSON marker on a scalar string
        (void)td::h5::internal::WriteNonTensor(file.get(), path, std::string(1, 'a' + in.byte() % 26));
        if (in.byte() % 2) (void)td::h5::internal::WriteAttr(file.get(), path, td::h5::internal::kJsonAttr, 1);
        break;
      }
    }
  }
  H5Eclear2(H5E_DEFAULT);
  std::optional<std::vector<int64_t>> batch;
  if (in.byte() % 3 == 0) batch = std::vector<int64_t>{in.byte() % 4};
  for (const std::string& group : {std::string("/"), made[in.byte() % made.size()]}) {
    absl::StatusOr<std::unique_ptr<Node>> tree =
        td::h5::internal::Walk(file.get(), "walk_fuzzer.h5", group, batch);
    if (tree.ok()) {
      Check(file.get(), group, **tree, 0);
      if (batch) Require((*tree)->batch == *batch, "the given batch size was not kept");
    } else {
      Require(!tree.status().message().empty(), "an error without a message");
    }
  }
  return 0;
}
