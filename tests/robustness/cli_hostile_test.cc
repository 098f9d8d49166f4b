// The `opfuse` binary on hostile files: exit code 1 (a user error) with a message naming the
// culprit, for every crafted case; the limit flags; and output files that are never clobbered.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "core/npy.h"
#include "testing/cli_runner.h"
#include "core/status.h"
#include "core/tensor.h"
#include "robustness/hostile_models.h"

namespace opfuse {
namespace {

namespace fs = std::filesystem;

using testing_cli::CommandResult;
using testing_cli::run_cli;

fs::path fresh_dir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / str_cat("opfuse_cli_hostile_", getpid(), "_", tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void expect_exit_1(const CommandResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const std::string& p : parts) {
    EXPECT_NE(r.output.find(p), std::string::npos) << "'" << p << "' not in: " << r.output;
  }
}

class CliHostileTest : public testing::TestWithParam<hostile::Case> {};

TEST_P(CliHostileTest, InfoAndRunExitWithCode1) {
  const fs::path dir = fresh_dir(GetParam().name);
  const std::string model = GetParam().write(dir).string();
  expect_exit_1(run_cli("info " + model), GetParam().expect);
  expect_exit_1(run_cli("run --random --max-alloc-bytes 1048576 " + model), GetParam().expect);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Hostile, CliHostileTest, testing::ValuesIn(hostile::cases()),
                         [](const testing::TestParamInfo<hostile::Case>& info) { return info.param.name; });

TEST(CliLimitsTest, MaxWeightBytesRefusesABigModel) {
  const fs::path dir = fresh_dir("weights");
  const std::string model = hostile::write_model(dir, hostile::add_model()).string();
  EXPECT_EQ(run_cli("info --max-weight-bytes 16 " + model).exit_code, 0);
  expect_exit_1(run_cli("info --max-weight-bytes 15 " + model), {"initializer 'w'", "cap of 15"});
  expect_exit_1(run_cli("run --random --max-weight-bytes 15 " + model), {"initializer 'w'", "cap of 15"});
  expect_exit_1(run_cli("run --random --max-alloc-bytes 8 " + model), {"initializer 'w'", "cap of 8"});
  fs::remove_all(dir);
}

// Shapes that would exceed the memory cap at run time are a user error, not a crash or an
// attempt to allocate terabytes.
TEST(CliLimitsTest, RunRefusesShapesBeyondTheAllocationCap) {
  const fs::path dir = fresh_dir("runtime");
  hostile::write_model(dir, hostile::trillion_element_input_model());
  const std::string model = (dir / "model" / "model.onnx").string();
  EXPECT_EQ(run_cli("info " + model).exit_code, 0);  // loading allocates nothing for inputs
  for (const char* mode : {"graph", "eager"}) {
    expect_exit_1(run_cli(str_cat("run --random --mode ", mode, " ", model)), {"allocation cap"});
  }
  fs::remove_all(dir / "model");
  hostile::write_model(dir, hostile::symbolic_batch_model());
  EXPECT_EQ(run_cli("run --random --dim batch=3 " + model).exit_code, 0);
  expect_exit_1(run_cli("run --random --dim batch=1000000000 " + model),
                {"input 'x'", "allocation cap"});
  expect_exit_1(run_cli("run --random --dim batch=1000 --max-alloc-bytes 100000 " + model),
                {"allocation cap of 100000"});
  fs::remove_all(dir);
}

TEST(CliOutputSafetyTest, RunNeverClobbersWithoutForceAndLeavesNoTemporaryFiles) {
  const fs::path dir = fresh_dir("outputs");
  const std::string model = hostile::write_model(dir, hostile::add_model()).string();
  const fs::path out = dir / "out";
  fs::create_directories(out);
  hostile::write_bytes(out / "y.npy", "precious");
  hostile::write_bytes(out / "y.npy.tmp", "also precious");  // the old writer's fixed temp name
  expect_exit_1(run_cli("run --random " + model + " --output-dir " + out.string()), {"y.npy", "--force"});
  std::ifstream kept(out / "y.npy");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "precious");

  EXPECT_EQ(run_cli("run --random " + model + " --output-dir " + out.string() + " --force").exit_code, 0);
  Result<Tensor> y = read_npy((out / "y.npy").string());
  ASSERT_TRUE(y.is_ok()) << y.status().message();
  EXPECT_EQ(y->type_string(), "f32[4]");
  std::ifstream tmp(out / "y.npy.tmp");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(tmp), {}), "also precious");
  // Only the output and the user's own files remain: no temporary left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"y.npy", "y.npy.tmp"}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace opfuse
