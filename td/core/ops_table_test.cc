// Checks that keep the op table (td/core/ops.def and the section files it includes, NOTE [ The
// op table ]) and the code around it in step: every overload of a name is defined in one file,
// the file its section heading names; the docs name every op.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace td {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Row {
  std::string name;
  std::string kind;
  std::string file;  // the .cc file of its section
};

// The table's text: ops.def with each `#include "td/core/<section>.def"` replaced by that file.
std::string TableText(const std::string& path = "td/core/ops.def") {
  std::istringstream in(Read(path));
  const std::regex include(R"re(^#include "(td/core/\w+\.def)")re");
  std::string text, line;
  std::smatch m;
  while (std::getline(in, line)) {
    text += std::regex_search(line, m, include) ? TableText(m[1]) : line + "\n";
  }
  return text;
}

// The rows of the table with the td/core file named by the section heading above each.
std::vector<Row> Rows() {
  std::vector<Row> rows;
  std::istringstream in(TableText());
  const std::regex heading(R"(^// ---- .*\(td/core/(\w+\.cc))");
  const std::regex op(R"(^TD_OP\((\w+), [^(]*?, (\w+), )");
  const std::regex unary(R"(^TD_UNARY\((\w+), (FOREACH|PLAIN)\))");
  std::string file, line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, heading)) file = m[1];
    if (std::regex_search(line, m, op)) rows.push_back({m[2], m[1], file});
    if (std::regex_search(line, m, unary)) {
      rows.push_back({m[1], "UNARY", file});
      rows.push_back({std::string(m[1]) + "_", "UNARY", file});
    }
  }
  return rows;
}

TEST(OpsTableTest, RowsHaveSections) {
  const std::vector<Row> rows = Rows();
  EXPECT_GT(rows.size(), 250u);
  for (const Row& r : rows) EXPECT_FALSE(r.file.empty()) << r.name << " has no section file";
}

// Every `TensorDict::name(` definition in td/core lives in the file of name's section, and no
// name is defined in two files. A family defined by a macro counts where the macro is invoked
// at the start of a line with the name first (`TD_COMPARE_(lt)`: lt, and lt_ if declared).
TEST(OpsTableTest, EveryNameInOneFile) {
  std::map<std::string, std::set<std::string>> defined;
  const std::regex def(R"(TensorDict::(\w+)\(|\nTD_[A-Z_]+\((\w+)[,)])");
  for (const auto& entry : std::filesystem::directory_iterator("td/core")) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".cc" || file.find("_test") != std::string::npos) continue;
    const std::string text = Read(entry.path().string());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), def);
         it != std::sregex_iterator(); ++it) {
      if ((*it)[1].matched) {
        defined[(*it)[1]].insert(file);
      } else {
        defined[(*it)[2]].insert(file);
        defined[std::string((*it)[2]) + "_"].insert(file);
      }
    }
  }
  ASSERT_GT(defined.size(), 100u) << "the td/core sources were not found";
  for (const Row& r : Rows()) {
    if (r.kind == "UNARY") {
      // Defined by the TD_UNARY expansion in its section's file.
      EXPECT_NE(Read("td/core/" + r.file).find("#include \"td/core/ops.def\""), std::string::npos)
          << r.file << " does not expand the TD_UNARY rows";
      continue;
    }
    EXPECT_EQ(defined[r.name], std::set<std::string>({r.file}))
        << "TensorDict::" << r.name << " should be defined in td/core/" << r.file
        << " (its section of td/core/ops.def) and nowhere else";
  }
}

// docs/*.md and README.md name every op, so a user finds each one.
TEST(OpsTableTest, DocsNameEveryOp) {
  std::string docs = Read("README.md");
  for (const auto& entry : std::filesystem::directory_iterator("docs")) {
    if (entry.path().extension() == ".md") docs += Read(entry.path().string());
  }
  std::set<std::string> words;
  std::string word;
  for (char c : docs + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      word += c;
    } else if (!word.empty()) {
      words.insert(word);
      word.clear();
    }
  }
  for (const Row& r : Rows()) {
    EXPECT_TRUE(words.count(r.name)) << "no doc names `" << r.name << "`";
  }
}

}  // namespace
}  // namespace td
