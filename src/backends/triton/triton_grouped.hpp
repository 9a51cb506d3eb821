// The Triton grouped GEMM backend's config space and compile parameters (no GPU needed).
//
// Kernel: python/gemmtune/kernels/triton_grouped.py (grouped_gemm, persistent: one program per
// SM, tiles of every group scheduled on the GPU). Compiled by the same worker pool and artifact
// store as the GEMM templates; the Python sources' digest travels in the params ("template").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/verdict.hpp"
#include "gemmtune/grouped.hpp"

namespace gemmtune::triton {

struct GroupedConfig {
  int block_m = 128, block_n = 128, block_k = 64;
  int num_warps = 4, num_stages = 3;
  int group_m = 8;  // row-tiles of a group swept together (L2 reuse of B[g])
  // Slices of block_m rows a tile may take (1-4): each k step loads B's tile once for all of them,
  // so a group of up to chunks * block_m rows reads each weight tile into the SM once (short,
  // uneven groups: decode and skewed routing).
  int chunks = 1;

  // "g128x256x64_w8_s4_gm8", with "_c<chunks>" when chunks > 1.
  std::string id() const;
  static GroupedConfig parse(const std::string& id);  // throws Error naming the id
  // Empty when this config can run p, else why not.
  std::string cannot_run(const GroupedGemmProblem& p) const;
  bool operator==(const GroupedConfig&) const = default;
};

// Every config worth timing for p.
std::vector<GroupedConfig> grouped_configs(const GroupedGemmProblem& p);
// The scheduler's vector length: the power of two >= groups, at least 16.
int grouped_max_g(const GroupedGemmProblem& p);
// The compile request's params (num_sms: the persistent grid; template_digest: the sources').
nlohmann::json grouped_params(const GroupedConfig& c, const GroupedGemmProblem& p, int num_sms,
                              const std::string& template_digest);
// Whether the kernel can take p at all (TMA: rows of A and B in multiples of 16 bytes).
Verdict grouped_verdict(const GroupedGemmProblem& p);

}  // namespace gemmtune::triton
