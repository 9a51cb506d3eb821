// The cutlass backend's grouped GEMM (docs/grouped.md): candidates are instances of
// kernel/sm90_grouped.cuh (CUTLASS's SM90 pointer-array grouped GEMM), one per Config, built by
// the nvcc toolchain like the GEMM instances and loaded through the same Library.
//
// Scope: bf16 or fp16 A, B and D (D in A's dtype), contiguous or masked rows, alpha; packed
// operands with n and k multiples of 8 (TMA's 16 bytes). Scales, bias, activations and other D
// dtypes are the Triton grouped kernel's (supports() says so). Configs use the GEMM's Config
// (no swap-AB, tile K 64; the tile order a run-time argument) and its ids.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutlass/configs.hpp"
#include "gemmtune/grouped.hpp"

namespace gemmtune::cutlass_backend {

// Why `p` is not for these kernels, or yes.
Verdict grouped_verdict(const GroupedGemmProblem& p);
// Whether `c` can run `p` (the template's static_asserts, restated); the reason when not.
Verdict grouped_check(const Config& c, const GroupedGemmProblem& p);
// The candidates for `p`, best first by a small model (64-row tiles for short groups).
std::vector<Config> grouped_configs(const GroupedGemmProblem& p);
// `ranked` (after any compile budget) with tile-order variants after it where groups are long
// (rows-per-group bucket >= kOrderedRowsPerGroup): the first kOrderedConfigs (configs.hpp) again
// in bands of 8 along M and along N. The group scheduler's default is along M, no bands; a
// variant shares its config's instance (the order is a run-time argument).
constexpr int64_t kOrderedRowsPerGroup = 512;
std::vector<Config> with_grouped_tile_orders(std::vector<Config> ranked, const GroupedGemmProblem& p);

// The template's parameters for (config, problem).
struct GroupedInstanceSpec {
  DType a = DType::bf16;
  GroupedLayout layout = GroupedLayout::contiguous;
  Config config;

  static GroupedInstanceSpec of(const Config& c, const GroupedGemmProblem& p);
  // "grouped a=bf16 layout=contiguous cfg=co128x256x64c2x1": what the .so reports, in its key.
  std::string text() const;
  // The generated translation unit instantiating kernel/sm90_grouped.cuh.
  std::string source() const;
};

compile::Job grouped_job(const GroupedInstanceSpec& spec);

}  // namespace gemmtune::cutlass_backend
