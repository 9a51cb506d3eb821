// The problems of tests/gpu/test_overlap.cu's Triton / CuTe DSL / CUTLASS test (overlapped launches
// behind a kernel that writes A late): decode and prefill sizes in bf16, fp8 with tensorwise scales
// and a bias, and fp8 with block scales (A's scales late too). Also the CuTe DSL's and CUTLASS's
// kernel-pack input (tests/gpu/packs/overlap.jsonl, kept equal by GpuTestPacks.OverlapProblems):
// the GPU machine compiles neither.
#pragma once

#include <vector>

#include "gemmtune/problem.hpp"

namespace gemmtune::overlap_test {

inline std::vector<GemmProblem> problems() {
  GemmProblem fp8 = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  fp8.bias = true;
  // Block scales: A's 1x128 scales come late with A (a quantizing kernel writes both).
  GemmProblem block = GemmProblem::linear(128, 4096, 4096, DType::e4m3);
  block.scale = ScaleMode::block;
  return {GemmProblem::linear(16, 4096, 4096), GemmProblem::linear(128, 4096, 4096), fp8, block};
}

}  // namespace gemmtune::overlap_test
