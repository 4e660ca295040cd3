// Test helpers shared by the suites: assert that a call throws a given error type whose message
// contains every expected fragment, and the sample TensorDict the op suites start from.
//
//   TD_EXPECT_THROW_MSG(td.get("zz"), td::KeyError, {"'zz'", "['a', 'b']"});
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "td/core/tensordict.h"

#define TD_EXPECT_THROW_MSG(stmt, error_type, ...)                                      \
  do {                                                                                  \
    try {                                                                               \
      (void)(stmt);                                                                     \
      ADD_FAILURE() << "expected " #error_type " from: " #stmt;                         \
    } catch (const error_type& td_e_) {                                                 \
      const std::string td_msg_ = td_e_.what();                                         \
      for (const std::string& td_frag_ : std::vector<std::string> __VA_ARGS__) {        \
        EXPECT_NE(td_msg_.find(td_frag_), std::string::npos)                            \
            << "message of " #stmt " lacks \"" << td_frag_ << "\":\n" << td_msg_;       \
      }                                                                                 \
    }                                                                                   \
  } while (0)

namespace td {
namespace test {

// Batch [3, 4], seeded: "a" float32 (3, 4, 5), "b" int64 arange (3, 4), "n" a nested
// TensorDict with an extra batch dim [3, 4, 2] holding "x" float32 (3, 4, 2, 6), and "s" a
// non-tensor string.
inline TensorDict SampleTensorDict() {
  at::manual_seed(0);
  TensorDict n({{"x", at::randn({3, 4, 2, 6})}}, {3, 4, 2});
  return TensorDict({{"a", at::randn({3, 4, 5})},
                     {"b", at::arange(12).view({3, 4})},
                     {"n", n},
                     {"s", "a string!"}},
                    {3, 4});
}

// Every leaf, nested ones included.
inline const KeysOptions kLeaves = KeysOptions().include_nested(true).leaves_only(true);

}  // namespace test
}  // namespace td
