// The rules of lib/README.md, checked against every include in lib/: a folder includes only
// itself and the folders its row allows, and only the files its row names touch the RDMA
// libraries, by their headers or by including a file that does. The rules are read from the
// README's table, so the document and the check cannot drift apart.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kLib = fs::path(RDMAKIT_SOURCE_DIR) / "lib";

struct LayerRule {
  std::set<std::string> may_include;
  std::set<std::string> rdma_files;  // stems: "cm" stands for cm.hpp and cm.cpp
};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::set<std::string> comma_list(const std::string& text) {
  std::set<std::string> names;
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) {
    if (!trim(name).empty()) names.insert(trim(name));
  }
  return names;
}

// Rows of the form "| `name/` | a, b | no | ... |" or "| `name/` | a, b | file, file | ... |".
std::map<std::string, LayerRule> read_rules() {
  std::ifstream readme(kLib / "README.md");
  std::map<std::string, LayerRule> rules;
  const std::regex row(R"(^\|\s*`([a-z_]+)/`\s*\|([^|]*)\|([^|]*)\|)");
  for (std::string line; std::getline(readme, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, row)) continue;
    LayerRule rule;
    rule.may_include = comma_list(match[2].str());
    if (trim(match[3].str()) != "no") rule.rdma_files = comma_list(match[3].str());
    rules[match[1]] = rule;
  }
  return rules;
}

struct Include {
  fs::path file;
  int line = 0;
  std::string target;
  bool quoted = false;  // "…" rather than <…>
};

std::vector<Include> includes_in(const fs::path& folder) {
  std::vector<Include> found;
  const std::regex include(R"(^\s*#\s*include\s*(["<])([^">]+)[">])");
  for (const auto& entry : fs::directory_iterator(folder)) {
    const auto extension = entry.path().extension();
    if (extension != ".cpp" && extension != ".hpp") continue;
    std::ifstream source(entry.path());
    int number = 0;
    for (std::string line; std::getline(source, line);) {
      ++number;
      std::smatch match;
      if (std::regex_search(line, match, include)) found.push_back({entry.path(), number, match[2], match[1] == "\""});
    }
  }
  return found;
}

TEST(Layers, ReadmeNamesEveryFolderAndNoOther) {
  const auto rules = read_rules();
  ASSERT_FALSE(rules.empty()) << "no layer table in " << (kLib / "README.md");
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(kLib)) {
    if (entry.is_directory()) {
      folders.insert(entry.path().filename());
    } else {
      const auto extension = entry.path().extension();
      EXPECT_TRUE(extension != ".cpp" && extension != ".hpp")
          << entry.path() << ": sources belong in a layer folder, not in lib/ itself";
    }
  }
  std::set<std::string> documented;
  for (const auto& [name, rule] : rules) {
    documented.insert(name);
    for (const auto& allowed : rule.may_include) {
      EXPECT_TRUE(rules.contains(allowed)) << name << "/ may include '" << allowed << "', which is no folder";
    }
  }
  EXPECT_EQ(folders, documented);
}

TEST(Layers, NoFolderIncludesOneItsRowDoesNotAllow) {
  const auto rules = read_rules();
  ASSERT_FALSE(rules.empty());
  const std::regex own(R"(^lib/([a-z_]+)/)");
  for (const auto& [name, rule] : rules) {
    for (const auto& include : includes_in(kLib / name)) {
      const auto where = include.file.filename().string() + ":" + std::to_string(include.line);
      std::smatch match;
      if (std::regex_search(include.target, match, own)) {
        const auto folder = match[1].str();
        EXPECT_TRUE(folder == name || rule.may_include.contains(folder))
            << name << "/" << where << " includes " << include.target << ": " << name << "/ may not include " << folder
            << "/ (lib/README.md)";
      } else {
        EXPECT_FALSE(include.quoted) << name << "/" << where << " includes \"" << include.target
                                     << "\": our own headers are named from the root, lib/<folder>/…";
      }
    }
  }
}

// "No libibverbs here", file by file: a file its row does not name includes neither an RDMA
// library's header nor a file that a row names.
TEST(Layers, OnlyTheFilesNamedTouchTheRdmaLibraries) {
  const auto rules = read_rules();
  ASSERT_FALSE(rules.empty());
  std::set<std::string> rdma_headers;  // "lib/rdma/verbs.hpp"
  for (const auto& [name, rule] : rules) {
    for (const auto& file : rule.rdma_files) {
      EXPECT_TRUE(fs::exists(kLib / name / (file + ".hpp")) || fs::exists(kLib / name / (file + ".cpp")))
          << name << "/'s row names " << file << ", which is no file there";
      rdma_headers.insert("lib/" + name + "/" + file + ".hpp");
    }
  }
  for (const auto& [name, rule] : rules) {
    for (const auto& include : includes_in(kLib / name)) {
      const auto stem = include.file.stem().string();
      if (rule.rdma_files.contains(stem)) continue;
      const bool rdma_library =
          !include.quoted && (include.target.starts_with("infiniband/") || include.target.starts_with("rdma/"));
      const bool through_ours = include.quoted && rdma_headers.contains(include.target);
      EXPECT_FALSE(rdma_library || through_ours)
          << name << "/" << include.file.filename().string() << ":" << include.line << " includes " << include.target
          << ", but lib/README.md does not name " << stem << " among " << name << "/'s files that touch RDMA";
    }
  }
}

}  // namespace
