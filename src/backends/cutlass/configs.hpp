// The CUTLASS backend's config space (docs/cutlass.md), its pruning per problem, and the
// problem-level rules of our kernel template (kernel/sm90_gemm.cuh). Host-only: no CUDA calls.
//
// Space: CTA tile M in {64, 128, 256}, N in {64, 128, 192, 256}, K spanning 128 bytes (64 for 16-bit inputs, 128 for
// fp8); cluster 1x1, 2x1, 1x2; cooperative or ping-pong warp specialization; swap-AB (the kernel
// computes D^T) for problems with small m. Tiles, clusters and schedules are in KERNEL terms:
// with swap-AB the kernel's M is the problem's n.
//
// A config's id is compact and canonical: "co128x128x64c2x1" (cooperative, tile 128x128x64,
// cluster 2x1), "pp64x128x64c1x1s" (ping-pong, swap-AB), "co128x192x128c1x2rm8" (the persistent
// scheduler's tiles in bands of 8 along M). Config::parse(c.id()) == c.
//
// The tile order (raster along M or N, swizzle band 1-8) is a run-time argument of the kernel
// (GtCutlassArgs::raster / swizzle): configs that differ only in it share one compiled instance,
// so ordering variants cost no compile; they matter where the operands outgrow L2 (e.g. a
// 57344-wide weight at m = 8192), where the band keeps a wave's A rows and B columns resident.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::cutlass_backend {

enum class Schedule : uint8_t { cooperative, pingpong };
// The persistent scheduler's tile order (CUTLASS's RasterOrderOptions, kernel terms): its
// heuristic (along M when N has more tiles than M, else along N; no swizzle), or along M / N.
enum class Raster : uint8_t { heuristic = 0, along_m = 1, along_n = 2 };

struct Config {
  int tile_m = 128, tile_n = 128, tile_k = 64;  // kernel terms
  int cluster_m = 1, cluster_n = 1;
  Schedule schedule = Schedule::cooperative;
  bool swap_ab = false;
  // Run time, not compiled: the tile order (swizzle: tiles per band, 1, 2, 4 or 8; 1 with the
  // heuristic raster).
  Raster raster = Raster::heuristic;
  int swizzle = 1;

  // The compiled part: this config with the default tile order (what InstanceSpec keeps).
  Config compiled() const;
  std::string id() const;
  std::string name() const;  // "cooperative 128x128x64 cluster 2x1", "... swap-AB"
  // Throws Error naming the id when it is not the canonical id of a config in range.
  static Config parse(std::string_view id);
  bool operator==(const Config&) const = default;
};

constexpr int64_t kMaxSharedBytes = 232448;  // 227 KiB: sm_90's opt-in shared memory per block
constexpr int kMinStages = 2;                // fewer mainloop stages than this: not a candidate

// Problem-level rules (no config): dtypes, layouts, TMA's 16-byte rule on leading dimensions,
// the i32 sizes CUTLASS's problem shape takes.
Verdict problem_verdict(const GemmProblem& p);
// Whether the config can run `p` on a device with compute capability `dev` (the template's
// static_asserts, restated; shared memory; fp8's tile K); the reason when not. Used for ids from
// the cache too.
Verdict check(const Config& c, const GemmProblem& p);
// Bytes of one mainloop stage (A and B tiles) and the epilogue's shared memory, estimated.
int64_t stage_bytes(const Config& c, const GemmProblem& p);
int64_t epilogue_bytes(const Config& c, const GemmProblem& p);
// Mainloop stages that fit next to the epilogue (what StageCountAutoCarveout picks).
int stages(const Config& c, const GemmProblem& p);

// Every config that passes check() for `p`, before ranking, in a stable order.
std::vector<Config> valid_configs(const GemmProblem& p);
// The pruned, ranked candidates for `p` on `sm_count` SMs: configs whose tiles are far larger
// than the problem dropped, the rest ordered by a wave-quantization cost model, at most
// `max_configs` kept (both schedules and swap-AB, where valid, are kept represented).
std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs = 16);
// The same, over only the configs `admit` accepts (applied after pruning, before the cap). The
// load-only backend admits the configs whose artifact the store holds, so a pack instance that
// can run `p` is offered even where the unrestricted ranking would cap it away (a pack built for
// other shapes of the instance class). When `admit` accepts every config of the unrestricted
// result, the result is that result.
std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs,
                                const std::function<bool(const Config&)>& admit);
// Estimated relative cost (lower is better) that configs_for ranks by.
double cost_estimate(const Config& c, const GemmProblem& p, int sm_count);
// `ranked` (configs_for's result, after any compile budget) with tile-order variants added after
// it: for problems whose operands outgrow L2 (kLargeOperandBytes) and that span at least 8 tiles
// each way, the first kOrderedConfigs configs again in bands of 8 along M and along N. Variants
// share their config's instance (no compile).
constexpr int64_t kLargeOperandBytes = int64_t(48) << 20;
constexpr int kOrderedConfigs = 3;
std::vector<Config> with_tile_orders(std::vector<Config> ranked, const GemmProblem& p);
// The two tile-order variants the GEMM and grouped candidates add: `c` in bands of 8 along M,
// then along N.
std::array<Config, 2> banded_tile_orders(const Config& c);
// Whether `c`'s tile order is one the kernels take (swizzle 1, 2, 4 or 8; 1 with the heuristic).
Verdict tile_order_verdict(const Config& c);

// The kernel template's parameters for (config, problem): everything an instance bakes in.
// alpha, beta, sizes and leading dimensions stay run-time arguments, so one instance serves
// every shape with the same dtypes, layouts and epilogue.
struct InstanceSpec {
  DType a = DType::bf16, b = DType::bf16, d = DType::bf16;
  bool a_row = true, b_row = false, d_row = true;
  bool has_c = false, bias = false;
  Activation act = Activation::none;
  ScaleMode scale = ScaleMode::none;
  Config config;  // compiled part only (Config::compiled)

  static InstanceSpec of(const Config& c, const GemmProblem& p);
  // Canonical one-line text ("a=bf16 b=bf16 d=bf16 layout=rcr c=0 bias=1 act=gelu_tanh
  // scale=none cfg=co128x128x64c1x1"): the config string the .so reports, part of its key.
  std::string text() const;
  // The generated translation unit: a few lines instantiating kernel/sm90_gemm.cuh.
  std::string source() const;
};


}  // namespace gemmtune::cutlass_backend
