// The Triton softmax backend's config space and compile parameters (no GPU needed).
//
// Kernels: python/gemmtune/kernels/triton_softmax.py (softmax_rows: ROWS rows per program, each
// whole in registers; softmax_online: one row per program, two passes, any cols). Compiled by
// the same worker pool and artifact store as the GEMM templates (triton::process_compiler);
// the template file's digest travels in the params ("template"), so editing it re-keys the
// artifacts and, through version(), the tuning cache.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"

namespace gemmtune::triton {

struct SoftmaxConfig {
  bool online = false;
  int block_n = 1024;  // columns per block (rows kernel: >= cols, a power of two)
  int rows = 1;        // rows per program (rows kernel)
  int num_warps = 4;

  // "rows_b1024_r4_w4", "online_b4096_w16".
  std::string id() const;
  static SoftmaxConfig parse(const std::string& id);  // throws Error naming the bad part
  // Empty when this config can run p, else why not.
  std::string cannot_run(const SoftmaxProblem& p) const;
  bool operator==(const SoftmaxConfig&) const = default;
};

// Every config worth timing for p, rows configs first.
std::vector<SoftmaxConfig> softmax_configs(const SoftmaxProblem& p);

// The compile request's params for (config, problem); template_digest keys the template file.
nlohmann::json softmax_params(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& template_digest);

// Programs of the launch grid.
int64_t softmax_grid(const SoftmaxConfig& c, const SoftmaxProblem& p);

}  // namespace gemmtune::triton
