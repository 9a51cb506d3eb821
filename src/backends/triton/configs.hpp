// The Triton backend's config space (docs/triton-backend.md), its pruning per problem, and the
// mapping of a (config, problem) onto compile parameters and launch grids. Host-only.
//
// Space: Inductor-like tiled configs (block_m, block_n 16..256, block_k 32..128, 4 or 8 warps,
// 2..5 stages, group_m 8) scaled down to the problem (a block never exceeds the problem's
// next power of two, at least 16), persistent TMA configs for problems with enough tiles, and
// split-k 2..16 for problems with too few tiles to fill the GPU and a long K. fp8 inputs add
// BLOCK_K = 128 configs and drop tiles with more than 64 accumulator registers per thread
// (precise accumulation keeps a second accumulator: they spill). Large problems (16-bit and
// fp8 inputs) get only a short list of big-tile configs (about a dozen). Pruned by shared
// memory (estimate <= 227 KiB), by the persistent kernel's TMA and layout rules, and
// deduplicated: about 10-30 candidates per problem.
//
// A config's id is compact and canonical: "t128x128x64w8s3g8" (tiled), "p128x256x64w8s3g8"
// (persistent), "t16x64x128w4s4g8k4" (tiled, split-k 4). Config::parse(c.id()) == c.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::triton {

enum class KernelKind : uint8_t { tiled, persistent };

struct Config {
  KernelKind kind = KernelKind::tiled;
  int block_m = 128, block_n = 128, block_k = 64;
  int num_warps = 8, num_stages = 3;
  int group_m = 8;
  int split_k = 1;  // tiled only; > 1 adds a splitk_reduce launch

  std::string id() const;
  std::string name() const;  // "tiled 128x128x64 w8 s3", "persistent ...", "... split-k 4"
  // Throws Error naming the id when it is not a canonical id of a config in range.
  static Config parse(std::string_view id);
  bool operator==(const Config&) const = default;
};

constexpr int64_t kMaxSharedBytes = 232448;  // 227 KiB: sm_90's opt-in shared memory per block
constexpr int kReduceBlock = 1024;            // splitk_reduce's elements per program
constexpr int64_t kMaxWorkspaceBytes = int64_t(256) << 20;

// Large problems: m, n >= kLargeMinDim and at least kLargeMinWaves waves of 128x128 tiles.
// Their config list is cut to the shapes that can win (configs.cpp: kLarge*, kFp8*), about a dozen.
constexpr int64_t kLargeMinDim = 512;
constexpr int64_t kLargeMinWaves = 2;
bool large_problem(const GemmProblem& p, int num_sms);
// Whether gemm_tiled's main-loop A/B offsets fit in i32 (the "i32_offsets" compile parameter).
bool main_loop_fits_i32(const Config& c, const GemmProblem& p);

// Problem-level rules (no config): the kernels take i32 sizes and leading dimensions.
Verdict problem_verdict(const GemmProblem& p);
// Shared memory the config needs, estimated (pipeline stages of A and B tiles; persistent
// configs also stage a D tile).
int64_t shared_estimate(const Config& c, const GemmProblem& p);
// Whether the config can run `p` (ranges, shared memory, TMA and layout rules, split-k
// workspace); the reason when not. Used for ids from the cache too.
Verdict check(const Config& c, const GemmProblem& p, int num_sms);
// The pruned candidate configs for `p`, in a stable order (tiled, persistent, split-k).
std::vector<Config> configs_for(const GemmProblem& p, int num_sms);

// Compile parameters of the GEMM kernel ("gemm_tiled" / "gemm_persistent") and of the split-k
// reduce; both are canonical JSON objects (sorted keys), part of the artifact key.
nlohmann::json gemm_params(const Config& c, const GemmProblem& p, int num_sms);
nlohmann::json reduce_params(const Config& c, const GemmProblem& p);

struct Grid {
  unsigned x = 1, y = 1, z = 1;
  int64_t programs() const { return int64_t(x) * y * z; }
};
Grid gemm_grid(const Config& c, const GemmProblem& p, int num_sms);
Grid reduce_grid(const GemmProblem& p);
// Bytes of the fp32 split-k workspace [split_k, m, n] (0 without split-k).
int64_t workspace_bytes(const Config& c, const GemmProblem& p);

}  // namespace gemmtune::triton
