// Usage errors of the gemmtune CLI are usage errors: exit 2, found before any GPU check (so they
// say the same on a machine without a GPU). The unknown-command suggestion is in test_cli.cpp
// (CliExec.UsageErrorsSuggestTheNearestName).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gemmtune/options.hpp"
#include "host/problems.hpp"

using namespace gemmtune;
using host_test::Exec;
using host_test::run_cli;

TEST(CliUsage, UnknownBackendBeforeTheGpu) {
  host_test::TempDir dir("gemmtune_cli_");
  for (const char* args : {"tune 64x64x64 --backends cublaslt,cutlas", "tune softmax 64x64 --backends natve",
                           "suite x.csv --backends tritn"}) {
    const Exec e = run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << args << "\n" << e.err;
    EXPECT_NE(e.err.find("unknown backend '"), std::string::npos) << args << "\n" << e.err;
    EXPECT_NE(e.err.find("known: cublaslt, triton, cutlass, cutedsl, native"), std::string::npos) << e.err;
    EXPECT_NE(e.err.find("did you mean '"), std::string::npos) << args << "\n" << e.err;
    EXPECT_EQ(e.err.find("no CUDA device"), std::string::npos) << args << "\n" << e.err;
  }
  const Exec e = run_cli(dir.root, "tune 64x64x64 --backends cublaslt,cutlas");
  EXPECT_NE(e.err.find("'cutlas'"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("did you mean 'cutlass'?"), std::string::npos) << e.err;
}

// suite and precompile alike: precompile needs no GPU, but it must not start building anything.
TEST(CliUsage, SuiteWithoutMValuesBeforeTheGpu) {
  host_test::TempDir dir("gemmtune_cli_");
  const auto csv = dir.root / "layers.csv";
  std::ofstream(csv) << "model,layer,n,k\nllama,qkv,6144,4096\n";
  for (const char* command : {"suite", "precompile"}) {
    const Exec e = run_cli(dir.root, std::string(command) + " '" + csv.string() + "'");
    EXPECT_EQ(e.code, 2) << command << "\n" << e.err;
    EXPECT_NE(e.err.find(std::string("gemmtune ") + command + ": " + csv.string() +
                         ": has no m column, so --m-values FILE (header phase,m) is required"),
              std::string::npos)
        << e.err;
    EXPECT_EQ(e.err.find("no CUDA device"), std::string::npos) << e.err;
  }

  EXPECT_TRUE(cli::suite_needs_m_values("model,layer,n,k\nllama,qkv,6144,4096\n", "x.csv"));
  EXPECT_FALSE(cli::suite_needs_m_values("m,n,k\n16,16,16\n", "x.csv"));
  EXPECT_FALSE(cli::suite_needs_m_values(" M ,n,k\n16,16,16\n", "x.csv"));
  EXPECT_FALSE(cli::suite_needs_m_values("", "x.csv"));
}
