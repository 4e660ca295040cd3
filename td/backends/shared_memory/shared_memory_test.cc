// share_memory_, the "shared_memory" backend, and attaching from real processes: a fork()ed
// child and an unrelated program (attach_helper, path in argv[1]).
#include "td/backends/shared_memory/shared_memory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>

#include "nlohmann/json.hpp"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/storage.h"
#include "td/core/testing.h"

extern char** environ;

namespace td {
namespace {

std::string g_helper;  // path of attach_helper

TensorDict Sample() {
  return TensorDict({{"x", at::ones({4, 3})},
                     {"n", {{"y", at::arange(4, at::kLong)}}},
                     {"tag", "shared!"}},
                    {4});
}

// Lines of /proc/self/fd links and /proc/self/maps that mention our memfd segments.
int LiveSegments() {
  int n = 0;
  for (const std::string& fd : testing_util::ListNames("/proc/self/fd")) {
    char link[256];
    const ssize_t len = ::readlink(("/proc/self/fd/" + fd).c_str(), link, sizeof(link) - 1);
    if (len > 0 && std::string(link, len).rfind("/memfd:td-shm", 0) == 0) ++n;
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:td-shm") != std::string::npos) ++n;
  }
  return n;
}

// Runs `argv` to completion; returns its exit status (or -1) and its stdout in `out`.
int RunProcess(const std::vector<std::string>& args, std::string* out) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipefd[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return -1;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof(buf))) > 0;) out->append(buf, n);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SharedMemoryTest, ShareMemoryMovesEveryLeafInPlace) {
  TensorDict td = Sample();
  TensorDict alias = td;
  at::Tensor before = td.get("x");
  td.share_memory_();
  EXPECT_TRUE(alias.is_shared());
  EXPECT_TRUE(alias.is_locked());
  EXPECT_TRUE(IsSharedMemoryTensor(alias.get("x")));
  EXPECT_TRUE(IsSharedMemoryTensor(alias.get({"n", "y"})));
  EXPECT_FALSE(IsSharedMemoryTensor(before));
  assert_allclose(td, Sample());
  EXPECT_EQ(td.get_non_tensor("tag"), "shared!");
  const void* data = td.get("x").data_ptr();
  td.share_memory_();  // already shared: nothing moves
  EXPECT_EQ(td.get("x").data_ptr(), data);
  EXPECT_FALSE(Sample().is_shared());
  EXPECT_FALSE(TensorDict().is_shared());
}

// A lazy stack's sub-TensorDicts are storages its get() makes on the fly: every one of them
// stays alive while share_memory_ moves the members' leaves and marks the levels.
TEST(SharedMemoryTest, ShareMemoryOnALazyStackReachesEveryMember) {
  auto member = [](int64_t v) {
    return TensorDict({{"x", at::full({4, 3}, v)}, {"n", {{"y", at::full({4}, v, at::kLong)}}}},
                      {4});
  };
  TensorDict a = member(1), b = member(2);
  TensorDict s = lazy_stack({a, b}, 0);
  s.share_memory_();
  for (const TensorDict& m : {a, b}) {
    EXPECT_TRUE(IsSharedMemoryTensor(m.get("x")));
    EXPECT_TRUE(IsSharedMemoryTensor(m.get({"n", "y"})));
  }
  assert_allclose(s, lazy_stack({member(1), member(2)}, 0));
}

TEST(SharedMemoryTest, ForkedChildSeesAndWritesTheSameMemory) {
  TensorDict td = Sample();
  td.share_memory_();
  int to_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char c;
    if (::read(to_child[0], &c, 1) != 1) ::_exit(2);
    // The parent wrote 5 after the fork: the child must see it.
    const bool saw = td.get("x").eq(5).all().item<bool>();
    td.get("x").fill_(7);
    td.get({"n", "y"}).add_(10);
    ::_exit(saw ? 0 : 3);
  }
  td.get("x").fill_(5);
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not see the parent's write";
  EXPECT_TRUE(td.get("x").eq(7).all().item<bool>());
  EXPECT_TRUE(td.get({"n", "y"}).equal(at::arange(4, at::kLong) + 10));
  ::close(to_child[0]);
  ::close(to_child[1]);
}

TEST(SharedMemoryTest, UnrelatedProcessAttachesByHandle) {
  ASSERT_FALSE(g_helper.empty());
  TensorDict td = Sample();
  td.share_memory_();
  std::string out;
  EXPECT_EQ(RunProcess({g_helper, SharedMemoryHandle(td)}, &out), 0);
  EXPECT_NE(out.find("shared!"), std::string::npos) << out;
  EXPECT_TRUE(td.get("x").eq(42).all().item<bool>());
  EXPECT_TRUE(td.get({"n", "y"}).equal(at::arange(4, at::kLong) + 1000));
}

TEST(SharedMemoryTest, NothingIsLeftBehindOnceTheLastUserIsGone) {
  const std::vector<std::string> dev_shm = testing_util::ListNames("/dev/shm");
  const int before = LiveSegments();
  {
    TensorDict td = Sample();
    td.share_memory_();
    TensorDict attached = AttachSharedMemory(SharedMemoryHandle(td));
    EXPECT_EQ(attached.backend(), "shared_memory");
    attached.get("x").fill_(3);  // same memory, seen through the other mapping
    EXPECT_TRUE(td.get("x").eq(3).all().item<bool>());
    EXPECT_GT(LiveSegments(), before);
    EXPECT_EQ(testing_util::ListNames("/dev/shm"), dev_shm);  // no named objects, ever
  }
  EXPECT_EQ(LiveSegments(), before);
  EXPECT_EQ(testing_util::ListNames("/dev/shm"), dev_shm);
}

TEST(SharedMemoryTest, Backend) {
  TensorDict t = MakeTensorDict("shared_memory", StorageSpec().batch_size({2}));
  EXPECT_EQ(t.backend(), "shared_memory");
  EXPECT_TRUE(t.storage().capabilities().has(Capability::kCrossProcess));
  t.set("a", at::ones({2, 3}));
  t.set({"n", "b"}, at::zeros({2}, at::kInt));
  t.set("s", "text");
  EXPECT_TRUE(t.is_shared());
  EXPECT_TRUE(IsSharedMemoryTensor(t.get("a")));
  EXPECT_EQ(t.get_tensordict("n").backend(), "shared_memory");
  EXPECT_TRUE(IsSharedMemoryTensor(t.get({"n", "b"})));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    t.get({"n", "b"}).fill_(9);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(t.get({"n", "b"}).eq(9).all().item<bool>());
  TensorDict attached = AttachSharedMemory(SharedMemoryHandle(t));
  assert_allclose(attached, t);
  EXPECT_TRUE(t.del_("a").contains("s"));
}

TEST(SharedMemoryTest, ViewsKeepTheirPlaceInTheHandle) {
  TensorDict t = MakeTensorDict("shared_memory", StorageSpec().batch_size({}));
  at::Tensor base = ToSharedMemory(at::arange(12, at::kFloat).view({3, 4}));
  t.set("col", base.index({at::indexing::Slice(), 1}));  // a strided view of a shared tensor
  TensorDict attached = AttachSharedMemory(SharedMemoryHandle(t));
  EXPECT_TRUE(attached.get("col").equal(at::tensor({1.0f, 5.0f, 9.0f})));
  attached.get("col").fill_(-1);
  EXPECT_EQ(base.index({2, 1}).item<float>(), -1);
}

// Empty leaves (an empty batch dim, an empty trailing dim) have no data pointer: the handle still
// names a place in their segment, and another process attaches them (found by
// //tests/format_conformance: the handle named an offset past 2^63-1).
TEST(SharedMemoryTest, EmptyLeavesCrossTheHandle) {
  TensorDict t({{"rows", at::zeros({0, 3})}, {"n", {{"x", at::ones({0, 2, 0})}}}}, {0});
  t.set("full", at::zeros({0}, at::kLong));
  t.share_memory_();
  const TensorDict attached = AttachSharedMemory(SharedMemoryHandle(t));
  EXPECT_EQ(attached.get("rows").sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(attached.get({"n", "x"}).sizes(), at::IntArrayRef({0, 2, 0}));
  EXPECT_EQ(attached.get("full").scalar_type(), at::kLong);
}

// The three non-tensor kinds cross the handle as they are (its "cls" field); a NonTensorStack
// that does not fit its level, or an unknown class, is a named error.
TEST(SharedMemoryTest, NonTensorKindsCrossTheHandle) {
  TensorDict t({{"x", at::zeros({3})}}, {3});
  t.set("task", NonTensorData::stack({"walk", "run", "jump"}));
  t.set("robot", NonTensorData::meta("franka"));
  t.set("note", "plain");
  t.share_memory_();
  const std::string handle = SharedMemoryHandle(t);
  const TensorDict attached = AttachSharedMemory(handle);
  for (const char* k : {"task", "robot", "note"}) {
    EXPECT_EQ(attached.get_value(k).non_tensor_data(), t.get_value(k).non_tensor_data()) << k;
  }
  EXPECT_EQ(attached.index({1}).get_non_tensor("task"), "run");
  nlohmann::json h = nlohmann::json::parse(handle);
  for (auto& e : h["root"]["entries"]) {
    if (e["key"] == "task") e["data"] = {"a", "b"};
  }
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::Error,
                      {"NonTensorStack 'task'", "lists of shape torch.Size([2])", "torch.Size([3])"});
  h = nlohmann::json::parse(handle);
  for (auto& e : h["root"]["entries"]) {
    if (e["key"] == "robot") e["cls"] = "Pickled";
  }
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError,
                      {"'robot'", "non-tensor class \"Pickled\""});
}

TEST(SharedMemoryTest, Errors) {
  const std::string dir = testing_util::FreshDir("shm") + "/m";
  TensorDict mapped = Sample().memmap(dir);
  TD_EXPECT_THROW_MSG(mapped.share_memory_(), c10::ValueError, {"mutually exclusive"});
  TD_EXPECT_THROW_MSG(SharedMemoryHandle(Sample()), c10::ValueError,
                      {"'x'", "not in shared memory"});
  TD_EXPECT_THROW_MSG(TensorDict({{"sp", at::ones({2}).to_sparse()}}, {2}).share_memory_(),
                      c10::ValueError, {"'sp'", "strided"});
  TD_EXPECT_THROW_MSG(AttachSharedMemory("not json"), c10::ValueError, {"malformed handle"});
  TD_EXPECT_THROW_MSG(AttachSharedMemory("{}"), c10::ValueError, {"tensordict-shm"});

  TensorDict td = Sample();
  td.share_memory_();
  const nlohmann::json good = nlohmann::json::parse(SharedMemoryHandle(td));
  nlohmann::json h = good;
  h["segments"][0]["token"] = std::string(32, '0');
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::Error, {"token"});
  h = good;
  h["segments"][0]["pid"] = 4194303;  // not running
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::Error, {"/proc/4194303/fd/"});
  h = good;
  h["segments"][0]["fd"] = 1;  // stdout: not one of our segments
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::Error, {"not a tensordict segment"});
  h = good;
  h["root"]["entries"][0]["offset"] = uint64_t{1} << 40;
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "outside"});
  h = good;
  h["root"]["entries"][0]["strides"] = {1000000, 1};
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "outside"});
  h = good;
  h["root"]["entries"][0]["dtype"] = "torch.nope";
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "dtype"});
  h = good;
  h["root"]["entries"][0]["shape"] = {5, 3};
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'"});
  h = good;
  h["root"]["batch_size"] = "4";
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"batch_size"});
}

// A handle comes from another process: every malformed field is a ValueError naming it, never a
// JSON library exception, and sizes that overflow are refused before any tensor is made.
TEST(SharedMemoryTest, HostileHandlesAreNamedErrors) {
  TD_EXPECT_THROW_MSG(AttachSharedMemory(R"({"format":"tensordict-shm","version":"1"})"),
                      c10::ValueError, {"\"version\" must be the integer 1", "\"1\""});
  TD_EXPECT_THROW_MSG(AttachSharedMemory(R"({"format":7,"version":1})"), c10::ValueError,
                      {"\"format\"", "7"});
  TD_EXPECT_THROW_MSG(AttachSharedMemory(std::string(100000, '[')), c10::ValueError,
                      {"nested deeper than 512"});

  TensorDict td = Sample();
  td.share_memory_();
  const nlohmann::json good = nlohmann::json::parse(SharedMemoryHandle(td));
  // [2^62+1, 2^62] float64 with strides [2^63-1, 1]: the element count and the end offset
  // overflow 64 bits.
  nlohmann::json h = good;
  h["root"]["batch_size"] = nlohmann::json::array();
  h["root"]["entries"][0]["dtype"] = "torch.float64";
  h["root"]["entries"][0]["shape"] = {(int64_t{1} << 62) + 1, int64_t{1} << 62};
  h["root"]["entries"][0]["strides"] = {INT64_MAX, 1};
  h["root"]["entries"].erase(1);  // the nested level's batch would no longer match
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "2^63-1"});
  h["root"]["entries"][0]["shape"] = {2, 2};
  h["root"]["entries"][0]["strides"] = {INT64_MAX, 1};
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "outside"});
  h["root"]["entries"][0]["strides"] = {int64_t{1} << 60, 1};
  TD_EXPECT_THROW_MSG(AttachSharedMemory(h.dump()), c10::ValueError, {"'x'", "outside"});
  // An empty tensor needs no memory whatever its strides.
  h["root"]["entries"][0]["shape"] = {0, INT64_MAX};
  h["root"]["entries"][0]["strides"] = {INT64_MAX, INT64_MAX};
  EXPECT_EQ(AttachSharedMemory(h.dump()).get("x").numel(), 0);

  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["segments"] = "x"; }, "\"segments\" must be a"},
      {[](nlohmann::json& j) { j["segments"][0] = 3; }, "segment 0 must be an object"},
      {[](nlohmann::json& j) { j["segments"][0]["pid"] = "1"; }, "\"pid\" must be an integer"},
      {[](nlohmann::json& j) { j["segments"][0]["fd"] = 1.5; }, "\"fd\" must be an integer"},
      {[](nlohmann::json& j) { j["segments"][0]["size"] = -1; }, "\"size\" is -1"},
      {[](nlohmann::json& j) { j["segments"][0]["size"] = UINT64_MAX; }, "more than 2^63-1"},
      {[](nlohmann::json& j) { j["segments"][0]["token"] = 5; }, "\"token\" must be a string"},
      {[](nlohmann::json& j) { j["root"] = nullptr; }, "\"root\" must be a"},
      {[](nlohmann::json& j) { j["root"]["entries"] = {1}; }, "entry 0 must be an object"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["key"] = 1; }, "\"key\" must be a"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["kind"] = {}; }, "\"kind\" must be a"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["kind"] = "blob"; }, "unknown kind"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["segment"] = 9; }, "segment 9"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["offset"] = "64"; }, "\"offset\""},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["offset"] = 65; }, "multiple"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["shape"] = {4, "3"}; }, "\"shape\""},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["strides"] = {3}; }, "2 sizes but 1"},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["strides"] = {-3, 1}; }, "\"strides\""},
      {[](nlohmann::json& j) { j["root"]["entries"][0]["dtype"] = 4; }, "\"dtype\""},
      {[](nlohmann::json& j) { j["root"]["entries"][1]["value"] = 4; }, "key 'n'"},
      {[](nlohmann::json& j) { j["root"]["entries"][1]["value"]["entries"][0]["shape"] = {9}; },
       "key ('n', 'y')"},
      {[](nlohmann::json& j) { j["root"]["entries"][2].erase("data"); }, "without \"data\""},
      {[](nlohmann::json& j) { j["root"]["entries"][2]["key"] = "x"; }, "key 'x': the key appears twice"},
  };
  for (const auto& [edit, expected] : cases) {
    nlohmann::json bad = good;
    edit(bad);
    TD_EXPECT_THROW_MSG(AttachSharedMemory(bad.dump()), c10::ValueError,
                        {"malformed handle", expected});
  }
}

}  // namespace
}  // namespace td

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) td::g_helper = argv[1];
  return RUN_ALL_TESTS();
}
