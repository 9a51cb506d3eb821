// Softmax through the engine, the host-side parts (no GPU): the engine's element bound agrees
// with the test reference's, the Triton softmax config space, the CLI's softmax problems and
// suites, TuneReport's op-aware problem text, and the binary's exit codes without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "backends/triton/triton_softmax.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/softmax_cli.hpp"
#include "host/problems.hpp"
#include "support/host_softmax.hpp"
#include "tune/softmax_check.hpp"

using namespace gemmtune;
namespace fs = std::filesystem;
using host_test::error_of;
using host_test::Exec;
using host_test::run_cli;

namespace {

// bench/suites/softmax.csv of this checkout (this file is tests/host/test_softmax_host.cpp).
std::string suite_path() { return (fs::path(__FILE__).parent_path().parent_path().parent_path() / "bench/suites/softmax.csv").string(); }

}  // namespace

TEST(SoftmaxBound, EngineAndTestReferenceAgree) {
  for (DType out : {DType::bf16, DType::fp16, DType::fp32})
    for (int64_t cols : {1, 1000, 262144})
      for (double ref : {0.0, 1e-30, 1e-6, 0.3, 1.0})
        for (double sx : {-8.0, 0.0, 3.5})
          for (double m : {-1e4, 0.0, 7.9}) {
            const double a = softmax_elem_bound(softmax_out_bits(out), cols, ref, sx, m);
            const double b = host::softmax_bound(out, cols, ref, sx, m);
            EXPECT_NEAR(a, b, 1e-12 * b) << to_string(out) << " cols " << cols << " ref " << ref;
          }
}

TEST(TritonSoftmaxConfigs, SpaceIdsAndParams) {
  for (int64_t cols : {1, 100, 1024, 4096, 16384, 32768, 65536, 131072, 262144, 262147})
    for (DType in : {DType::bf16, DType::fp32}) {
      auto p = SoftmaxProblem::make(64, cols, in);
      const auto cfgs = triton::softmax_configs(p);
      ASSERT_FALSE(cfgs.empty()) << p.str();
      std::set<std::string> ids;
      bool one_pass = false;
      for (const auto& c : cfgs) {
        EXPECT_EQ(c.cannot_run(p), "") << c.id();
        EXPECT_EQ(triton::SoftmaxConfig::parse(c.id()), c) << c.id();
        ids.insert(c.id());
        one_pass |= !c.online;
        const auto j = triton::softmax_params(c, p, "abc");
        EXPECT_EQ(j["kernel"], c.online ? "softmax_online" : "softmax_rows");
        EXPECT_EQ(j["in_dtype"], to_string(in));
        EXPECT_EQ(j["template"], "abc");
        EXPECT_EQ(triton::softmax_grid(c, p), c.online ? 64 : (64 + c.rows - 1) / c.rows);
      }
      EXPECT_EQ(ids.size(), cfgs.size());
      EXPECT_EQ(one_pass, cols <= 32768) << cols;  // rows kernel: the row whole in registers
    }
  EXPECT_THROW(triton::SoftmaxConfig::parse("rows_b1024_w4"), Error);
  EXPECT_THROW(triton::SoftmaxConfig::parse("online_b1000_w4x"), Error);
  EXPECT_THROW(triton::SoftmaxConfig::parse("rows_b01024_r1_w4"), Error);
  auto p = SoftmaxProblem::make(4, 2048);
  EXPECT_NE(triton::SoftmaxConfig({false, 1024, 1, 4}).cannot_run(p), "");  // shorter than the row
  EXPECT_NE(triton::SoftmaxConfig({false, 2048, 2, 1}).cannot_run(p), "");  // 64 values a thread at most
  EXPECT_NE(triton::SoftmaxConfig({true, 1024, 2, 4}).cannot_run(p), "");   // online: one row
  EXPECT_EQ(triton::SoftmaxConfig({true, 1024, 1, 4}).cannot_run(p), "");
}

TEST(SoftmaxCli, ProblemsFromFlags) {
  cli::ProblemFlags f;
  SoftmaxProblem p = cli::build_softmax_problem("1000x4096", f);
  EXPECT_EQ(p.rows, 1000);
  EXPECT_EQ(p.cols, 4096);
  EXPECT_EQ(p.in, DType::bf16);
  EXPECT_EQ(p.out, DType::bf16);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.ld, 0);
  f.dtype = "fp32", f.out_dtype = "bf16", f.scale = "0.125", f.stride = 4104;
  p = cli::build_softmax_problem("7x4096", f);
  EXPECT_EQ(p.in, DType::fp32);
  EXPECT_EQ(p.out, DType::bf16);
  EXPECT_EQ(p.scale, 0.125f);
  EXPECT_EQ(p.row_stride(), 4104);

  auto err = [](auto mutate, const char* shape = "8x8") {
    cli::ProblemFlags g;
    mutate(g);
    return error_of([&] { cli::build_softmax_problem(shape, g); });
  };
  EXPECT_NE(err([](auto& g) { g.bias = true; }).find("--bias"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.layout = "rr"; }).find("--layout"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.alpha = 2; }).find("--alpha"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.lda = 16; }).find("--stride"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.scale = "tensorwise"; }).find("scale:"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.scale = "inf"; }).find("scale:"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.dtype = "e4m3"; }).find("softmax.in"), std::string::npos);
  EXPECT_NE(err([](auto& g) { g.stride = 4; }).find("softmax.ld"), std::string::npos);
  EXPECT_NE(err([](auto&) {}, "8x").find("shape"), std::string::npos);
  EXPECT_NE(err([](auto&) {}, "0x8").find("softmax.rows"), std::string::npos);
}

TEST(SoftmaxCli, SuiteFiles) {
  const std::string csv = "rows,cols\n524288,1024\n# comment\n2048,262144\n";
  EXPECT_TRUE(cli::is_softmax_suite(csv, "s.csv"));
  EXPECT_FALSE(cli::is_softmax_suite("m,n,k\n1,2,3\n", "g.csv"));
  const auto e = cli::softmax_suite_entries(csv, "s.csv");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[1], (std::pair<int64_t, int64_t>{2048, 262144}));
  EXPECT_NE(error_of([] { cli::softmax_suite_entries("rows,cols\n4,x\n", "s.csv"); }).find("s.csv:2"), std::string::npos);
  EXPECT_NE(error_of([] { cli::softmax_suite_entries("rows,cols\n", "s.csv"); }).find("no problems"), std::string::npos);
  // The suite the bench runs parses.
  const auto suite = cli::softmax_suite_entries(cli::read_text_file(suite_path()), "softmax.csv");
  EXPECT_EQ(suite.size(), 7u);
  EXPECT_NEAR(cli::softmax_tbps(SoftmaxProblem::make(1000, 1000), 1.0), 4.0, 1e-12);  // 4 MB in 1 us
}

TEST(SoftmaxReport, ProblemTextFollowsTheOp) {
  TuneReport r;
  r.problem = GemmProblem::linear(16, 32, 64);
  EXPECT_EQ(r.problem_canonical(), r.problem.canonical());
  r.op = SoftmaxOp::name;
  r.softmax = SoftmaxProblem::make(8, 128);
  EXPECT_EQ(r.problem_canonical(), r.softmax.canonical());
  EXPECT_EQ(r.problem_str(), r.softmax.str());
  EXPECT_EQ(r.problem_canonical().rfind("softmax1;", 0), 0u);
  EXPECT_DOUBLE_EQ(r.min_bytes(), 8.0 * 128 * 4);
  SoftmaxKernel empty;
  EXPECT_FALSE(empty);
  EXPECT_THROW(empty.run({}), Error);
}

TEST(SoftmaxCliExec, UsageErrorsAndNoDevice) {
  host_test::TempDir dir("gemmtune_smcli_");
  for (const char* args : {"tune softmax", "tune softmax 64", "tune softmax 64x64 --bias", "tune softmax 64x64 --dtype e4m3",
                           "tune 64x64x64 --stride 8", "tune 64x64x64 8x8"}) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << args << "\n" << e.err;
  }
  const std::string suite = suite_path();
  std::string why;
  if (!cuda_device_present(&why)) {
    EXPECT_EQ(run_cli(dir.root, "tune softmax 64x4096").code, 3);
    EXPECT_EQ(run_cli(dir.root, "suite " + suite + " --dtype fp16").code, 3);
    EXPECT_EQ(run_cli(dir.root, "suite " + suite + " --m-values x.csv").code, 2);
  }
}
