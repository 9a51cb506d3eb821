// Device operands: deterministic random inputs and NaN-poisoned outputs.
//
// Values come from a counter-based hash of (seed, element index), so any element can be
// recomputed independently and a fill is identical on every run, device and launch shape.
#include "tune/operands.hpp"

#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

namespace gemmtune {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)); }

// SplitMix64's finalizer: a bijection on 64 bits with good avalanche.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 random bits (exact in fp32) for element `i` of stream `key`.
__device__ inline float uniform01(uint64_t key, int64_t i) {
  const uint64_t h = mix64(key + (uint64_t(i) + 1) * 0x9e3779b97f4a7c15ull);
  return float(h >> 40) * 0x1p-24f;
}

// Stores x converted (round to nearest even; fp8 saturating to the largest finite value).
__device__ inline void store_as(void* base, DType dt, int64_t i, float x) {
  switch (dt) {
    case DType::bf16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(x); break;
    case DType::fp16: static_cast<__half*>(base)[i] = __float2half_rn(x); break;
    case DType::fp32: static_cast<float*>(base)[i] = x; break;
    case DType::e4m3: static_cast<__nv_fp8_storage_t*>(base)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); break;
    case DType::e5m2: static_cast<__nv_fp8_storage_t*>(base)[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); break;
  }
}

// ptr[i] = lo + (hi - lo) * u(i), in dtype.
__global__ void fill_uniform_kernel(void* ptr, DType dt, int64_t n, uint64_t key, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store_as(ptr, dt, i, lo + (hi - lo) * uniform01(key, i));
}

template <class T>
__global__ void fill_bits_kernel(T* ptr, int64_t n, T bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    ptr[i] = bits;
}

void fill_uniform(void* ptr, DType dtype, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n <= 0) return;
  GT_CHECK(ptr != nullptr, "fill: null pointer");
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, s>>>(ptr, dtype, n, mix64(seed ^ 0x6a09e667f3bcc909ull), lo, hi);
  GT_CUDA(cudaGetLastError());
}

// A distinct stream key per (seed, operand).
uint64_t operand_seed(uint64_t seed, uint64_t tag) { return mix64(seed + tag * 0x9e3779b97f4a7c15ull); }

}  // namespace

void fill_random(void* ptr, DType dtype, int64_t n, uint64_t seed, float range, cudaStream_t s) {
  GT_CHECK(range > 0.0f && std::isfinite(range), "fill_random: range must be positive and finite");
  fill_uniform(ptr, dtype, n, seed, -range, range, s);
}

void poison(void* ptr, DType dtype, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  GT_CHECK(ptr != nullptr, "poison: null pointer");
  const int blocks = blocks_for(n);
  switch (dtype) {
    case DType::bf16: fill_bits_kernel<uint16_t><<<blocks, kThreads, 0, s>>>(static_cast<uint16_t*>(ptr), n, 0x7fc0); break;
    case DType::fp16: fill_bits_kernel<uint16_t><<<blocks, kThreads, 0, s>>>(static_cast<uint16_t*>(ptr), n, 0x7e00); break;
    case DType::fp32: fill_bits_kernel<uint32_t><<<blocks, kThreads, 0, s>>>(static_cast<uint32_t*>(ptr), n, 0x7fc00000u); break;
    // e4m3 (fn): S.1111.111 is its only NaN; e5m2: S.11111.11 is a NaN (IEEE-like).
    case DType::e4m3:
    case DType::e5m2: fill_bits_kernel<uint8_t><<<blocks, kThreads, 0, s>>>(static_cast<uint8_t*>(ptr), n, 0x7f); break;
  }
  GT_CUDA(cudaGetLastError());
}

// Magnitudes. With A, B uniform in [-r, r) each product has variance r^4 / 9, so a sum of k
// of them has rms sqrt(k) r^2 / 3: r = k^(-1/4) keeps rms(A @ B) at 1/3 for every k.
// fp8 inputs use r = 2 k^(-1/4) (rms(A @ B) = 4/3, at most ~5.3 after scales in [0.5, 2)^2):
// twice the range keeps fewer values in e4m3's subnormals (< 2^-6) at large k, while D stays
// far inside every output format's range (e4m3 out: 448). C and bias are O(1) like D.
OperandSet::OperandSet(const GemmProblem& p, uint64_t seed, cudaStream_t s) : p_(p) {
  p_.validate();
  const float base = float(1.0 / std::sqrt(std::sqrt(double(std::max<int64_t>(p_.k, 1)))));
  const float ra = is_fp8(p_.a.dtype) ? 2.0f * base : base;
  const float rb = is_fp8(p_.b.dtype) ? 2.0f * base : base;

  a_ = DeviceBuffer(size_t(p_.elems_a()) * size_of(p_.a.dtype));
  fill_random(a_.get(), p_.a.dtype, p_.elems_a(), operand_seed(seed, 1), ra, s);
  b_ = DeviceBuffer(size_t(p_.elems_b()) * size_of(p_.b.dtype));
  fill_random(b_.get(), p_.b.dtype, p_.elems_b(), operand_seed(seed, 2), rb, s);
  if (p_.uses_c()) {  // C has D's dtype, C's layout and ldc
    c_ = DeviceBuffer(size_t(p_.elems_c()) * size_of(p_.d.dtype));
    fill_random(c_.get(), p_.d.dtype, p_.elems_c(), operand_seed(seed, 3), 1.0f, s);
  }
  d_ = DeviceBuffer(output_bytes() + kGuardBytes);
  poison_d(s);
  if (p_.bias) {
    bias_ = DeviceBuffer(size_t(p_.n) * size_of(p_.d.dtype));
    fill_random(bias_.get(), p_.d.dtype, p_.n, operand_seed(seed, 4), 0.5f, s);
  }
  if (int64_t na = p_.scale_a_elems(); na > 0) {
    sa_ = DeviceBuffer(size_t(na) * sizeof(float));
    fill_uniform(sa_.get(), DType::fp32, na, operand_seed(seed, 5), 0.5f, 2.0f, s);
  }
  if (int64_t nb = p_.scale_b_elems(); nb > 0) {
    sb_ = DeviceBuffer(size_t(nb) * sizeof(float));
    fill_uniform(sb_.get(), DType::fp32, nb, operand_seed(seed, 6), 0.5f, 2.0f, s);
  }
}

GemmArgs OperandSet::args() const {
  GemmArgs g;
  g.a = a_.get();
  g.b = b_.get();
  g.c = c_.get();  // null unless p.uses_c()
  g.d = d_.get();
  g.bias = bias_.get();
  g.scale_a = sa_.as<const float>();
  g.scale_b = sb_.as<const float>();
  return g;
}

void OperandSet::poison_d(cudaStream_t s) const {
  poison(d_.get(), p_.d.dtype, p_.elems_d(), s);
  GT_CUDA(cudaMemsetAsync(static_cast<char*>(d_.get()) + output_bytes(), kGuardByte, kGuardBytes, s));
}

std::string OperandSet::guard_violation(cudaStream_t s) const {
  std::vector<unsigned char> guard(kGuardBytes);
  GT_CUDA(cudaMemcpyAsync(guard.data(), static_cast<const char*>(d_.get()) + output_bytes(), kGuardBytes,
                          cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  size_t first = kGuardBytes, count = 0;
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (guard[i] != kGuardByte) first = std::min(first, i), ++count;
  if (count == 0) return {};
  return "wrote past the end of D: " + std::to_string(count) + " of the " + std::to_string(kGuardBytes >> 10) +
         " KiB after it changed, the first at byte " + std::to_string(first);
}

size_t OperandSet::output_bytes() const { return size_t(p_.elems_d()) * size_of(p_.d.dtype); }

size_t OperandSet::input_bytes() const {
  return a_.bytes() + b_.bytes() + c_.bytes() + bias_.bytes() + sa_.bytes() + sb_.bytes();
}

}  // namespace gemmtune
