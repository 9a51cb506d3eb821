// gemmtune: the softmax problem descriptor.
//
//   SoftmaxKernel k = engine.select(gemmtune::SoftmaxProblem::make(rows, cols));
//   k.run({.x = x, .y = y}, stream);
//
//   y[r, c] = exp(s * x[r, c] - M_r) / sum_c' exp(s * x[r, c'] - M_r),   M_r = max_c s * x[r, c]
//
// Softmax over the last dimension of a [rows, cols] row-major tensor x whose rows are `ld`
// elements apart (0 means packed, ld = cols); y has x's shape and the same ld (in elements of
// its own dtype). s = scale is applied before the softmax (as attention uses); s * x is formed
// in fp32 (every kernel computes in fp32). Special values behave as torch.softmax: a row with a
// NaN, with a +Inf, or with every element -Inf is NaN throughout (tests/support/host_softmax.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

struct SoftmaxProblem {
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;  // elements between consecutive rows of x and of y; 0 = packed (cols)
  DType in = DType::bf16;
  DType out = DType::bf16;
  float scale = 1.0f;  // run-time argument: not part of canonical() / key()

  static SoftmaxProblem make(int64_t rows, int64_t cols, DType in = DType::bf16) {
    SoftmaxProblem p;
    p.rows = rows, p.cols = cols, p.in = in, p.out = in;
    return p;
  }

  int64_t row_stride() const { return ld ? ld : cols; }  // resolved ld
  // Elements the x and y buffers must hold (rows * ld: the last row's padding included).
  int64_t elems() const { return rows * row_stride(); }
  // Fewest bytes a kernel must move: x read once, y written once.
  double min_bytes() const;

  // Throws Error naming the first bad field and why ("softmax.cols: must be >= 1 (got 0)").
  void validate() const;

  // Human-readable one-liner, e.g. "1000x4096 bf16->fp32 ld=4104 scale=0.125".
  std::string str() const;
  // Canonical text of everything that can change which kernel is best or correct: shape, the
  // resolved ld, dtypes. Starts "softmax1;" (bump it if the meaning of a field changes).
  std::string canonical() const;
  // 16 hex digits of stable_hash(canonical()): same across runs and builds.
  std::string key() const;
};

// Device pointers for one softmax run: x and y hold rows * row_stride() elements of the
// problem's dtypes, 16-byte aligned; the padding between cols and ld is neither read nor written.
struct SoftmaxArgs {
  const void* x = nullptr;
  void* y = nullptr;
};

// The op tag of softmax (see KernelFor in gemmtune/kernel.hpp).
struct SoftmaxOp {
  using Problem = SoftmaxProblem;
  using Args = SoftmaxArgs;
  static constexpr const char* name = "softmax";
};

// A selected softmax kernel; run() applies the problem's scale.
using SoftmaxKernel = KernelFor<SoftmaxOp>;
extern template class KernelFor<SoftmaxOp>;

// Parses "ROWSxCOLS" (e.g. "1000x4096"); throws Error naming `field`.
void parse_rows_cols(std::string_view text, int64_t& rows, int64_t& cols, std::string_view field = "shape");

}  // namespace gemmtune
