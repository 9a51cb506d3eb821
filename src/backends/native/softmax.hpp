// Our own CUDA softmax kernels (the "native" softmax backend), their config space and launcher.
//
//   warp     one warp per row, the row in registers (32 * elems columns at most); a block holds
//            threads / 32 rows. Reads x once.
//   block    one block per row, the row in registers (threads * elems columns at most). Reads x
//            once. (cluster with one CTA.)
//   cluster  a thread-block cluster of `cluster` CTAs per row (2 .. 16; 16 is Hopper's
//            non-portable size), each CTA holding a slice of threads * elems columns in
//            registers; the CTAs merge their (max, sum) through distributed shared memory. Reads
//            x once: the long-row kernel (64K-256K columns).
//   smem     like cluster (1 to 16 CTAs per row), but each CTA stages its slice of x in shared
//            memory with cp.async (16-byte packs): the whole slice is in flight at once and
//            several CTAs share an SM; exp is computed twice (sum, then write). Reads x once.
//   online   one block per row, any cols: one pass keeps a running (max, sum) per thread,
//            merged across the block; a second pass re-reads the row and writes y. Reads x
//            twice (the fallback for rows no config above holds).
// Every kind loads `vec` consecutive elements per access (16 bytes at most: one vector load
// when vec > 1); vec > 1 needs ld % vec == 0 (configs only offer it then) and x, y aligned to
// vec elements of their dtype (cudaMalloc's 256 bytes suffice; the launcher checks).
// All compute in fp32 (exp as exp2 of (s x - M) * log2 e) with torch.softmax's special values
// (see softmax.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"

namespace gemmtune::native {

// Bump when a kernel's code changes what it computes or how fast: keys the tuning cache.
inline constexpr const char* kNativeSoftmaxVersion = "3";

enum class SoftmaxKind : uint8_t { warp, block, cluster, smem, online };
const char* to_string(SoftmaxKind);

struct NativeSoftmaxConfig {
  SoftmaxKind kind = SoftmaxKind::online;
  int vec = 1;        // elements per access: 1, or 16 bytes of the input dtype (4 fp32, 8 bf16/fp16)
  int elems = 0;      // elements per thread kept in registers (warp, block, cluster); 0 for online
  int threads = 256;  // threads per block (warp: rows per block = threads / 32)
  int cluster = 1;    // CTAs per row (cluster: 2, 4, 8 or 16; smem: 1 to 16; else 1)

  int rows_per_block() const { return kind == SoftmaxKind::warp ? threads / 32 : 1; }
  // Longest row this config handles (-1: any).
  int64_t max_cols() const;
  // Stable name (also the candidate id), e.g. "warp_v8_e32_t256", "block_v8_e16_t512",
  // "cluster_v8_e32_t512_c8", "smem_v8_t512_c4", "online_v4_t1024".
  std::string name() const;
  // The config named `name`; throws Error naming the bad part.
  static NativeSoftmaxConfig parse(const std::string& name);
  // Empty when this config can run p (row length, vector alignment of ld, sizes), else why not.
  std::string cannot_run(const SoftmaxProblem& p) const;
  bool operator==(const NativeSoftmaxConfig&) const = default;
};

// Every config worth timing for `p` (validated first), in a fixed order: warp, block, cluster,
// smem, online. num_sms (0: unknown) drops cluster configs that would leave most SMs idle.
std::vector<NativeSoftmaxConfig> native_softmax_configs(const SoftmaxProblem& p, int num_sms = 0);

// y = softmax(p.scale * x) for device pointers x (p.in), y (p.out), both rows * ld elements;
// padding between cols and ld is neither read nor written. Enqueued on `s` with
// cudaLaunchKernelEx (its own result is checked: an earlier unrelated error is not blamed on
// this launch); throws Error when the config cannot run p (too-long rows, misaligned vectors)
// or on a launch failure (naming the config and its launch), the runtime's error then cleared.
void run_native_softmax(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p, const void* in, void* out,
                        cudaStream_t s);

// ---- launch parameters -------------------------------------------------------------------

// sm_90 (H100 / H200) per-block shared memory a kernel may opt in to
// (cudaDevAttrMaxSharedMemoryPerBlockOptin = 227 KiB); static + dynamic must fit it.
inline constexpr int64_t kSm90SmemPerBlockOptin = 232448;
// Upper bound of any native kernel's static shared memory (reduction scratch: 144-256 bytes by
// ptxas -v); the dynamic shared memory the smem kind opts in to is what is left of 227 KiB.
inline constexpr int64_t kNativeStaticSmemBound = 1024;
inline constexpr int64_t kNativeSmemDynamicOptIn = kSm90SmemPerBlockOptin - kNativeStaticSmemBound;

// The launch a config makes for a problem (computed on the host; the same numbers the
// launcher passes to cudaLaunchKernelEx).
struct NativeSoftmaxLaunch {
  int64_t grid = 0;          // blocks (x); a multiple of cluster
  int threads = 0;           // threads per block
  int64_t dynamic_smem = 0;  // bytes of dynamic shared memory per block (smem kind only)
  int cluster = 1;           // CTAs per cluster (1: launched without a cluster attribute)
  int launch_bound = 0;      // the kernel's __launch_bounds__ (max threads per block it is compiled for)
  std::string str() const;   // "grid 40 x 128 threads, 0 B dynamic smem, cluster 1"
};
// The launch of `cfg` for `p`; throws Error when the config cannot run p (cannot_run).
NativeSoftmaxLaunch native_softmax_launch(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p);

// Device limits a launch must respect; the defaults are sm_90's (H100 / H200).
struct NativeSoftmaxDeviceLimits {
  int max_threads_per_block = 1024;
  int64_t max_grid_x = 0x7fffffff;
  int64_t smem_per_block_optin = kSm90SmemPerBlockOptin;  // static + dynamic
  int max_cluster = 16;            // with cudaFuncAttributeNonPortableClusterSizeAllowed (8 portable)
  int64_t regs_per_block = 65536;  // registers per thread x threads
};
// Empty when launch `l` of a kernel with `static_smem` bytes of static shared memory and
// `regs_per_thread` registers fits `lim`, else why not (names the limit). Host-side: the device
// check (below) calls it with the kernel's and the device's real numbers.
std::string native_softmax_launch_violation(const NativeSoftmaxLaunch& l, const NativeSoftmaxDeviceLimits& lim,
                                            int64_t static_smem, int regs_per_thread);

// Empty when `cfg` can be launched for `p` on the current device, else why not: cannot_run,
// then the kernel instance's attributes (cudaFuncGetAttributes: registers, static shared
// memory, max threads) against the device's limits (native_softmax_launch_violation), the
// function attributes the launch needs (dynamic shared memory opt-in, non-portable cluster
// size), and residency (cudaOccupancyMaxActiveClusters / ...BlocksPerMultiprocessor >= 1; such
// reasons start with "cannot be resident"). Never throws for a CUDA error: returns it (cleared,
// so that no later cudaGetLastError reports it). The backend drops such candidates before the race.
std::string native_softmax_device_check(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p);

}  // namespace gemmtune::native
