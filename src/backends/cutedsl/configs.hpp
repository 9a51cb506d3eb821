// The CuTe DSL backend's config space (docs/cutedsl.md), its pruning per problem, and the
// problem-level rules of our kernel (python/gemmtune/cutedsl/gemm_sm90.py). Host-only.
//
// Space: CTA tile M in {64, 128} (one or two consumer warpgroups), N in {32, 64, 128, 256} (fp8:
// {32, 64, 128, 192}), K spanning 128 bytes (64 for 16-bit inputs, 128 for fp8); cluster 1x1,
// 2x1, 1x2 (TMA multicast); mainloop stages (default: as many as fit); swap-AB (the kernel
// computes D^T) for small m. Tiles and clusters are in KERNEL terms: with swap-AB the kernel's M
// is the problem's n.
//
// A config's id is compact and canonical: "128x128c2x1" (tile 128x128, cluster 2x1, stages
// auto), "64x64c1x1s" (swap-AB), "128x256c1x1p3" (3 stages). Config::parse(c.id()) == c.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::cutedsl {

struct Config {
  int tile_m = 128, tile_n = 128;  // kernel terms
  int cluster_m = 1, cluster_n = 1;
  int stages = 0;  // 0: as many as fit
  bool swap_ab = false;

  std::string id() const;
  std::string name() const;  // "128x128 cluster 2x1", "... 3 stages", "... swap-AB"
  // Throws Error naming the id when it is not the canonical id of a config in range.
  static Config parse(std::string_view id);
  bool operator==(const Config&) const = default;
};

// Shared memory arithmetic of the kernel (gemm_sm90.py plan_smem, kept in step): 227 KiB per
// CTA, minus a reserve for barriers and alignment, minus two epilogue buffers of
// min(tile M, 128) x min(32, tile N) D elements, minus (block scales) the scale ring; the rest
// holds the mainloop stages (A's and B's k-tiles).
constexpr int64_t kMaxSharedBytes = 232448;
constexpr int64_t kSharedReserve = 4096;
constexpr int kEpiStages = 2;
constexpr int kMinStages = 2;
int tile_k(const GemmProblem& p);                        // 128 bytes of A
int64_t stage_bytes(const Config& c, const GemmProblem& p);
int64_t epilogue_bytes(const Config& c, const GemmProblem& p);
int64_t scale_ring_bytes(const Config& c, const GemmProblem& p);  // 0 without block scales
int max_stages(const Config& c, const GemmProblem& p);  // stages that fit
// fp32 accumulator registers per consumer thread (each warpgroup owns 64 rows of the tile);
// fp8 triples them up to tile N 128 (overlapped promotion keeps two more register tiles of
// partial sums) and doubles them above (one tile, promoted after each batch).
int accumulator_registers(const Config& c, const GemmProblem& p);

// Problem-level rules (no config): dtypes, layouts, TMA's 16-byte rule on A, B, D.
Verdict problem_verdict(const GemmProblem& p);
// Whether the config can run `p` (the kernel's checks, shared memory, registers); why not.
Verdict check(const Config& c, const GemmProblem& p);

// Every config that passes check() for `p`, before ranking, in a stable order.
std::vector<Config> valid_configs(const GemmProblem& p);
// The pruned, ranked candidates for `p` on `sm_count` SMs (at most max_configs; the best of
// each (swap-AB, cluster) class kept in). `admit` (may be empty) restricts the configs ranked
// (load-only: those whose artifact is in the store), before the cap, as CUTLASS's configs_for.
std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs = 16,
                                const std::function<bool(const Config&)>& admit = {});
double cost_estimate(const Config& c, const GemmProblem& p, int sm_count);

// The compile request's params (python/gemmtune/cutedsl/compile.py, all fields, normalized):
// dtypes, layouts, epilogue and config; not m, n, k, leading dimensions, alpha or beta, which
// stay run-time arguments. params(c, p).dump() is also the config text the .so reports.
nlohmann::json params(const Config& c, const GemmProblem& p);

}  // namespace gemmtune::cutedsl
