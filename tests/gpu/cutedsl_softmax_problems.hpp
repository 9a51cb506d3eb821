// The problem matrix of tests/gpu/test_cutedsl_softmax.cpp, shared with the host tests
// (test_cutedsl_softmax.cpp: every entry valid and supported; the CutedslSoftmaxPrecompile tool
// compiles every candidate of every entry into a store for the GPU machine). Header-only, host code.
//
// Row lengths from 1 to 1000000 (one pass up to 524288 = 16 CTAs' registers, with clusters of 16
// from 65536; the cluster re-read kind from 65536; online with one CTA per row past 524288);
// rows capped so that a problem has at most ~1M elements (the float64 host reference and the
// comparison run on the host for every candidate; the longest rows ~2M), at least 7 long rows
// (every special-row kind of the GPU test appears) except the few-row entries; bf16 / fp16 / fp32
// in and out, mixed; packed, padded (ld a multiple of 8) and odd (ld = cols + 1: narrow vectors)
// rows; scale 1 and not. Odd packed widths and odd ld get the virtual-column kinds (rows that do
// not start on a 16-byte pack); the odd widths of the bench's suite (1001, 16385, 50257) with a
// last row whose tail pack runs past the end of x (rows x cols x bytes not a multiple of 16).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"

namespace cutedsl_softmax_test {

struct Named {
  std::string what;
  gemmtune::SoftmaxProblem p;
};

inline constexpr int64_t kCols[] = {1, 31, 33, 1000, 1024, 4097, 16384, 32768, 65536, 131072, 262144, 262147};
inline constexpr int64_t kMaxElems = int64_t(1) << 20;

inline int64_t rows_for(int64_t cols) { return std::clamp<int64_t>(kMaxElems / cols, 7, 1000); }
inline int64_t padded(int64_t cols) { return (cols + 1 + 7) / 8 * 8; }

// Validated entries (SoftmaxProblem::validate throws naming the first bad one).
inline std::vector<Named> problem_matrix() {
  using gemmtune::DType;
  using gemmtune::SoftmaxProblem;
  std::vector<Named> out;
  auto add = [&](const std::string& what, int64_t rows, int64_t cols, DType in, DType o, int64_t ld, float scale) {
    SoftmaxProblem p = SoftmaxProblem::make(rows, cols, in);
    p.out = o, p.ld = ld, p.scale = scale;
    p.validate();
    out.push_back({what, p});
  };
  for (int64_t cols : kCols) {
    const int64_t rows = rows_for(cols);
    for (DType t : {DType::bf16, DType::fp16, DType::fp32}) add("packed", rows, cols, t, t, 0, 1.0f);
    add("padded, scaled", rows, cols, DType::bf16, DType::bf16, padded(cols), 0.37f);
    add("odd ld", rows, cols, DType::fp16, DType::fp16, cols + 1, 1.0f);
  }
  for (int64_t cols : {int64_t(33), int64_t(4097), int64_t(65536)}) {
    const int64_t rows = rows_for(cols);
    add("mixed", rows, cols, DType::bf16, DType::fp32, 0, -1.5f);
    add("mixed", rows, cols, DType::fp32, DType::bf16, padded(cols), 0.5f);
    add("mixed", rows, cols, DType::fp16, DType::fp32, 0, 1.0f);
  }
  // The suite's odd widths (virtual columns: 16-byte packs across row boundaries; fp32 y of a
  // 16-bit x: 32-byte packs of y).
  add("odd width", 999, 1001, DType::fp32, DType::fp32, 0, 1.0f);
  add("odd width", rows_for(16385), 16385, DType::bf16, DType::bf16, 0, 0.37f);
  add("odd width, mixed", rows_for(50257), 50257, DType::fp16, DType::fp32, 0, 1.0f);
  // Few rows (a CTA of several rows holds one), and scales that flip (+Inf <-> -Inf) and zero
  // (0 * Inf = NaN) the special values.
  add("one row", 1, 32768, DType::bf16, DType::bf16, 0, 1.0f);
  add("three rows", 3, 5, DType::bf16, DType::bf16, 0, 1.0f);
  add("negative scale", 12, 4097, DType::fp32, DType::fp32, 0, -0.5f);
  add("zero scale", 12, 1024, DType::bf16, DType::bf16, 0, 0.0f);
  add("negative scale", 12, 131072, DType::bf16, DType::bf16, 0, -0.5f);
  // Long rows (issue 6: clusters of 16, the cluster re-read kind): few rows, odd lengths (tiles
  // and cluster slices partly or wholly past cols), past the one-pass limit, special rows.
  add("few long rows", 2, 262144, DType::bf16, DType::bf16, 0, 1.0f);
  add("few long rows, odd", 3, 131071, DType::bf16, DType::bf16, padded(131071), 0.37f);
  add("long rows, odd ld", 6, 200003, DType::fp16, DType::fp16, 0, -1.5f);  // vec 1, special rows
  add("longest one pass", 2, 524288, DType::bf16, DType::fp32, 0, 1.0f);
  add("past one pass", 3, 524289, DType::fp16, DType::bf16, padded(524289), 1.0f);
  add("past one pass", 2, 1000000, DType::bf16, DType::bf16, 0, 0.5f);
  return out;
}

}  // namespace cutedsl_softmax_test
