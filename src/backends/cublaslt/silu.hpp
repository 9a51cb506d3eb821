// The silu pass of the cublaslt backend: cuBLASLt has no SiLU epilogue, so a silu problem runs
// the matmul with the bias-only epilogue, then this in-place pass over D.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemmtune/problem.hpp"

namespace gemmtune::lt {

// D[m, n] = silu(D) = D / (1 + exp(-D)) in place, computed in fp32. D is bf16, fp16 or fp32, in
// `layout` with leading dimension ld (elements); elements between rows (row-major) or columns
// (column-major) beyond the matrix are not touched. Enqueued on `s`; throws Error on a launch
// failure or an unsupported dtype.
void silu_inplace(void* d, DType dtype, Layout layout, int64_t m, int64_t n, int64_t ld, cudaStream_t s);

}  // namespace gemmtune::lt
