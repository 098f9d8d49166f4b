#include "core/file_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace opfuse {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           str_cat("opfuse_file_io_", getpid(), "_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t file_count() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST_F(FileIoTest, WritesNewFile) {
  fs::path p = dir_ / "out.txt";
  ASSERT_TRUE(write_file_atomically(p.string(), "hello", false).is_ok());
  EXPECT_EQ(read_all(p), "hello");
  EXPECT_EQ(file_count(), 1u);  // no temporary left behind
}

TEST_F(FileIoTest, RefusesToOverwriteWithoutPermission) {
  fs::path p = dir_ / "out.txt";
  std::ofstream(p) << "precious";
  Status s = write_file_atomically(p.string(), "new", false);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--force"), std::string::npos) << s.message();
  EXPECT_EQ(read_all(p), "precious");
  EXPECT_EQ(file_count(), 1u);
}

TEST_F(FileIoTest, OverwritesWhenAsked) {
  fs::path p = dir_ / "out.txt";
  std::ofstream(p) << "old";
  ASSERT_TRUE(write_file_atomically(p.string(), "new", true).is_ok());
  EXPECT_EQ(read_all(p), "new");
  EXPECT_EQ(file_count(), 1u);
}

TEST_F(FileIoTest, MissingDirectoryIsAUserError) {
  Status s = write_file_atomically((dir_ / "nope" / "out.txt").string(), "x", false);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
}


}  // namespace
}  // namespace opfuse
