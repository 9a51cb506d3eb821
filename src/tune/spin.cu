#include "tune/spin.hpp"

#include <cstdint>

#include "core/cuda.hpp"

namespace gemmtune {

namespace {
__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
}  // namespace

void gpu_spin(double us, cudaStream_t s) {
  if (us <= 0) return;
  spin_kernel<<<1, 1, 0, s>>>(uint64_t(us * 1000.0));
  GT_CUDA(cudaGetLastError());
}

}  // namespace gemmtune
