// The gemmtune CLI: argument vectors to problems (no GPU), suite input, and the built binary
// run as a user would (GEMMTUNE_CLI is its path).
//
// The CLI's sources are not part of the library this test binary links, so the grammar under
// test is compiled in here.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/cuda.hpp"
#include "gemmtune/npy.hpp"
#include "gemmtune/options.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "host/problems.hpp"

using namespace gemmtune;
using gemmtune::cli::problem_from_tune_args;
namespace fs = std::filesystem;
using host_test::error_of;
using host_test::Exec;
using host_test::run_cli;

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

// ---- problems from argument vectors ----------------------------------------------------

TEST(CliProblem, DefaultsAreNnLinear) {
  const GemmProblem p = problem_from_tune_args({"64x128x256"});
  EXPECT_EQ(p.m, 64);
  EXPECT_EQ(p.n, 128);
  EXPECT_EQ(p.k, 256);
  EXPECT_EQ(p.a.dtype, DType::bf16);
  EXPECT_EQ(p.a.layout, Layout::row);
  EXPECT_EQ(p.b.dtype, DType::bf16);
  EXPECT_EQ(p.b.layout, Layout::col);
  EXPECT_EQ(p.d.dtype, DType::bf16);
  EXPECT_EQ(p.d.layout, Layout::row);
  EXPECT_EQ(p.scale, ScaleMode::none);
  EXPECT_EQ(p.act, Activation::none);
  EXPECT_FALSE(p.bias);
  EXPECT_FALSE(p.uses_c());
  EXPECT_EQ(p.canonical(), GemmProblem::linear(64, 128, 256).canonical());
  EXPECT_EQ(cli::layout_letters(p), "rc");
  EXPECT_EQ(cli::epilogue_str(p), "none");
}

TEST(CliProblem, Layouts) {
  GemmProblem p = problem_from_tune_args({"64x128x256", "--layout", "cr", "--d-layout", "c"});
  EXPECT_EQ(p.a.layout, Layout::col);
  EXPECT_EQ(p.b.layout, Layout::row);
  EXPECT_EQ(p.d.layout, Layout::col);
  EXPECT_EQ(p.c.layout, Layout::col);  // C follows D
  p = problem_from_tune_args({"64x128x256", "--layout", "RR", "--d-layout", "row"});
  EXPECT_EQ(p.a.layout, Layout::row);
  EXPECT_EQ(p.b.layout, Layout::row);
  EXPECT_EQ(p.d.layout, Layout::row);
  p = problem_from_tune_args({"64x128x256", "--lda", "300", "--ldb", "512", "--ldd", "130"});
  EXPECT_EQ(p.lda(), 300);
  EXPECT_EQ(p.ldb(), 512);
  EXPECT_EQ(p.ldd(), 130);
}

TEST(CliProblem, DtypesAndFp8Defaults) {
  GemmProblem p = problem_from_tune_args({"64x128x256", "--dtype", "e4m3"});
  EXPECT_EQ(p.a.dtype, DType::e4m3);
  EXPECT_EQ(p.b.dtype, DType::e4m3);
  EXPECT_EQ(p.d.dtype, DType::bf16);  // fp8 -> bf16 out
  EXPECT_EQ(p.scale, ScaleMode::tensorwise);
  p = problem_from_tune_args({"64x128x256", "--dtype", "e4m3", "--scale", "none"});
  EXPECT_EQ(p.scale, ScaleMode::none);
  p = problem_from_tune_args({"64x128x256", "--dtype", "e4m3", "--b-dtype", "e5m2", "--scale", "rowwise"});
  EXPECT_EQ(p.a.dtype, DType::e4m3);
  EXPECT_EQ(p.b.dtype, DType::e5m2);
  EXPECT_EQ(p.scale, ScaleMode::rowwise);
  p = problem_from_tune_args({"64x128x256", "--dtype", "e4m3", "--scale", "block"});
  EXPECT_EQ(p.scale, ScaleMode::block);
  p = problem_from_tune_args({"64x128x256", "--dtype", "fp16"});
  EXPECT_EQ(p.d.dtype, DType::fp16);
  EXPECT_EQ(p.scale, ScaleMode::none);
  p = problem_from_tune_args({"64x128x256", "--dtype", "fp16", "--out-dtype", "fp32"});
  EXPECT_EQ(p.a.dtype, DType::fp16);
  EXPECT_EQ(p.d.dtype, DType::fp32);
  EXPECT_EQ(p.c.dtype, DType::fp32);
  p = problem_from_tune_args({"64x128x256", "--dtype", "fp32", "--tf32"});
  EXPECT_EQ(p.d.dtype, DType::fp32);
  EXPECT_TRUE(p.tf32);
}

TEST(CliProblem, Epilogue) {
  const GemmProblem p = problem_from_tune_args(
      {"64x128x256", "--alpha", "0.5", "--beta", "1", "--bias", "--act", "gelu"});
  EXPECT_EQ(p.alpha, 0.5f);
  EXPECT_EQ(p.beta, 1.0f);
  EXPECT_TRUE(p.uses_c());
  EXPECT_TRUE(p.bias);
  EXPECT_EQ(p.act, Activation::gelu_tanh);
  EXPECT_EQ(cli::epilogue_str(p), "alpha+beta+bias+gelu");
  EXPECT_EQ(problem_from_tune_args({"8x8x8", "--act", "silu"}).act, Activation::silu);
  EXPECT_EQ(problem_from_tune_args({"8x8x8", "--act", "relu"}).act, Activation::relu);
}

TEST(CliProblem, ErrorsNameTheField) {
  auto err = [](std::vector<std::string> args) { return error_of([&] { problem_from_tune_args(args); }); };
  EXPECT_TRUE(starts_with(err({"4096x4096"}), "shape")) << err({"4096x4096"});
  EXPECT_TRUE(starts_with(err({"0x64x64"}), "shape") || err({"0x64x64"}).find(".m") != std::string::npos)
      << err({"0x64x64"});
  EXPECT_TRUE(starts_with(err({"64x64x64", "--dtype", "bf17"}), "dtype")) << err({"64x64x64", "--dtype", "bf17"});
  EXPECT_TRUE(starts_with(err({"64x64x64", "--out-dtype", "int8"}), "out-dtype"));
  EXPECT_TRUE(starts_with(err({"64x64x64", "--layout", "r"}), "layout"));
  EXPECT_TRUE(starts_with(err({"64x64x64", "--layout", "rx"}), "layout"));
  EXPECT_TRUE(starts_with(err({"64x64x64", "--d-layout", "x"}), "d-layout"));
  EXPECT_TRUE(starts_with(err({"64x64x64", "--act", "tanh"}), "act"));
  EXPECT_TRUE(starts_with(err({"64x64x64", "--scale", "columnwise"}), "scale"));
  // Problem-level checks come from GemmProblem::validate and name the problem field.
  const std::string lda = err({"64x64x256", "--lda", "100"});
  EXPECT_NE(lda.find("lda"), std::string::npos) << lda;
  const std::string scale = err({"64x64x64", "--scale", "rowwise"});  // bf16 inputs take no scales
  EXPECT_NE(scale.find("scale"), std::string::npos) << scale;
}

TEST(CliProblem, UsageErrorsAreParseErrors) {
  EXPECT_THROW(problem_from_tune_args({}), CLI::ParseError);                          // no shape
  EXPECT_THROW(problem_from_tune_args({"64x64x64", "--nope"}), CLI::ParseError);      // unknown flag
  EXPECT_THROW(problem_from_tune_args({"64x64x64", "--lda", "abc"}), CLI::ParseError);
  EXPECT_THROW(problem_from_tune_args({"64x64x64", "--cache", "x", "--no-cache"}), CLI::ParseError);
}

TEST(CliGrammar, CommandsAndEngineFlags) {
  {
    cli::Cli c;
    c.parse({"tune", "64x64x64", "--backends", "cublaslt, Triton", "--cache", "/tmp/x.sqlite", "--force", "--json", "-"});
    EXPECT_EQ(c.command(), cli::Command::tune);
    EXPECT_TRUE(c.tune.force);
    EXPECT_EQ(c.tune.json, "-");
    const EngineOptions o = cli::engine_options(c.tune.engine, {});
    EXPECT_EQ(o.cache_path, fs::path("/tmp/x.sqlite"));
    EXPECT_TRUE(o.use_cache);
    EXPECT_EQ(o.backends, (std::vector<std::string>{"cublaslt", "triton"}));
  }
  {
    cli::Cli c;
    c.parse({"tune", "64x64x64", "--no-cache"});
    EXPECT_FALSE(cli::engine_options(c.tune.engine, {}).use_cache);
  }
  {
    cli::Cli c;
    c.parse({"cache", "show", "abc123", "--cache", "/tmp/c.sqlite"});  // --cache after the action
    EXPECT_EQ(c.command(), cli::Command::cache);
    EXPECT_EQ(c.cache.action, "show");
    EXPECT_EQ(c.cache.arg, "abc123");
    EXPECT_EQ(c.cache.cache, "/tmp/c.sqlite");
  }
  {
    cli::Cli c;
    c.parse({"cache", "--cache", "/tmp/c.sqlite", "export", "out.json"});
    EXPECT_EQ(c.cache.action, "export");
    EXPECT_EQ(c.cache.arg, "out.json");
    EXPECT_EQ(c.cache.cache, "/tmp/c.sqlite");
  }
  {
    cli::Cli c;
    c.parse({"run", "--a", "a.npy", "--b", "w.npy", "--weight", "--out", "d.npy", "--dtype", "fp16"});
    EXPECT_EQ(c.command(), cli::Command::run);
    EXPECT_TRUE(c.run.weight);
    EXPECT_EQ(c.run.dtype, "fp16");
  }
  {
    cli::Cli c;
    EXPECT_THROW(c.parse({"cache"}), CLI::ParseError);  // needs an action
    cli::Cli d;
    EXPECT_THROW(d.parse({"run", "--a", "a.npy"}), CLI::ParseError);  // --b, --out required
    cli::Cli e;
    EXPECT_THROW(e.parse(std::vector<std::string>{}), CLI::ParseError);  // a command is required
  }
}

// ---- suite input -----------------------------------------------------------------------

TEST(CliSuite, ModelLayersCrossMValues) {
  const std::string shapes =
      "model,layer,n,k\r\n"
      "# comment\n"
      "llama,qkv,6144,4096\n"
      "\n"
      "llama,\"o,proj\",4096,4096\n";
  const std::string ms = "phase,m\ndecode,16\nprefill,4096\n";
  const auto e = cli::suite_entries(shapes, "shapes.csv", &ms, "m.csv");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].model, "llama");
  EXPECT_EQ(e[0].layer, "qkv");
  EXPECT_EQ(e[0].phase, "decode");
  EXPECT_EQ(e[0].m, 16);
  EXPECT_EQ(e[0].n, 6144);
  EXPECT_EQ(e[0].k, 4096);
  EXPECT_EQ(e[1].phase, "prefill");
  EXPECT_EQ(e[1].m, 4096);
  EXPECT_EQ(e[3].layer, "o,proj");
  EXPECT_EQ(e[3].m, 4096);
}

TEST(CliSuite, MnkRowsAndErrors) {
  const auto e = cli::suite_entries("k,n,m\n256,128,64\n", "p.csv", nullptr, "");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].m, 64);
  EXPECT_EQ(e[0].n, 128);
  EXPECT_EQ(e[0].k, 256);

  std::string msg = error_of([] { cli::suite_entries("model,layer,n,k\na,b,1,2\n", "s.csv", nullptr, ""); });
  EXPECT_NE(msg.find("--m-values"), std::string::npos) << msg;
  msg = error_of([] { cli::suite_entries("m,n,k\n1,2,x\n", "s.csv", nullptr, ""); });
  EXPECT_NE(msg.find("s.csv:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("column k"), std::string::npos) << msg;
  msg = error_of([] { cli::suite_entries("a,b\n1,2\n", "s.csv", nullptr, ""); });
  EXPECT_NE(msg.find("s.csv: header"), std::string::npos) << msg;
  msg = error_of([] { cli::suite_entries("m,n,k\n1,2\n", "s.csv", nullptr, ""); });
  EXPECT_NE(msg.find("s.csv:2"), std::string::npos) << msg;
  msg = error_of([] { cli::suite_entries("m,n,k\n\"1,2,3\n", "s.csv", nullptr, ""); });
  EXPECT_NE(msg.find("unterminated"), std::string::npos) << msg;
}

TEST(CliSuite, CsvEscape) {
  EXPECT_EQ(cli::csv_escape("plain"), "plain");
  EXPECT_EQ(cli::csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(cli::csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  const auto rows = cli::parse_csv(cli::csv_escape("a,\"b\"\nc") + ",x\n", "t");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a,\"b\"\nc", "x"}));
}

// D19: a CSV saved as Excel's "CSV UTF-8" starts with a BOM, which became part of the first
// column's name ("\xEF\xBB\xBFm"), so the m column was "missing".
TEST(CliSuite, CsvIgnoresALeadingUtf8Bom) {
  const auto rows = cli::parse_csv("\xEF\xBB\xBFm,n,k\r\n16,32,64\r\n", "t");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"m", "n", "k"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"16", "32", "64"}));
}

// ---- the built binary ------------------------------------------------------------------

TEST(CliExec, HelpExitsZero) {
  host_test::TempDir dir("gemmtune_cli_");
  Exec e = run_cli(dir.root, "--help");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("Exit codes"), std::string::npos) << e.out;
  for (const char* cmd : {"tune", "suite", "run", "cache", "info"}) {
    e = run_cli(dir.root, std::string(cmd) + " --help");
    EXPECT_EQ(e.code, 0) << cmd << ": " << e.err;
    EXPECT_NE(e.out.find("Usage"), std::string::npos) << cmd;
  }
  e = run_cli(dir.root, "tune --help");
  EXPECT_NE(e.out.find("nominal H200"), std::string::npos) << "tune --help must say which roof is used";
  e = run_cli(dir.root, "--version");
  EXPECT_EQ(e.code, 0);
  EXPECT_NE(e.out.find(gemmtune::version()), std::string::npos) << e.out;
}

TEST(CliExec, BadArgsExitTwo) {
  host_test::TempDir dir("gemmtune_cli_");
  for (const char* args : {"", "frobnicate", "tune", "tune 64x64x64 --nope", "tune 4096x4096", "tune 64x64x64 --dtype bf17",
                           "cache", "run --a x.npy"}) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << "args: " << args << "\n" << e.err;
    EXPECT_FALSE(e.err.empty()) << args;
  }
  const Exec e = run_cli(dir.root, "tune 4096x4096");
  EXPECT_NE(e.err.find("shape"), std::string::npos) << e.err;
}

TEST(CliExec, TuneWithoutGpuExitsThree) {
  host_test::TempDir dir("gemmtune_cli_");
  std::string why;
  if (cuda_device_present(&why)) {
    const Exec e = run_cli(dir.root, "tune 64x64x64 --no-cache");
    EXPECT_EQ(e.code, 0) << e.err;
    EXPECT_NE(e.out.find("winner"), std::string::npos) << e.out;
    return;
  }
  Exec e = run_cli(dir.root, "tune 64x64x64");
  EXPECT_EQ(e.code, 3) << e.out << e.err;
  EXPECT_NE(e.err.find("gemmtune: no CUDA device ("), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("tuning needs an NVIDIA GPU"), std::string::npos) << e.err;
  EXPECT_EQ(e.err.find(".cpp:"), std::string::npos) << "no source locations for users: " << e.err;
  e = run_cli(dir.root, "info --no-measure");
  EXPECT_EQ(e.code, 3);
  EXPECT_NE(e.err.find("no CUDA device: "), std::string::npos) << e.err;
  EXPECT_NE(e.out.find(gemmtune::version()), std::string::npos) << e.out;
  // Every backend's availability without a GPU: those that need one say so.
  for (const char* line : {"  cublaslt: not available: ", "  triton: ", "  cutlass: ",
                           "  cutedsl: ", "  native: not available: ", "  softmax/native: not available: ",
                           "  softmax/triton: ", "  grouped/triton: "})
    EXPECT_NE(e.out.find(line), std::string::npos) << line << " in\n" << e.out;
  e = run_cli(dir.root, "info --json");
  EXPECT_EQ(e.code, 3);
  const nlohmann::json j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j.at("version"), gemmtune::version());
  EXPECT_TRUE(j.at("device").is_null());
  ASSERT_EQ(j.at("backends").size(), 12u);  // 5 GEMM + 3 softmax + 4 grouped
  for (const auto& b : j.at("backends")) {
    EXPECT_TRUE(b.at("available").is_boolean());
    if (!b.at("available").get<bool>()) EXPECT_FALSE(b.at("reason").get<std::string>().empty()) << b.dump();
    else EXPECT_FALSE(b.at("version").get<std::string>().empty()) << b.dump();
  }
  EXPECT_FALSE(j.at("backends")[0].at("available").get<bool>()) << "cuBLASLt needs a GPU";
}

TEST(CliExec, RunChecksShapesBeforeTheGpu) {
  host_test::TempDir dir("gemmtune_cli_");
  const float a[6] = {1, 2, 3, 4, 5, 6};
  npy::write(dir.root / "a.npy", a, npy::Elem::f4, {2, 3});
  npy::write(dir.root / "w.npy", a, npy::Elem::f4, {3, 2});  // W[n,k] with k = 2: wrong
  const Exec e = run_cli(dir.root, "run --a '" + (dir.root / "a.npy").string() + "' --b '" +
                                       (dir.root / "w.npy").string() + "' --weight --out '" +
                                       (dir.root / "d.npy").string() + "'");
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find("w.npy: dimension 1 (k)"), std::string::npos) << e.err;
}

TEST(CliExec, RunChecksBlockScaleShapesBeforeTheGpu) {
  // A[2, 300] and W[3, 300]: block scales are scale_a [2, 3] and scale_b [1, 3]; [1, 2] is wrong.
  host_test::TempDir dir("gemmtune_cli_");
  const std::vector<float> x(900, 0.5f);
  npy::write(dir.root / "a.npy", x.data(), npy::Elem::f4, {2, 300});
  npy::write(dir.root / "w.npy", x.data(), npy::Elem::f4, {3, 300});
  npy::write(dir.root / "sa.npy", x.data(), npy::Elem::f4, {2, 3});
  npy::write(dir.root / "sb.npy", x.data(), npy::Elem::f4, {1, 2});
  auto path = [&](const char* f) { return "'" + (dir.root / f).string() + "'"; };
  const Exec e = run_cli(dir.root, "run --dtype e4m3 --a " + path("a.npy") + " --b " + path("w.npy") +
                                       " --weight --scale-a " + path("sa.npy") + " --scale-b " + path("sb.npy") +
                                       " --out " + path("d.npy"));
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find("sb.npy: dimension 1 (k) of scale_b[ceil(n/128),ceil(k/128)] is 2"), std::string::npos)
      << e.err;
}

TEST(CliExec, CacheListOnEmptyCache) {
  host_test::TempDir dir("gemmtune_cli_");
  const std::string cache = (dir.root / "c.sqlite").string();
  Exec e = run_cli(dir.root, "cache list --cache '" + cache + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("no entries"), std::string::npos) << e.out;
  EXPECT_FALSE(fs::exists(cache)) << "listing must not create a cache";
  { TuningCache created(cache); }
  e = run_cli(dir.root, "cache list --cache '" + cache + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("no entries"), std::string::npos) << e.out;
  e = run_cli(dir.root, "cache show 0123 --cache '" + cache + "'");
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("no entry"), std::string::npos) << e.err;
}

TEST(CliExec, CacheExportImportRoundTrip) {
  host_test::TempDir dir("gemmtune_cli_");
  const std::string src = (dir.root / "src.sqlite").string(), dst = (dir.root / "dst.sqlite").string();
  const std::string json = (dir.root / "export.json").string();

  TuneReport report;
  report.problem = GemmProblem::linear(64, 128, 256);
  report.key = "00000000cafef00d";
  CandidateResult win;
  win.backend = "cublaslt";
  win.id = "algo-1";
  win.name = "algo 1 tile 128x128";
  win.status = CandidateStatus::ok;
  win.median_us = 12.5;
  win.p20_us = 12.0;
  win.p80_us = 13.0;
  win.rel_err = 1e-3;
  win.samples = 5;
  win.winner = true;
  CandidateResult slow = win;
  slow.id = "algo-2";
  slow.name = "algo 2";
  slow.median_us = 20;
  slow.winner = false;
  slow.is_default = true;
  report.results = {win, slow};
  { TuningCache(src).store(report.key, "test-environment", report); }

  Exec e = run_cli(dir.root, "cache list --cache '" + src + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("00000000cafef00d"), std::string::npos) << e.out;
  e = run_cli(dir.root, "cache show cafe --cache '" + src + "'");  // not a prefix
  EXPECT_EQ(e.code, 1);
  e = run_cli(dir.root, "cache show 00000000caf --cache '" + src + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("algo 2"), std::string::npos) << e.out;

  e = run_cli(dir.root, "cache export '" + json + "' --cache '" + src + "'");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(slurp(json).value_or("").find("gemmtune-cache"), std::string::npos);
  e = run_cli(dir.root, "cache import '" + json + "' --cache '" + dst + "'");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("imported 1 entry"), std::string::npos) << e.out;

  TuningCache imported(dst);
  const auto choice = imported.lookup(report.key);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->backend, "cublaslt");
  EXPECT_EQ(choice->candidate_id, "algo-1");
  EXPECT_EQ(choice->environment, "test-environment");
  EXPECT_DOUBLE_EQ(choice->median_us, 12.5);
  EXPECT_EQ(imported.results(report.key).size(), 2u);

  e = run_cli(dir.root, "cache clear --cache '" + dst + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("removed 1 entry"), std::string::npos) << e.out;
  EXPECT_FALSE(TuningCache(dst).lookup(report.key).has_value());

  // A file that is not an export is an error (exit 1) with a message, not a crash.
  { std::ofstream(dir.root / "bad.json") << "{\"format\": \"something else\"}"; }
  e = run_cli(dir.root, "cache import '" + (dir.root / "bad.json").string() + "' --cache '" + dst + "'");
  EXPECT_EQ(e.code, 1);
  EXPECT_TRUE(starts_with(e.err, "gemmtune: ")) << e.err;
}

// Usage errors are found while parsing, before any GPU check: exit 2, naming what is known and
// the nearest name.
TEST(CliExec, UsageErrorsSuggestTheNearestName) {
  host_test::TempDir dir("gemmtune_cli_");
  Exec e = run_cli(dir.root, "tuen 64x64x64");
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("unknown command 'tuen' (known: tune, suite, run, cache, store, info, precompile, report); did you mean 'tune'?"),
            std::string::npos)
      << e.err;
  e = run_cli(dir.root, "tune 64x64x64 --backends cublas");
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("unknown backend 'cublas'"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("did you mean 'cublaslt'?"), std::string::npos) << e.err;
  e = run_cli(dir.root, "precompile none.csv --backends zzzzzzzz");
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("unknown backend 'zzzzzzzz' (known: cublaslt, triton, cutlass, cutedsl, native)"), std::string::npos)
      << e.err;
  EXPECT_EQ(e.err.find("did you mean"), std::string::npos) << "nothing near: " << e.err;
}
