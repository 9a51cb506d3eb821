// The cutedsl backend's grouped GEMM (docs/grouped.md): one candidate per Config, each our Hopper
// GEMM in grouped mode (python/gemmtune/cutedsl/gemm_sm90.py), compiled ahead of time by the
// CuTe DSL toolchain (params {"op": "grouped", ...}) into a .so loaded as the GEMM instances are
// (cutedsl_backend.hpp) and run through the grouped entry points of gt_cutedsl_abi.h.
//
// Scope: A and B bf16, fp16 or e4m3 (fp8 with tensorwise or rowwise scales; no block scales), D
// bf16 or fp16, bias [G, n] and activations, alpha; contiguous or masked rows, any groups; packed
// operands whose rows span multiples of 16 bytes (TMA: k * A's bytes and n * D's bytes).
//
// Configs: the GEMM's Config and ids (configs.hpp), in problem terms (no swap-AB) with clusters
// along N only: tile M 64 or 128 (rows), tile N 64, 128 or 256, cluster 1x1 or 1x2, stages
// auto, e.g. "128x256c1x2". A tile never spans two groups, so each group is the GEMM of its rows
// (group_gemm) and the GEMM's dtype, shared-memory and register rules apply to it unchanged.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/configs.hpp"
#include "gemmtune/grouped.hpp"
#include "../../../python/gemmtune/cutedsl/gt_cutedsl_abi.h"

namespace gemmtune::cutedsl {

// One group of `p` as a dense GEMM (m: the rows-per-group bucket; A [m, k] row-major, B [n, k],
// D [m, n] packed; p's dtypes, scales, epilogue and alpha): what the GEMM's rules take.
GemmProblem group_gemm(const GroupedGemmProblem& p);

// Why `p` is not for the grouped kernel, or yes.
Verdict grouped_verdict(const GroupedGemmProblem& p);
// Whether `c` can run `p` (the kernel's checks, shared memory, registers); why not.
Verdict grouped_check(const Config& c, const GroupedGemmProblem& p);
// The candidates for `p`, best first by a small model (64-row tiles for short groups, 128x256 /
// 128x128 with a 1x2 cluster for long ones), at most max_configs (<= 0: all). `admit` (may be
// empty) restricts the configs ranked (load-only: those in the store), before the cap.
std::vector<Config> grouped_configs(const GroupedGemmProblem& p, int max_configs = 16,
                                    const std::function<bool(const Config&)>& admit = {});

// The compile request's params, every field: {"op": "grouped", "layout", "ab_dtype", "d_dtype",
// "bias", "act", "scale", "tile_m", "tile_n", "cluster_n", "stages"}; not groups, n, k, the
// capacity or alpha, which stay run-time arguments. grouped_params(c, p).dump() is also the
// config text the .so reports.
nlohmann::json grouped_params(const Config& c, const GroupedGemmProblem& p);
compile::Job grouped_job(const Config& c, const GroupedGemmProblem& p);

// The entry points of one loaded grouped instance (loaded as Library is: from the verified bytes,
// after its runtime library; never unloaded; one load per key per process).
struct GroupedLibrary {
  std::string key;
  gt_cutedsl_grouped_config_fn config = nullptr;
  gt_cutedsl_grouped_can_implement_fn can_implement = nullptr;
  gt_cutedsl_grouped_run_fn run = nullptr;
  gt_cutedsl_grouped_status_text_fn status_text = nullptr;

  // Throws Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs
  // from GT_CUTEDSL_GROUPED_ABI_VERSION, or the instance's config text is not `expect_config`.
  static std::shared_ptr<const GroupedLibrary> open(const compile::Built& built, const std::string& expect_config);
};

}  // namespace gemmtune::cutedsl
