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

// A mapped file shows the file's bytes (binary ones included) for as long as it lives, also
// after a move; an empty file is an empty view; a missing one is an error naming it.
TEST_F(FileIoTest, MapsAFileReadOnly) {
  const fs::path p = dir_ / "model.bin";
  const std::string bytes("\x08\x07\0onnx\xff", 9);
  std::ofstream(p, std::ios::binary) << bytes;
  Result<MappedFile> file = MappedFile::open(p.string(), "model file");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ(file->bytes(), bytes);
  MappedFile moved = std::move(*file);
  EXPECT_EQ(moved.bytes(), bytes);
  EXPECT_TRUE(file->bytes().empty());

  const fs::path empty = dir_ / "empty.bin";
  std::ofstream(empty).close();
  Result<MappedFile> none = MappedFile::open(empty.string(), "model file");
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  EXPECT_TRUE(none->bytes().empty());

  Result<MappedFile> missing = MappedFile::open((dir_ / "absent.onnx").string(), "model file");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("cannot read model file '"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("absent.onnx"), std::string::npos) << missing.status().message();
}

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
