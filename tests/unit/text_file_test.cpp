// Reports, metrics files and JUnit files are written whole or not at all (write_file_whole).
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "lib/base/text_file.hpp"
#include "tests/unit/file_tree.hpp"

namespace rdmakit {
namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The files in `folder`, hidden ones too: what a failed write would leave behind.
std::size_t entries(const fs::path& folder) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

TEST(WriteFileWhole, WritesANewFileWithTheUmasksMode) {
  const auto folder = fixture::fresh_tree("whole_new");
  fs::create_directories(folder);
  const mode_t mask = umask(027);
  const auto failed = write_file_whole(folder / "r.json", "{}\n");
  umask(mask);
  ASSERT_FALSE(failed.has_value()) << *failed;
  EXPECT_EQ(contents(folder / "r.json"), "{}\n");
  struct stat written {};
  ASSERT_EQ(stat((folder / "r.json").c_str(), &written), 0);
  EXPECT_EQ(written.st_mode & 0777, 0640U);
  EXPECT_EQ(entries(folder), 1U);
}

TEST(WriteFileWhole, ReplacesAFileKeepingItsMode) {
  const auto folder = fixture::fresh_tree("whole_replace");
  fixture::write_file(folder / "r.json", "old\n");
  fs::permissions(folder / "r.json", fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_FALSE(write_file_whole(folder / "r.json", "new\n").has_value());
  EXPECT_EQ(contents(folder / "r.json"), "new\n");
  EXPECT_EQ(fs::status(folder / "r.json").permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(entries(folder), 1U);
}

TEST(WriteFileWhole, ALinkIsReplacedNotFollowed) {
  const auto folder = fixture::fresh_tree("whole_link");
  fixture::write_file(folder / "elsewhere", "not ours\n");
  fs::create_symlink(folder / "elsewhere", folder / "r.json");
  ASSERT_FALSE(write_file_whole(folder / "r.json", "report\n").has_value());
  EXPECT_FALSE(fs::is_symlink(folder / "r.json"));
  EXPECT_EQ(contents(folder / "r.json"), "report\n");
  EXPECT_EQ(contents(folder / "elsewhere"), "not ours\n");
}

TEST(WriteFileWhole, AMissingFolderIsSaid) {
  const auto folder = fixture::fresh_tree("whole_missing");
  const auto failed = write_file_whole(folder / "absent" / "r.json", "x");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->find("cannot write " + (folder / "absent" / "r.json").string() + ": "), 0U) << *failed;
  EXPECT_NE(failed->find("No such file or directory"), std::string::npos) << *failed;
}

// A write that fails midway (here a file-size limit, as a full disk would) leaves the old
// file as it was and nothing beside it.
TEST(WriteFileWhole, AFailedWriteLeavesTheOldFile) {
  const auto folder = fixture::fresh_tree("whole_full");
  fixture::write_file(folder / "r.json", "the previous report\n");
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const auto failed = write_file_whole(folder / "r.json", std::string(100000, 'x'));
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->find(": write: File too large (" + (folder / "r.json").string() + " is as it was)"),
            std::string::npos)
      << *failed;
  EXPECT_EQ(contents(folder / "r.json"), "the previous report\n");
  EXPECT_EQ(entries(folder), 1U);
}

}  // namespace
}  // namespace rdmakit
