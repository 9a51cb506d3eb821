// The problems every CUTLASS grouped candidate meets in tests/gpu/test_grouped.cpp. Also
// precompiled on the build machine for the GPU machine's CUTLASS pack (tests/gpu/packs/
// grouped.jsonl, kept equal by the host test GpuTestPacks.CutlassGroupedProblems): the GPU machine
// has no nvcc.
//
// Both layouts, bf16 and fp16, short groups (64-row ping-pong tiles) and long ones (the large
// cooperative tiles and clusters), n and k not multiples of the tiles, alpha, one group.
#pragma once

#include <vector>

#include "gemmtune/grouped.hpp"

namespace gemmtune::cutlass_grouped_test {

inline std::vector<GroupedGemmProblem> problems() {
  std::vector<GroupedGemmProblem> out;
  out.push_back(GroupedGemmProblem::make(8, 384, 512, 64));
  auto masked = GroupedGemmProblem::make(5, 200, 264, 48);
  masked.layout = GroupedLayout::masked;
  out.push_back(masked);
  auto half = GroupedGemmProblem::make(33, 256, 128, 20, DType::fp16);
  half.alpha = 0.5f;
  out.push_back(half);
  out.push_back(GroupedGemmProblem::make(4, 1000, 776, 300));
  return out;
}

}  // namespace gemmtune::cutlass_grouped_test
