// In-place SiLU over D, the pass that follows a cuBLASLt matmul for silu problems.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backends/cublaslt/silu.hpp"
#include "core/convert.cuh"
#include "core/cuda.hpp"

namespace gemmtune::lt {
namespace {

// x * sigmoid(x); exp overflow for very negative x gives x / inf = -0, the right limit.
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

template <class T>
__device__ __forceinline__ void silu_at(T* p) { *p = from_float<T>(silu(to_float(*p))); }

// D seen as `lines` lines of `len` contiguous elements, the lines `ld` elements apart (rows of a
// row-major D, columns of a column-major one). Each grid-stride step handles VEC consecutive
// elements of one line: one 16-byte access when VEC > 1 (the launcher checks alignment).
template <class T, int VEC>
__global__ void silu_kernel(T* d, int64_t lines, int64_t len, int64_t ld) {
  const int64_t per_line = len / VEC;
  const int64_t total = lines * per_line;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t line = i / per_line;
    T* p = d + line * ld + (i - line * per_line) * VEC;
    if constexpr (VEC == 1) {
      silu_at(p);
    } else {
      uint4 raw = *reinterpret_cast<const uint4*>(p);
      T* v = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int j = 0; j < VEC; ++j) silu_at(v + j);
      *reinterpret_cast<uint4*>(p) = raw;
    }
  }
}

template <class T>
void launch(void* d, int64_t lines, int64_t len, int64_t ld, cudaStream_t s) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = reinterpret_cast<uintptr_t>(d) % 16 == 0 && len % kVec == 0 && ld % kVec == 0;
  const int64_t work = lines * (vec ? len / kVec : len);
  constexpr int kThreads = 256;
  // Enough blocks to fill an H200 several times over; the grid-stride loop covers the rest.
  const unsigned blocks = unsigned(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, 8192));
  if (vec)
    silu_kernel<T, kVec><<<blocks, kThreads, 0, s>>>(static_cast<T*>(d), lines, len, ld);
  else
    silu_kernel<T, 1><<<blocks, kThreads, 0, s>>>(static_cast<T*>(d), lines, len, ld);
  GT_CUDA(cudaGetLastError());
}

}  // namespace

void silu_inplace(void* d, DType dtype, Layout layout, int64_t m, int64_t n, int64_t ld, cudaStream_t s) {
  if (m <= 0 || n <= 0) return;
  const int64_t lines = layout == Layout::row ? m : n;
  const int64_t len = layout == Layout::row ? n : m;
  switch (dtype) {
    case DType::bf16: return launch<__nv_bfloat16>(d, lines, len, ld, s);
    case DType::fp16: return launch<__half>(d, lines, len, ld, s);
    case DType::fp32: return launch<float>(d, lines, len, ld, s);
    default: GT_THROW(std::string("cublaslt silu pass: D dtype ") + to_string(dtype) + " is not supported");
  }
}

}  // namespace gemmtune::lt
