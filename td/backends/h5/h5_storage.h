// Internal to //td/backends/h5: the open file every TensorDict of it shares, and the storage of
// one level through a selection of rows (NOTE [ HDF5 layout ] in h5.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "td/backends/h5/h5_io.h"
#include "td/core/storage.h"

namespace td::h5::internal {

// One open file and the tree the walk found (kept in step with every structural write), shared
// by every storage of the file; guarded by Lock(). Closed (and flushed) with the last of them.
struct H5File {
  ~H5File();
  std::string filename;
  Hid fid;
  bool writable = false;
  std::string root_path = "/";  // the opened group
  std::unique_ptr<Node> root;
  CreateLayout layout;

  // The HDF5 path of `key` in the group `level` (parts below the opened group).
  std::string Path(const std::vector<std::string>& level, std::string_view key) const;
  // The group node of `level`, or nullptr when it is gone.
  Node* Level(const std::vector<std::string>& level) const;
};

class H5Storage final : public LazyStorage {
 public:
  // The group `level` of `file` through `sel` (empty: every row), of batch size `batch`.
  H5Storage(std::shared_ptr<H5File> file, std::vector<std::string> level, Selection sel,
            std::vector<int64_t> batch);

  std::string_view backend_id() const override { return "h5"; }
  Capabilities capabilities() const override;
  size_t size() const override;
  std::vector<std::string> keys() const override;
  bool contains(std::string_view key) const override;
  std::optional<Value> get(std::string_view key) const override;
  std::optional<EntryMeta> meta(std::string_view key) const override;
  void set(std::string_view key, Value value) override;
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override;
  bool rename_key(std::string_view old_key, std::string_view new_key) override;
  void set_batch_size(std::vector<int64_t> batch_size) override;
  std::optional<TensorDict> index(at::ArrayRef<at::indexing::TensorIndex> indices) const override;
  bool index_put_(at::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value) override;

  const std::shared_ptr<H5File>& file() const { return file_; }
  const std::vector<std::string>& level() const { return level_; }
  const Selection& selection() const { return sel_; }

 private:
  // Under Lock(): the group node of this level; KeyError when it was deleted.
  Node* level_node() const;
  // Takes Lock(): the batch size of this level's group in the file.
  std::vector<int64_t> file_batch() const;
  std::shared_ptr<H5Storage> Sub(std::string_view key, const Node& group) const;
  void RequireWritable(std::string_view what, std::string_view key) const;
  // Writes `value` under `key` of the group `lvl` (at `level`) through this storage's selection.
  void Put(const std::vector<std::string>& level, Node* lvl, std::string_view key,
           const Value& value) const;
  // `indices` composed into the selection, or nullopt for an index it cannot express (h5.h).
  std::optional<Selection> Compose(at::ArrayRef<at::indexing::TensorIndex> indices) const;

  std::shared_ptr<H5File> file_;
  std::vector<std::string> level_;
  Selection sel_;
};

}  // namespace td::h5::internal
