#include "core/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace opfuse {
namespace {

TEST(NpyTest, RoundTripsEveryDType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kF64, DType::kI64, DType::kI32, DType::kI8,
                  DType::kU8, DType::kBool}) {
    Tensor x = Tensor::zeros(t, {2, 3}).value();
    for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, i % 2);
    auto back = parse_npy(encode_npy(x), "mem");
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(back->dtype(), t);
    EXPECT_EQ(back->dims(), x.dims());
    EXPECT_EQ(std::memcmp(back->raw_data(), x.raw_data(), x.nbytes()), 0);
  }
}

TEST(NpyTest, ReadsWhatNumpyWrites) {
  // numpy.save of np.arange(3, dtype=np.float32), byte for byte (header padded to 64).
  std::string bytes = std::string("\x93NUMPY\x01\x00\x76\x00", 10);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.append(0x76 - header.size() - 1, ' ');
  header += '\n';
  bytes += header;
  const float values[] = {0.0f, 1.0f, 2.0f};
  bytes.append(reinterpret_cast<const char*>(values), sizeof values);
  auto t = parse_npy(bytes, "arange.npy");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->dims(), std::vector<int64_t>{3});
  EXPECT_EQ(t->data<float>()[2], 2.0f);
}

TEST(NpyTest, ScalarAndOneDimShapesEncodeLikeNumpy) {
  const std::string scalar = encode_npy(Tensor::scalar(1.5f));
  EXPECT_NE(scalar.find("'shape': ()"), std::string::npos);
  const std::string vec = encode_npy(Tensor::from_vector<float>({3}, {1, 2, 3}));
  EXPECT_NE(vec.find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(encode_npy(Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4})).find("(2,2)"), std::string::npos);
}

TEST(NpyTest, BadFilesAreUserErrorsNamingTheFile) {
  auto bad_magic = parse_npy("hello world, not numpy", "in.npy");
  ASSERT_FALSE(bad_magic.is_ok());
  EXPECT_NE(bad_magic.status().message().find("in.npy"), std::string::npos);
  std::string good = encode_npy(Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  auto truncated = parse_npy(good.substr(0, good.size() - 3), "t.npy");
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(parse_npy(fortran, "f.npy").is_ok());
  std::string object = good;
  object.replace(object.find("<f4"), 3, "|O8");
  auto obj = parse_npy(object, "o.npy");
  ASSERT_FALSE(obj.is_ok());
  EXPECT_NE(obj.status().message().find("|O8"), std::string::npos);
  auto missing = read_npy("/nonexistent/dir/x.npy");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/x.npy"), std::string::npos);
}

TEST(NpyTest, WriteThenRead) {
  const auto path = std::filesystem::temp_directory_path() / str_cat("opfuse_npy_test_", getpid(), ".npy");
  Tensor x = Tensor::from_vector<int64_t>({2, 2}, {1, -2, 3, 1LL << 40});
  ASSERT_TRUE(write_npy(path.string(), x).is_ok());
  auto y = read_npy(path.string());
  ASSERT_TRUE(y.is_ok());
  EXPECT_EQ(y->data<int64_t>()[3], 1LL << 40);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace opfuse
