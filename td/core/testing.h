// Test helpers shared by the suites: assert that a call throws a given error type whose message
// contains every expected fragment.
//
//   TD_EXPECT_THROW_MSG(td.get("zz"), td::KeyError, {"'zz'", "['a', 'b']"});
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
