// `gemmtune tune grouped GxNxK --rows-per-group M ...` without a GPU: the problem built from the
// flags, usage errors naming the flag or field, exit 3 with the other ops' words.
#include <gtest/gtest.h>

#include "core/cuda.hpp"
#include "gemmtune/op_cli.hpp"
#include "host/problems.hpp"

using namespace gemmtune;
using host_test::Exec;
using host_test::run_cli;

namespace {
std::string usage(const std::string& message) {
  return "gemmtune tune: " + message + "\nRun with --help for more information.\n";
}
}  // namespace

TEST(GroupedCli, ProblemFromFlags) {
  cli::ProblemFlags f;
  f.rows_per_group = 300;
  GroupedGemmProblem p = cli::build_grouped_problem("8x14336x4096", f);
  EXPECT_EQ(p.skew, 1.0);  // no --skew: balanced and Zipf(1) timing splits
  EXPECT_EQ(p.canonical(),
            "grouped1;g=8;n=14336;k=4096;rows=512;layout=contiguous;a=bf16;d=bf16;scale=none;act=none;bias=0");
  f.layout = "masked", f.skew = 1.5, f.dtype = "e4m3", f.act = "gelu", f.bias = true, f.alpha = 0.5;
  p = cli::build_grouped_problem("32x7168x2048", f);
  EXPECT_EQ(p.layout, GroupedLayout::masked);
  EXPECT_EQ(p.scale, ScaleMode::rowwise);  // fp8's default
  EXPECT_EQ(p.d, DType::bf16);
  EXPECT_EQ(p.act, Activation::gelu_tanh);
  EXPECT_TRUE(p.bias);
  EXPECT_EQ(p.alpha, 0.5f);
  EXPECT_EQ(p.skew, 1.5);
  f.scale = "tensorwise";
  EXPECT_EQ(cli::build_grouped_problem("32x7168x2048", f).scale, ScaleMode::tensorwise);
  // TFLOP/s at the rows timed: the bucket's.
  EXPECT_DOUBLE_EQ(cli::OpCli<GroupedOp>::rate(p, 1000.0), 2.0 * 32 * 512 * 7168 * 2048 / 1e9);
}

TEST(GroupedCli, UsageErrorsNameTheFlag) {
  host_test::TempDir dir("gemmtune_grouped_cli_");
  const std::pair<std::string, std::string> cases[] = {
      {"tune grouped", usage("shape: grouped needs GxNxK after it (e.g. tune grouped 8x14336x4096 --rows-per-group 512)")},
      {"tune grouped 8x128x128", usage("rows-per-group: grouped needs --rows-per-group M >= 1 (the expected rows per group)")},
      {"tune grouped 8x128 --rows-per-group 4", usage("shape: '8x128' is not GxNxK (e.g. 8x14336x4096)")},
      {"tune grouped 8x128x128 --rows-per-group 4 --layout ragged",
       usage("layout: 'ragged' is not a layout (contiguous, masked)")},
      {"tune grouped 8x128x128 --rows-per-group 4 --beta 1", usage("grouped: --beta does not apply")},
      {"tune grouped 0x128x128 --rows-per-group 4", usage("grouped.groups: must be in [1, 1024] (got 0)")},
      {"tune grouped 8x128x128 --rows-per-group 4 --skew -1", usage("grouped.skew: must be in [0, 8] (got -1.000000)")},
      {"tune grouped 8x128x128 --rows-per-group 4 --dtype fp32",
       usage("grouped.dtype: fp32 is not supported (bf16, fp16 or e4m3)")},
      {"tune 64x64x64 --rows-per-group 4", usage("rows-per-group, skew: apply to grouped only")},
      {"tune softmax 64x64 --skew 1", usage("softmax: --rows-per-group and --skew do not apply (grouped flags)")},
  };
  for (const auto& [args, err] : cases) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << args;
    EXPECT_EQ(e.err, err) << args;
    EXPECT_EQ(e.out, "") << args;
  }
}

TEST(GroupedCli, NoGpuExitsThree) {
  std::string why;
  if (cuda_device_present(&why)) GTEST_SKIP() << "a CUDA device is present: this would tune";
  host_test::TempDir dir("gemmtune_grouped_cli_");
  const Exec gemm = run_cli(dir.root, "tune 64x64x64");
  const Exec e = run_cli(dir.root, "tune grouped 8x128x128 --rows-per-group 16 --json -");
  EXPECT_EQ(e.code, 3) << e.err;
  EXPECT_EQ(e.err, gemm.err);
  EXPECT_EQ(e.out, "");
}
