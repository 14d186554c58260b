// --key-file's reader (lib/net/shared_key): which files it takes and what it says of the rest.

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lib/base/error.hpp"
#include "lib/net/shared_key.hpp"

namespace rdmakit {
namespace {

class SharedKeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rdmakit_key_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& text, mode_t mode) {
    const auto path = (dir_ / "key").string();
    std::filesystem::remove(path);
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }

  std::string refusal(const std::string& path) {
    try {
      read_shared_key(path);
    } catch (const UsageError& refused) {
      return refused.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(SharedKeyFile, TakesAPrivateFileLessItsNewline) {
  const auto key = read_shared_key(write("c2VjcmV0IGtleSBtYXRlcmlhbA==\n", 0600));
  EXPECT_EQ(std::string(key.bytes.begin(), key.bytes.end()), "c2VjcmV0IGtleSBtYXRlcmlhbA==");
  EXPECT_EQ(read_shared_key(write("sixteen bytes ok\r\n", 0400)).bytes.size(), 16U);
}

TEST_F(SharedKeyFile, RefusesAFileOthersCanRead) {
  const auto path = write("c2VjcmV0IGtleSBtYXRlcmlhbA==\n", 0644);
  const auto why = refusal(path);
  EXPECT_NE(why.find("mode 0644"), std::string::npos) << why;
  EXPECT_NE(why.find("chmod 600 " + path), std::string::npos) << why;
  EXPECT_NE(refusal(write("c2VjcmV0IGtleSBtYXRlcmlhbA==\n", 0640)), "");
}

TEST_F(SharedKeyFile, RefusesShortKeysDirectoriesAndMissingFiles) {
  EXPECT_NE(refusal(write("fifteen bytes!!\n", 0600)).find("fewer than 16"), std::string::npos);
  EXPECT_NE(refusal(dir_.string()).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal((dir_ / "none").string()).find("No such file"), std::string::npos);
  EXPECT_NE(refusal(write(std::string(max_key_bytes + 1, 'k'), 0600)).find("more than"), std::string::npos);
}

}  // namespace
}  // namespace rdmakit
