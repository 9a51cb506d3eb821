// Our own CUDA softmax kernels (the "native" softmax backend), their config space and launcher.
//
//   warp    one warp per row, the row in registers (32 * elems columns at most); a block holds
//           threads / 32 rows. Reads x once.
//   block   one block per row, the row in registers (threads * elems columns at most: 16384, with
//           elems 32 at 512 threads, the register budget). Reads x
//           once.
//   online  one block per row, any cols: one pass keeps a running (max, sum) per thread, merged
//           across the block; a second pass re-reads the row and writes y. Reads x twice.
// Every kind loads `vec` consecutive elements per access (16 bytes at most: one vector load
// when vec > 1); vec > 1 needs ld % vec == 0 (configs only offer it then) and x, y aligned to
// vec elements of their dtype (cudaMalloc's 256 bytes suffice; the launcher checks).
// All compute in fp32 with torch.softmax's special values (see softmax.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"

namespace gemmtune::native {

enum class SoftmaxKind : uint8_t { warp, block, online };
const char* to_string(SoftmaxKind);

struct NativeSoftmaxConfig {
  SoftmaxKind kind = SoftmaxKind::online;
  int vec = 1;        // elements per access: 1, or 16 bytes of the input dtype (4 fp32, 8 bf16/fp16)
  int elems = 0;      // elements per thread kept in registers (warp, block); 0 for online
  int threads = 256;  // threads per block (warp: rows per block = threads / 32)

  int rows_per_block() const { return kind == SoftmaxKind::warp ? threads / 32 : 1; }
  // Longest row this config handles (-1: any).
  int64_t max_cols() const;
  // Stable name, e.g. "warp_v8_e32_t256", "online_v4_t1024".
  std::string name() const;
  bool operator==(const NativeSoftmaxConfig&) const = default;
};

// Every config that can run `p` (validated first), in a fixed order: warp, block, online.
std::vector<NativeSoftmaxConfig> native_softmax_configs(const SoftmaxProblem& p);

// y = softmax(p.scale * x) for device pointers x (p.in), y (p.out), both rows * ld elements;
// padding between cols and ld is neither read nor written. Enqueued on `s`; throws Error when
// the config cannot run p (too-long rows, misaligned vectors) or on a launch failure.
void run_native_softmax(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p, const void* in, void* out,
                        cudaStream_t s);

}  // namespace gemmtune::native
