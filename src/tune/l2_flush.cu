#include "tune/l2_flush.hpp"

#include <algorithm>

namespace gemmtune {

namespace {
// XOR of n 16-byte words; stored only if it equals a value a zero-filled buffer never gives.
__global__ void read_all(const uint4* p, int64_t n, uint4* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) *sink = acc;
}
}  // namespace

L2Flush::L2Flush(int64_t l2_bytes, cudaStream_t s)
    : buf_(2 * size_t(std::max<int64_t>(l2_bytes, int64_t(1) << 20))), sink_(sizeof(uint4)) {
  GT_CUDA(cudaMemsetAsync(buf_.get(), 0, buf_.bytes(), s));
}

void L2Flush::run(cudaStream_t s) const {
  read_all<<<1024, 256, 0, s>>>(static_cast<const uint4*>(buf_.get()), int64_t(buf_.bytes() / sizeof(uint4)),
                                static_cast<uint4*>(sink_.get()));
  GT_CUDA(cudaGetLastError());
}

}  // namespace gemmtune
