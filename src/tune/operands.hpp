// Device operands for tuning and verification: random inputs, poisoned outputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/cuda.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

// Fills n elements of `dtype` at `ptr` with uniform values in [-range, range) from a
// counter-based hash of (seed, index): deterministic, never constant, never zero-filled.
void fill_random(void* ptr, DType dtype, int64_t n, uint64_t seed, float range, cudaStream_t s);
// Fills n elements with NaN (fp8 e4m3: 0x7f, e5m2: 0x7f, bf16/fp16/fp32: quiet NaN).
void poison(void* ptr, DType dtype, int64_t n, cudaStream_t s);

// One set of operand buffers for a problem, filled with random data; D poisoned and followed by
// a guard of kGuardBytes holding kGuardByte, so that a write just past D's end is seen.
// Inputs are scaled so that |D| stays O(1) for any k (range ~ 1/sqrt(sqrt(k))) and fp8
// scales are random positive values around 1.
class OperandSet {
 public:
  OperandSet(const GemmProblem& p, uint64_t seed, cudaStream_t s);
  GemmArgs args() const;
  static constexpr size_t kGuardBytes = 64 << 10;
  static constexpr unsigned char kGuardByte = 0xa5;
  void poison_d(cudaStream_t s) const;  // D NaN, the guard reset
  // "" when the guard after D is intact, else what was overwritten ("wrote past the end of D:
  // ..."). Waits for `s`.
  std::string guard_violation(cudaStream_t s) const;
  void poison_outputs(cudaStream_t s) const { poison_d(s); }  // the tune path's generic name
  const GemmProblem& problem() const { return p_; }
  // Bytes of the inputs (A, B, C, bias, scales): what rotates through L2.
  size_t input_bytes() const;
  size_t output_bytes() const;  // D

 private:
  GemmProblem p_;
  DeviceBuffer a_, b_, c_, d_, bias_, sa_, sb_;
};

}  // namespace gemmtune
