// Our own CUDA GEMM kernels for the memory-bound regime (decode: m = tokens = 1 .. 16): the
// "native" GEMM backend's config space and launcher.
//
// D[m, n] = act(alpha * sa * sb * (A[m, k] @ W[n, k]^T) + beta * C[m, n] + bias[n]) for the
// nn.Linear layout (A row-major, B = W^T column-major, C and D row-major), A and W both bf16,
// both fp16 or both e4m3; D (and C, bias) bf16, fp16 or fp32.
//
// The kernel is a weight stream with a little math on top (swap-AB): a warp owns 16 * rows
// weight rows (W's n) and all m tokens, so W is the MMA's A operand (m16) and the tokens its
// B operand (n8 tiles, `tiles` of them: m <= 8 * tiles). Each thread loads 16 contiguous bytes
// of a W row (and of each token's activation row) per 64-byte chunk of k, straight into
// registers, no shared memory: the order of k within a dot product is free, so the chunk's
// physical bytes are assigned to the mma fragments' k slots by one fixed permutation used for
// both operands (see decode_gemm.cu). W is read once, with an L2 evict-first policy, the next
// batch of chunks in flight while the current one is multiplied (mma.sync m16n8k16 for
// bf16/fp16; e4m3 widened to fp16 in registers first; fp32 accumulators).
//
// k is split `warps_k` ways inside a CTA and `cluster` ways across the CTAs of a thread-block
// cluster; the partial sums meet in shared memory and, across the cluster, through distributed
// shared memory, summed in a fixed order (deterministic: no atomics), each CTA of the cluster
// finishing a slice of the tile's outputs with the epilogue. One launch, no workspace.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::native {

// Bump when a kernel's code changes what it computes or how fast: keys the tuning cache.
inline constexpr const char* kNativeGemmVersion = "1";

// The largest m the kernels take (8 * the largest `tiles`). Against cuBLASLt's best candidate,
// in geomean over the suite's decode problems on the H200: m = 1 0.97x (bf16) and 1.01x (e4m3),
// m = 16 1.02x and 1.14x, m = 64 1.9x and 2.6x (every token tile re-reads the activations
// from L2): docs/native-gemm.md.
inline constexpr int64_t kDecodeMaxM = 16;

struct DecodeConfig {
  int tiles = 1;    // n8 token tiles per warp: 1 or 2 (m <= 8 * tiles)
  int rows = 1;     // m16 weight-row tiles per warp: 1 or 2 (16 or 32 rows)
  int warps_n = 4;  // warps of a CTA side by side over rows: CTA rows = 16 * rows * warps_n
  int warps_k = 1;  // warps of a CTA splitting k (1, 2, 4, 8); warps_n * warps_k is 4 or 8
  int cluster = 1;  // CTAs of a cluster splitting k further (1, 2, 4, 8)

  int threads() const { return 32 * warps_n * warps_k; }
  int cta_rows() const { return 16 * rows * warps_n; }
  int k_splits() const { return warps_k * cluster; }
  // 64-byte k chunks a warp loads per batch (the bytes in flight: rows * chunks_per_batch KiB per warp).
  int chunks_per_batch() const { return rows == 1 ? 4 : 2; }
  // Stable name (also the candidate id), e.g. "decode_t1_r2_n4_k2_c4".
  std::string name() const;
  // The config named `name`; throws Error naming the bad part.
  static DecodeConfig parse(const std::string& name);
  // Empty when this config exists (a compiled kernel) and can run p, else why not.
  std::string cannot_run(const GemmProblem& p) const;
  bool operator==(const DecodeConfig&) const = default;
};

// Empty when the native GEMM kernels can run p at all (layout, dtypes, m, alignment of k and
// the leading dimensions), else why not, naming the field.
std::string decode_unsupported(const GemmProblem& p);

// The configs worth timing for p on a GPU with `sms` SMs, at most `max_configs` (0: 12), in
// a fixed order (the likeliest first); empty when decode_unsupported(p) is not.
std::vector<DecodeConfig> decode_configs(const GemmProblem& p, int sms, int max_configs = 0);

// The launch a config makes for p: grid (x, a multiple of cluster), threads, dynamic shared memory.
struct DecodeLaunch {
  int64_t grid = 0;
  int threads = 0;
  int64_t smem = 0;
  int cluster = 1;
};
DecodeLaunch decode_launch(const DecodeConfig& cfg, const GemmProblem& p);

// Empty when cfg can be launched for p on the current device (cannot_run, the kernel's
// attributes, dynamic shared memory opt-in, cluster residency), else why not; sets the
// function attributes the launch needs, so it must precede run_decode_gemm on each device.
// Never throws for a CUDA error: returns it (cleared).
std::string decode_device_check(const DecodeConfig& cfg, const GemmProblem& p);

// Enqueues D on `s` (cudaLaunchKernelEx, its own result checked). Pointers must be 16-byte
// aligned (A, W, and C, D, bias to their element size); throws Error naming the pointer, or
// the config and launch on a launch failure (the runtime's error then cleared). overlap: a
// programmatic dependent launch (RunOptions::overlap_previous): the first batch of weights is
// read before griddepcontrol.wait, everything else after it. Every launch lets the next kernel
// on the stream launch from its start (griddepcontrol.launch_dependents first).
void run_decode_gemm(const DecodeConfig& cfg, const GemmProblem& p, const GemmArgs& a, cudaStream_t s,
                     bool overlap = false);

}  // namespace gemmtune::native
