// The GPU tests' problems as kernel-pack input: tests/gpu/packs/*.jsonl (one problem JSON per
// line, what `gemmtune precompile FILE.jsonl` takes; scripts/precompile.sh's gpu-tests part) must
// hold exactly the problems the CuTe DSL GPU tests run (GEMM, softmax, grouped; and Fp8Block's, the
// overlapped launches' and the CUTLASS grouped candidates'), so that a pack built from them serves
// those tests on the GPU machine (which cannot compile CuTe DSL kernels). On a mismatch the test
// prints the file's expected content.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/problem_json.hpp"
#include "gemmtune/precompile.hpp"
#include "gpu/cutedsl_grouped_problems.hpp"
#include "gpu/cutedsl_problems.hpp"
#include "gpu/cutedsl_softmax_problems.hpp"
#include "gpu/cutlass_grouped_problems.hpp"
#include "gpu/fp8_block_problems.hpp"
#include "gpu/overlap_problems.hpp"

namespace gemmtune {
namespace {
namespace fs = std::filesystem;

fs::path packs_dir() { return fs::path(__FILE__).parent_path().parent_path() / "gpu" / "packs"; }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The softmax problems of tests/gpu/test_softmax_engine.cpp (through the engine, every backend;
// kept in step by hand).
std::vector<SoftmaxProblem> engine_test_problems() {
  struct S {
    int64_t rows, cols;
    DType in, out;
    int64_t ld;
  };
  const S shapes[] = {{64, 1024, DType::bf16, DType::bf16, 0},    {40, 4096, DType::fp16, DType::fp16, 0},
                      {24, 16384, DType::fp32, DType::fp32, 0},   {16, 65536, DType::bf16, DType::bf16, 0},
                      {9, 262144, DType::bf16, DType::bf16, 0},   {33, 1000, DType::bf16, DType::fp32, 1008},
                      {17, 33, DType::fp32, DType::bf16, 40},     {8, 131073, DType::fp16, DType::fp16, 0},
                      {24, 3000, DType::bf16, DType::bf16, 3008}, {300, 8192, DType::bf16, DType::bf16, 0},
                      {16, 262144, DType::bf16, DType::bf16, 0},  {64, 32768, DType::fp32, DType::fp32, 0},
                      {2048, 1024, DType::fp16, DType::fp16, 0},  {3, 5, DType::bf16, DType::bf16, 0}};
  std::vector<SoftmaxProblem> out;
  for (const S& s : shapes) {
    SoftmaxProblem p = SoftmaxProblem::make(s.rows, s.cols, s.in);
    p.out = s.out, p.ld = s.ld;
    out.push_back(p);
  }
  return out;
}

void expect_file(const std::string& name, const std::string& want) {
  const std::string have = read(packs_dir() / name);
  if (have != want) {
    const fs::path fresh = fs::path(::testing::TempDir()) / name;
    std::ofstream(fresh) << want;
    ADD_FAILURE() << "tests/gpu/packs/" << name << " is stale: the tests' problems are in " << fresh.string()
                  << " (copy it over)";
  }
  // And it parses back as precompile reads it.
  std::istringstream in(have);
  PrecompileRequest req;
  size_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) EXPECT_NO_THROW(add_problem_json(req, line)) << line;
  EXPECT_EQ(req.gemm.size() + req.softmax.size() + req.grouped.size(), lines);
}

TEST(GpuTestPacks, CutedslGemmMatrix) {
  std::string want;
  for (auto& [what, p] : cutedsl_test::problem_matrix()) want += problem_to_json(p) + "\n";
  expect_file("cutedsl_gemm.jsonl", want);
}

TEST(GpuTestPacks, Fp8BlockProblems) {
  std::string want;
  for (auto& [what, p] : fp8_block_test::problems()) want += problem_to_json(p) + "\n";
  expect_file("fp8_block.jsonl", want);
}

TEST(GpuTestPacks, OverlapProblems) {
  std::string want;
  for (const GemmProblem& p : overlap_test::problems()) want += problem_to_json(p) + "\n";
  expect_file("overlap.jsonl", want);
}

TEST(GpuTestPacks, CutlassGroupedProblems) {
  std::string want;
  for (const GroupedGemmProblem& p : cutlass_grouped_test::problems()) want += grouped_problem_to_json(p) + "\n";
  expect_file("grouped.jsonl", want);
}

TEST(GpuTestPacks, CutedslGroupedProblems) {
  std::string want;
  for (const GroupedGemmProblem& p : cutedsl_grouped_test::problems()) want += grouped_problem_to_json(p) + "\n";
  expect_file("cutedsl_grouped.jsonl", want);
}

TEST(GpuTestPacks, SoftmaxMatrixAndEngineProblems) {
  std::string want;
  for (auto& [what, p] : cutedsl_softmax_test::problem_matrix()) want += softmax_problem_to_json(p) + "\n";
  for (const SoftmaxProblem& p : engine_test_problems()) want += softmax_problem_to_json(p) + "\n";
  expect_file("softmax.jsonl", want);
}

}  // namespace
}  // namespace gemmtune
