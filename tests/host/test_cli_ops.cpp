// `tune` and `suite` are one implementation for every op, templated on it (tools/gemmtune/op_cli.hpp:
// OpCli<Op> holds what differs). Without a GPU that shows as: a GEMM and a softmax problem or suite
// give usage errors of one shape, --help the command's one help, and exit 3 with the same words;
// the per-op pieces (suite columns, problems, rates) are checked directly.
#include <gtest/gtest.h>

#include <fstream>

#include "core/cuda.hpp"
#include "gemmtune/op_cli.hpp"
#include "host/problems.hpp"

using namespace gemmtune;
using host_test::Exec;
using host_test::run_cli;

namespace {

// A GEMM suite and a softmax suite of one problem each, in `dir`.
struct Suites {
  explicit Suites(const std::filesystem::path& dir) : gemm(dir / "gemm.csv"), softmax(dir / "softmax.csv") {
    std::ofstream(gemm) << "m,n,k\n64,64,64\n";
    std::ofstream(softmax) << "rows,cols\n64,64\n";
    std::ofstream(dir / "m.csv") << "phase,m\nprefill,64\n";
  }
  std::filesystem::path gemm, softmax;
};

std::string usage(const std::string& command, const std::string& message) {
  return "gemmtune " + command + ": " + message + "\nRun with --help for more information.\n";
}

}  // namespace

TEST(CliOps, UsageErrorsHaveOneShapeForEveryOp) {
  host_test::TempDir dir("gemmtune_cli_ops_");
  const Suites s(dir.root);
  const std::string gemm = "suite '" + s.gemm.string() + "'", softmax = "suite '" + s.softmax.string() + "'";
  // A bad value of a flag both ops take: the same message from both.
  for (const char* flag : {" --dtype fp7", " --out-dtype fp7"}) {
    const Exec g = run_cli(dir.root, std::string("tune 64x64x64") + flag);
    const Exec m = run_cli(dir.root, std::string("tune softmax 64x64") + flag);
    EXPECT_EQ(g.code, 2) << flag << "\n" << g.err;
    EXPECT_EQ(m.code, 2) << flag << "\n" << m.err;
    EXPECT_EQ(g.err, m.err) << flag;
    EXPECT_EQ(g.err.rfind("gemmtune tune: ", 0), 0u) << g.err;
    const Exec gs = run_cli(dir.root, gemm + flag), ms = run_cli(dir.root, softmax + flag);
    EXPECT_EQ(gs.code, 2) << gs.err;
    EXPECT_EQ(ms.code, 2) << ms.err;
    EXPECT_EQ(gs.err, ms.err) << flag;
    EXPECT_EQ(gs.err.rfind("gemmtune suite: ", 0), 0u) << gs.err;
  }
  // What only one op refuses: the same shape, each op's words.
  const std::pair<std::string, std::string> cases[] = {
      {"tune 64x64x64 --stride 128", usage("tune", "stride: applies to softmax only (GEMMs: --lda, --ldb, --ldd)")},
      {"tune softmax 64x64 --bias", usage("tune", "softmax: --bias does not apply (a GEMM flag)")},
      {"tune softmax", usage("tune", "shape: softmax needs ROWSxCOLS after it (e.g. tune softmax 4096x32768)")},
      {"tune 64x64x64 64x64", usage("tune", "shape: unexpected '64x64' after 64x64x64 (softmax ROWSxCOLS takes two)")},
      {gemm + " --stride 128", usage("suite", "stride: applies to softmax suites only (GEMMs: --lda, --ldb, --ldd)")},
      {softmax + " --bias", usage("suite", "softmax: --bias does not apply (a GEMM flag)")},
      {softmax + " --m-values '" + (dir.root / "m.csv").string() + "'",
       usage("suite", "--m-values does not apply to a softmax suite (header rows,cols)")},
      {gemm + " --csv - --json -", usage("suite", "--csv and --json cannot both be stdout")},
      {softmax + " --csv - --json -", usage("suite", "--csv and --json cannot both be stdout")},
  };
  for (const auto& [args, err] : cases) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << args;
    EXPECT_EQ(e.err, err) << args;
    EXPECT_EQ(e.out, "") << args;
  }
}

TEST(CliOps, HelpIsTheCommandsOwn) {
  host_test::TempDir dir("gemmtune_cli_ops_");
  const Suites s(dir.root);
  for (const char* command : {"tune", "suite"}) {
    const Exec help = run_cli(dir.root, std::string(command) + " --help");
    ASSERT_EQ(help.code, 0) << help.err;
    const std::vector<std::string> problems =
        std::string(command) == "tune" ? std::vector<std::string>{"64x64x64", "softmax 64x64"}
                                       : std::vector<std::string>{"'" + s.gemm.string() + "'", "'" + s.softmax.string() + "'"};
    for (const auto& problem : problems) {
      const Exec e = run_cli(dir.root, std::string(command) + " " + problem + " --help");
      EXPECT_EQ(e.code, 0) << problem << "\n" << e.err;
      EXPECT_EQ(e.out, help.out) << problem;
    }
  }
}

TEST(CliOps, NoGpuExitsThreeForEveryOp) {
  std::string why;
  if (cuda_device_present(&why)) GTEST_SKIP() << "a CUDA device is present: these would tune";
  host_test::TempDir dir("gemmtune_cli_ops_");
  const Suites s(dir.root);
  const Exec first = run_cli(dir.root, "tune 64x64x64");
  EXPECT_EQ(first.code, 3) << first.err;
  EXPECT_EQ(first.err.rfind("gemmtune: no CUDA device (", 0), 0u) << first.err;
  for (const std::string& args : std::vector<std::string>{"tune softmax 64x64", "tune softmax 64x64 --json -",
                                                          "suite '" + s.gemm.string() + "'",
                                                          "suite '" + s.softmax.string() + "' --json -"}) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 3) << args << "\n" << e.err;
    EXPECT_EQ(e.err, first.err) << args;
    EXPECT_EQ(e.out, "") << args;
  }
}

// The suite CSV header of each op, column for column (the order records are written in).
TEST(CliOps, SuiteColumns) {
  EXPECT_EQ(cli::suite_columns<GemmOp>(),
            (std::vector<std::string>{"op",        "model",      "layer",     "m",         "n",        "k",
                                      "dtype",     "layout",     "epilogue",  "backend",   "candidate", "median_us",
                                      "p20_us",    "p80_us",     "tflops",    "rel_err",   "compile_s", "correct",
                                      "winner",    "default",    "from_cache", "select_ms", "phase",    "out_dtype",
                                      "d_layout",  "scale",      "status",    "reason",    "candidate_id"}));
  EXPECT_EQ(cli::suite_columns<SoftmaxOp>(),
            (std::vector<std::string>{"op",        "rows",    "cols",      "ld",        "dtype",   "out_dtype",
                                      "scale",     "backend", "candidate", "median_us", "p20_us",  "p80_us",
                                      "tbps",      "rel_err", "compile_s", "correct",   "winner",  "from_cache",
                                      "select_ms", "status",  "reason",    "candidate_id"}));
}

// The per-op pieces the one tune and suite command call.
TEST(CliOps, OpPieces) {
  using G = cli::OpCli<GemmOp>;
  using S = cli::OpCli<SoftmaxOp>;
  cli::TuneArgs t;
  t.shape = "softmax", t.shape2 = "1000x4096";
  const SoftmaxProblem sp = S::tune_problem(t);
  EXPECT_EQ(sp.rows, 1000);
  EXPECT_EQ(S::problem_text(sp), "softmax " + sp.str());
  EXPECT_EQ(S::label({1000, 4096}), "softmax 1000x4096");
  EXPECT_NEAR(S::rate(SoftmaxProblem::make(1000, 1000), 1.0), 4.0, 1e-12);  // TB/s: 4 MB in 1 us
  EXPECT_EQ(S::problem_json(sp).at("cols"), 4096);

  t.shape = "64x128x256", t.shape2.clear();
  const GemmProblem gp = G::tune_problem(t);
  EXPECT_EQ(G::problem_text(gp), gp.str());
  EXPECT_NEAR(G::rate(gp, 1.0), 2.0 * 64 * 128 * 256 * 1e-6, 1e-9);  // TFLOP/s
  EXPECT_EQ(G::rate(gp, 0), 0.0);
  EXPECT_EQ(G::problem_json(gp).at("k"), 256);
  cli::SuiteEntry e;
  e.model = "llama", e.layer = "qkv", e.phase = "decode", e.m = 16, e.n = 6144, e.k = 4096;
  EXPECT_EQ(G::label(e), "llama/qkv decode 16x6144x4096");

  // A suite record: fixed decimals in a GEMM suite's CSV, full precision in a softmax suite's;
  // the same JSON value.
  cli::Record fixed_text(G::kCsvFullPrecision), full(S::kCsvFullPrecision);
  fixed_text.number("median_us", 12.3456789, "12.346");
  full.number("median_us", 12.3456789, "12.346");
  EXPECT_EQ(fixed_text.cells(), std::vector<std::string>{"12.346"});
  EXPECT_EQ(full.cells(), std::vector<std::string>{"12.3456789"});
  EXPECT_EQ(fixed_text.json(), full.json());
}
