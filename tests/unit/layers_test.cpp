// The layer rules of lib/README.md, checked against every include in lib/: a folder
// includes only itself and the folders its row allows, and only RDMA folders include the
// RDMA libraries' headers. The rules are read from the README's table, so the document and
// the check cannot drift apart.

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
  bool rdma = false;
};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Rows of the form "| `name/` | a, b | yes | ... |".
std::map<std::string, LayerRule> read_rules() {
  std::ifstream readme(kLib / "README.md");
  std::map<std::string, LayerRule> rules;
  const std::regex row(R"(^\|\s*`([a-z_]+)/`\s*\|([^|]*)\|\s*(yes|no)\s*\|)");
  for (std::string line; std::getline(readme, line);) {
    std::smatch match;
    if (!std::regex_search(line, match, row)) continue;
    LayerRule rule;
    rule.rdma = match[3] == "yes";
    std::stringstream allowed(match[2].str());
    for (std::string name; std::getline(allowed, name, ',');) {
      if (!trim(name).empty()) rule.may_include.insert(trim(name));
    }
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
        const bool rdma_header = include.target.starts_with("infiniband/") || include.target.starts_with("rdma/");
        EXPECT_TRUE(rule.rdma || !rdma_header) << name << "/" << where << " includes " << include.target << ", but "
                                               << name << "/ is a layer without the RDMA libraries";
        EXPECT_FALSE(include.quoted) << name << "/" << where << " includes \"" << include.target
                                     << "\": our own headers are named from the root, lib/<folder>/…";
      }
    }
  }
}

}  // namespace
