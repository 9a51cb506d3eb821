// The problems every CuTe DSL grouped candidate meets in tests/gpu/test_grouped.cpp. Also
// precompiled on the build machine for the GPU machine's pack (tests/gpu/packs/
// cutedsl_grouped.jsonl, kept equal by the host test GpuTestPacks.CutedslGroupedProblems): the GPU
// machine has no CuTe DSL.
//
// Both layouts; bf16, fp16, and e4m3 with rowwise and tensorwise scales; short groups (64-row
// tiles), medium and long ones (128-row tiles, 1x2 clusters); D in another 16-bit dtype than A;
// bias and every activation; alpha; n and k not multiples of the tiles. Host float64 reference
// cost stays under ~0.4 G multiply-adds per check.
#pragma once

#include <vector>

#include "gemmtune/grouped.hpp"

namespace gemmtune::cutedsl_grouped_test {

inline std::vector<GroupedGemmProblem> problems() {
  std::vector<GroupedGemmProblem> out;
  out.push_back(GroupedGemmProblem::make(8, 384, 512, 64));
  auto masked = GroupedGemmProblem::make(5, 200, 264, 48);
  masked.layout = GroupedLayout::masked;
  out.push_back(masked);
  auto half = GroupedGemmProblem::make(33, 256, 128, 20, DType::fp16);
  half.bias = true, half.act = Activation::silu, half.alpha = 0.5f;
  out.push_back(half);
  auto to_fp16 = GroupedGemmProblem::make(3, 520, 392, 300);
  to_fp16.d = DType::fp16, to_fp16.act = Activation::relu;
  out.push_back(to_fp16);
  auto rowwise = GroupedGemmProblem::make(4, 256, 512, 100, DType::e4m3);
  rowwise.bias = true, rowwise.act = Activation::relu;
  out.push_back(rowwise);
  auto rowwise_masked = GroupedGemmProblem::make(6, 128, 256, 40, DType::e4m3);
  rowwise_masked.layout = GroupedLayout::masked, rowwise_masked.bias = true, rowwise_masked.act = Activation::silu;
  out.push_back(rowwise_masked);
  auto tensorwise = GroupedGemmProblem::make(3, 200, 1008, 40, DType::e4m3);
  tensorwise.scale = ScaleMode::tensorwise, tensorwise.layout = GroupedLayout::masked, tensorwise.d = DType::fp16;
  tensorwise.bias = true, tensorwise.act = Activation::gelu_tanh, tensorwise.alpha = 1.5f;
  out.push_back(tensorwise);
  out.push_back(GroupedGemmProblem::make(4, 512, 256, 600, DType::e4m3));  // long groups, rowwise
  return out;
}

}  // namespace gemmtune::cutedsl_grouped_test
