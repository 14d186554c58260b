#pragma once
// Sysfs-like fixture trees that unit tests make on the fly, under GoogleTest's temporary folder.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rdmakit::fixture {

// A fresh (emptied) folder NAME in the test's temporary folder.
inline std::filesystem::path fresh_tree(const std::string& name) {
  const auto root = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(root);
  return root;
}

// FILE with TEXT, its folders made as needed.
inline void write_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace rdmakit::fixture
