// TensorClass memmap directories in Python tensordict's tensorclass layout: round trips,
// the layout itself (meta.json "_type" + _tensordict/), loading Python-layout directories
// (upstream tensordict/tensorclass.py _memmap_ / _load_memmap, mirrored a1a061e), load_memmap_any
// and the registry, and the errors.
#include "td/tensorclass/memmap.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::Episode;
using test::MyData;
using test::Step;
using testing_util::FreshDir;

TD_REGISTER_TENSORCLASS(Step);

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}
nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(testing_util::ReadText(path));
}

// A relative prefix whose parent is missing: every level is created (mkdir -p), the first too.
TEST(TensorClassMemmap, RelativePrefixCreatesItsParents) {
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(FreshDir("tc-relative"));
  struct Restore {
    std::filesystem::path dir;
    ~Restore() { std::filesystem::current_path(dir); }
  } restore{cwd};
  Episode ep = test::SampleEpisode().clone();
  ep.memmap("a/b");
  EXPECT_EQ(testing_util::ListNames("a/b"), (std::vector<std::string>{"_tensordict", "meta.json"}));
  EXPECT_TRUE((Episode::load_memmap("a/b") == ep).all());
}

TEST(TensorClassMemmap, RoundTripAndLayout) {
  const std::string dir = FreshDir("tc") + "/episode";
  Episode ep = test::SampleEpisode().clone();
  ep.set_weight(at::ones({4}));
  Episode saved = ep.memmap(dir);
  EXPECT_TRUE(saved.is_memmap());
  EXPECT_TRUE((saved == ep).all());
  // Upstream's layout: meta.json names the class, the fields live in _tensordict/.
  EXPECT_EQ(testing_util::ListNames(dir), (std::vector<std::string>{"_tensordict", "meta.json"}));
  EXPECT_EQ(ReadJson(dir + "/meta.json"),
            (nlohmann::json{{"_type", "<class 'my_pkg.Episode'>"}}));
  // The fields are an ordinary TensorDict directory (non-tensor fields as NonTensorData).
  TensorDict fields = TensorDict::load_memmap(dir + "/_tensordict");
  EXPECT_EQ(fields.get_non_tensor("name"), "ep");
  EXPECT_EQ(fields.get_non_tensor({"step", "tag"}), "s");
  EXPECT_TRUE(at::equal(fields.get("reward"), ep.reward()));

  Episode loaded = Episode::load_memmap(dir);
  EXPECT_TRUE(loaded.is_memmap());
  EXPECT_TRUE((loaded == ep).all());
  EXPECT_EQ(loaded.name(), "ep");
  EXPECT_EQ(loaded.seed(), 7);
  EXPECT_EQ(loaded.gamma(), 0.5);
  EXPECT_EQ(loaded.info(), (nlohmann::json{{"k", {1, 2}}}));
  EXPECT_EQ(loaded.step().tag(), "s");
  ASSERT_TRUE(loaded.weight());
  // Writes to the loaded tensors go to the files.
  loaded.reward().fill_(3);
  EXPECT_TRUE((Episode::load_memmap(dir).reward() == 3).all().item<bool>());
  // Writing again replaces the directory (exists_ok), or refuses when asked.
  ep.memmap(dir);
  TD_EXPECT_THROW_MSG(ep.memmap(dir, MemmapOptions().exists_ok(false)), ValueError,
                      {dir, "exists_ok"});
}

TEST(TensorClassMemmap, InPlaceAndLike) {
  const std::string base = FreshDir("tc");
  test::SeedData seed = test::MakeSeedData();
  MyData data(seed.images.narrow(0, 0, 10), seed.mask.narrow(0, 0, 10),
              seed.label.narrow(0, 0, 10), {10});
  MyData copy = data.clone();
  MyData& same = copy.memmap_(base + "/inplace");
  EXPECT_EQ(&same, &copy);
  EXPECT_TRUE(copy.is_memmap());
  EXPECT_TRUE((copy == data).all());
  MyData like = data.memmap_like(base + "/like");
  EXPECT_EQ(like.image().sizes(), data.image().sizes());
  EXPECT_EQ(like.image().abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(MyData::load_memmap(base + "/like").label().sizes(), at::IntArrayRef({10}));
  EXPECT_EQ(ReadJson(base + "/like/meta.json")["_type"], "<class '__main__.MyData'>");
}

// A directory as Python tensordict writes it for
//   @tensorclass class Step: obs: torch.Tensor; tag: str
// saved with Step(obs=..., tag="a", batch_size=[3]).memmap(prefix): meta.json {"_type":
// "<class '__main__.Step'>"} and the fields (tag as NonTensorData) in _tensordict/, which has
// the TensorDict directory format the memmap backend writes. Older releases kept JSON
// non-tensor fields (and None-valued ones) at the top level of meta.json; both load.
TEST(TensorClassMemmap, PythonLayouts) {
  const std::string base = FreshDir("tc");
  const at::Tensor obs = at::arange(6.0).view({3, 2});
  TensorDict({{"obs", obs}, {"tag", "a"}}, {3}).memmap(base + "/new/_tensordict");
  WriteText(base + "/new/meta.json", R"({"_type": "<class '__main__.Step'>"})");
  Step s = Step::load_memmap(base + "/new");
  EXPECT_EQ(s.tag(), "a");
  EXPECT_TRUE(at::equal(s.obs(), obs));

  TensorDict({{"obs", obs}}, {3}).memmap(base + "/old/_tensordict");
  WriteText(base + "/old/meta.json",
            R"({"_type": "<class 'my_module.Step'>", "tag": "b", "unused": null})");
  EXPECT_EQ(Step::load_memmap(base + "/old").tag(), "b");  // matched by class name
  // Episode's optional field may be null at the top level (Python's None).
  Episode ep = test::SampleEpisode();
  ep.memmap(base + "/ep");
  WriteText(base + "/ep/meta.json", R"({"_type": "<class 'my_pkg.Episode'>", "weight": null})");
  EXPECT_FALSE(Episode::load_memmap(base + "/ep").weight());
}

// A nested tensorclass field as Python tensordict writes it (upstream _td_memmap.py
// _update_metadata and tensorclass.py _memmap_, mirrored a1a061e): the parent level's meta.json
// names the entry {"type": "Step"} and the field's directory is itself a tensorclass directory,
// meta.json {"_type": ...} + _tensordict/ (non-tensor fields in _tensordict/ since 0.5, at the
// top of meta.json before). Made here from the C++ layout by moving the level one down.
TEST(TensorClassMemmap, PythonNestedTensorClassField) {
  namespace fs = std::filesystem;
  for (const bool fields_in_meta : {false, true}) {
    const std::string base = FreshDir("tc");
    Episode ep = test::SampleEpisode();
    ep.memmap(base + "/ep");
    const std::string level = base + "/ep/_tensordict";
    fs::rename(level + "/step", level + "/step.tmp");
    fs::create_directory(level + "/step");
    fs::rename(level + "/step.tmp", level + "/step/_tensordict");
    nlohmann::json inner = {{"_type", "<class '__main__.Step'>"}};
    if (fields_in_meta) {
      fs::remove_all(level + "/step/_tensordict/tag");
      nlohmann::json inner_level = ReadJson(level + "/step/_tensordict/meta.json");
      inner_level.erase("tag");
      WriteText(level + "/step/_tensordict/meta.json", inner_level.dump());
      inner["tag"] = "s";
    }
    WriteText(level + "/step/meta.json", inner.dump());
    nlohmann::json outer = ReadJson(level + "/meta.json");
    outer["step"] = {{"type", "Step"}};
    WriteText(level + "/meta.json", outer.dump());

    Episode loaded = Episode::load_memmap(base + "/ep");
    EXPECT_EQ(loaded.step().batch_size(), at::IntArrayRef({4, 2})) << fields_in_meta;
    EXPECT_TRUE(at::equal(loaded.step().obs(), ep.step().obs())) << fields_in_meta;
    EXPECT_EQ(loaded.step().tag(), "s") << fields_in_meta;
    EXPECT_TRUE(at::equal(loaded.reward(), ep.reward())) << fields_in_meta;
    EXPECT_EQ(loaded.name(), "ep");
  }
}

TEST(TensorClassMemmap, LoadAny) {
  const std::string base = FreshDir("tc");
  Step(at::ones({3, 2}), "a", {3}).memmap(base + "/step");
  LoadedMemmap any = load_memmap_any(base + "/step");
  EXPECT_TRUE(any.is_tensorclass());
  EXPECT_TRUE(any.holds<Step>());
  EXPECT_EQ(any.python_type(), "__main__.Step");
  EXPECT_EQ(any.get<Step>().tag(), "a");
  TD_EXPECT_THROW_MSG(any.get<MyData>(), TypeError, {"__main__.Step", "not a MyData"});
  // An unregistered class gives the TensorDict of its fields.
  test::SeedData seed = test::MakeSeedData();
  MyData(seed.images.narrow(0, 0, 2), seed.mask.narrow(0, 0, 2), seed.label.narrow(0, 0, 2), {2})
      .memmap(base + "/mydata");
  LoadedMemmap plain = load_memmap_any(base + "/mydata");
  EXPECT_FALSE(plain.is_tensorclass());
  EXPECT_EQ(plain.python_type(), "__main__.MyData");
  EXPECT_EQ(plain.tensordict().get("label").sizes(), at::IntArrayRef({2}));
  EXPECT_EQ(MyData::from_tensordict(plain.tensordict()).batch_size(), at::IntArrayRef({2}));
  // A TensorDict directory gives the TensorDict.
  TensorDict({{"x", at::zeros({2})}}, {2}).memmap(base + "/td");
  LoadedMemmap td_dir = load_memmap_any(base + "/td");
  EXPECT_FALSE(td_dir.is_tensorclass());
  EXPECT_TRUE(td_dir.tensordict().contains("x"));
  // Registering another type under a taken name is refused.
  TD_EXPECT_THROW_MSG(register_tensorclass<MyData>("__main__.Step"), ValueError,
                      {"__main__.Step", "already registered for Step"});
}

TEST(TensorClassMemmap, Errors) {
  const std::string base = FreshDir("tc");
  Step(at::ones({3, 2}), "a", {3}).memmap(base + "/step");
  TD_EXPECT_THROW_MSG(MyData::load_memmap(base + "/step"), MemmapError,
                      {"meta.json", "<class '__main__.Step'>", "MyData"});
  TensorDict({{"x", at::zeros({2})}}, {2}).memmap(base + "/td");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/td"), MemmapError,
                      {"holds a TensorDict, not a Step"});
  TD_EXPECT_THROW_MSG(Step(at::ones({3, 2}), "a", {3}).memmap(base + "/td"), ValueError,
                      {"holds a TensorDict memmap directory"});
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/nothing"), MemmapError, {"meta.json", "missing"});
  // meta.json is untrusted JSON (NOTE [ Untrusted JSON ]): nested past the limit of every reader,
  // it is refused before it is parsed; malformed, named.
  Step(at::ones({3, 2}), "a", {3}).memmap(base + "/deep");
  WriteText(base + "/deep/meta.json", R"({"_type": "<class '__main__.Step'>", "x": )" +
                                          std::string(600, '[') + std::string(600, ']') + "}");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/deep"), MemmapError,
                      {"deep/meta.json", "nested deeper than 512"});
  WriteText(base + "/deep/meta.json", R"({"_type": )");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/deep"), MemmapError,
                      {"deep/meta.json", "malformed JSON"});
  // A Python directory with pickled fields is refused, never unpickled.
  WriteText(base + "/step/other.pickle", "\x80\x04.");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/step"), MemmapError, {"other.pickle"});
  // Stored fields that do not match the class: the from_tensordict errors.
  TensorDict({{"obs", at::ones({3, 2})}, {"extra", at::ones({3})}}, {3})
      .memmap(base + "/odd/_tensordict");
  WriteText(base + "/odd/meta.json", R"({"_type": "<class '__main__.Step'>"})");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/odd"), KeyError,
                      {"missing field ['tag']", "key ['extra'] is not a field"});
  // A non-empty directory that is not a memmap directory is never written into.
  WriteText(base + "/notes.txt", "x");
  TD_EXPECT_THROW_MSG(Step(at::ones({3, 2}), "a", {3}).memmap(base), ValueError,
                      {"non-empty directory"});
}

// Number fields out of their type's range in a directory (as NonTensorData in _tensordict/ and
// at the top of meta.json, as older Python releases wrote them): a TypeError naming the field,
// the value and the type, never a wrapped value.
TEST(TensorClassMemmap, NumberFieldsOutOfRange) {
  using test::Counts;
  const std::string base = FreshDir("tc");
  TensorDict({{"count", NonTensorData(nlohmann::json(int64_t{5000000000}))},
              {"small", NonTensorData(nlohmann::json(1))},
              {"scale", NonTensorData(nlohmann::json(1.0))}},
             {})
      .memmap(base + "/nt/_tensordict");
  WriteText(base + "/nt/meta.json", R"({"_type": "<class '__main__.Counts'>"})");
  TD_EXPECT_THROW_MSG(Counts::load_memmap(base + "/nt"), TypeError,
                      {"field 'count'", "5000000000", "int32_t"});

  TensorDict({{"count", NonTensorData(nlohmann::json(1))},
              {"scale", NonTensorData(nlohmann::json(1.0))}},
             {})
      .memmap(base + "/meta/_tensordict");
  WriteText(base + "/meta/meta.json", R"({"_type": "<class '__main__.Counts'>", "small": 300})");
  TD_EXPECT_THROW_MSG(Counts::load_memmap(base + "/meta"), TypeError,
                      {"field 'small'", "300", "uint8_t"});
  WriteText(base + "/meta/meta.json", R"({"_type": "<class '__main__.Counts'>", "small": 7})");
  EXPECT_EQ(Counts::load_memmap(base + "/meta").small(), 7);
}

// _tensordict must be a directory: a regular file or a symlink there is named as what it is.
TEST(TensorClassMemmap, TensorDictEntryThatIsNotADirectory) {
  namespace fs = std::filesystem;
  const std::string base = FreshDir("tc");
  Step(at::ones({3, 2}), "a", {3}).memmap(base + "/step");
  fs::rename(base + "/step/_tensordict", base + "/fields");
  WriteText(base + "/step/_tensordict", "not a directory");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/step"), MemmapError,
                      {base + "/step/_tensordict", "is a regular file", "directory _tensordict"});
  fs::remove(base + "/step/_tensordict");
  fs::create_directory_symlink(base + "/fields", base + "/step/_tensordict");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/step"), MemmapError,
                      {base + "/step/_tensordict", "is a symlink"});
  fs::remove(base + "/step/_tensordict");
  TD_EXPECT_THROW_MSG(Step::load_memmap(base + "/step"), MemmapError,
                      {base + "/step/_tensordict", "missing"});
  fs::rename(base + "/fields", base + "/step/_tensordict");
  EXPECT_EQ(Step::load_memmap(base + "/step").tag(), "a");
}

}  // namespace
}  // namespace td
