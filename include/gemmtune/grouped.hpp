// gemmtune: grouped GEMM, as mixture-of-experts layers run it (docs/grouped.md).
//
//   auto p = gemmtune::GroupedGemmProblem::make(/*groups=*/8, /*n=*/14336, /*k=*/4096, /*rows_per_group=*/512);
//   gemmtune::GroupedKernel k = engine.select(p);
//   k.run({.a = x, .b = w, .d = y, .rows = offs, .capacity = x_rows}, stream);
//
// G groups (experts) share n and k. Group g multiplies its rows of A by its weight B[g]:
//
//   D[r, :] = act(alpha * sa * sb * (A[r, :] @ B[g]^T) + bias[g])      for each row r of group g
//
// B is [G, n, k] (each expert's weight in nn.Linear layout, k contiguous); A [rows, k] and D
// [rows, n] are row-major and packed. The rows belong to the groups in one of two layouts, both
// described by int32 arrays on the GPU, read by the kernel (no host sync, the split may change
// every run):
//   contiguous  A is [capacity, k], D [capacity, n]; rows[g] is the END of group g's rows
//               (cumulative, as torch._grouped_mm's offs): group g owns rows rows[g-1] ..
//               rows[g] - 1 (rows[-1] = 0). Rows past rows[G-1] are not written.
//   masked      A is [G, capacity, k], D [G, capacity, n]; rows[g] is group g's count of valid
//               rows (the first rows[g] of its capacity). The other rows are not written.
// The kernels clamp what they read from `rows` to the buffers (ends to [0, capacity], counts to
// [0, capacity]): a bad split gives wrong values, never an access outside A or D.
//
// The cache key holds groups, n, k, dtypes, layout, epilogue and rows_per_group's power-of-two
// bucket (the next power of two): the split, the capacity and the exact rows per group change
// every step and never re-tune. A tune times the candidates at the bucket's rows per group on two
// splits, balanced and Zipf(skew) group sizes in a random order, and ranks them by the mean of the
// two times (skew 0: the balanced split alone), so that a kernel that is fast only on equal groups
// is not picked for a router that sends more tokens to some experts; it verifies every candidate
// on a ragged split (group sizes of every residue, an empty group) against a per-group GPU
// reference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

enum class GroupedLayout : uint8_t { contiguous, masked };
const char* to_string(GroupedLayout);
// "contiguous" or "masked"; throws Error naming `field`.
GroupedLayout parse_grouped_layout(std::string_view text, std::string_view field = "layout");

struct GroupedGemmProblem {
  int64_t groups = 0, n = 0, k = 0;
  int64_t rows_per_group = 0;  // expected mean rows per group (keyed by its power-of-two bucket)
  GroupedLayout layout = GroupedLayout::contiguous;
  DType a = DType::bf16;       // A's and B's dtype: bf16, fp16 or e4m3 (fp8: with scales)
  DType d = DType::bf16;       // bf16, fp16 or fp32
  // fp8 only: tensorwise (sa [1], sb [G]: one scale per expert's weight), rowwise (sa one per
  // row of A, indexed like A's rows: [capacity] contiguous, [G, capacity] masked; sb [G, n]) or
  // block (DeepSeek-V3's; kb = ceil(k / 128), nb = ceil(n / 128): sa one per 1x128 slice of each
  // row of A, [kb, rows of A] with A's rows inner (capacity contiguous, G * capacity masked), as
  // the dense problem's M-major [kb, m]; sb one per 128x128 block of each expert's weight,
  // [G, nb, round_up(kb, 4)], each group's as the dense problem's).
  ScaleMode scale = ScaleMode::none;
  Activation act = Activation::none;
  bool bias = false;           // bias [G, n] in D's dtype
  float alpha = 1.0f;          // run-time argument: not part of canonical() / key()
  double skew = 1.0;           // the tune's skewed split, Zipf(skew) (see above): not part of the key

  static GroupedGemmProblem make(int64_t groups, int64_t n, int64_t k, int64_t rows_per_group,
                                 DType dtype = DType::bf16) {
    GroupedGemmProblem p;
    p.groups = groups, p.n = n, p.k = k, p.rows_per_group = rows_per_group, p.a = dtype;
    p.d = is_fp8(dtype) ? DType::bf16 : dtype;
    p.scale = is_fp8(dtype) ? ScaleMode::rowwise : ScaleMode::none;
    return p;
  }

  // The power of two >= rows_per_group that keys the cache and sets the tune's rows per group.
  int64_t rows_bucket() const;
  // The same problem at its bucket (what a tune times): rows_per_group = rows_bucket().
  GroupedGemmProblem at_bucket() const;

  // Throws Error naming the first bad field and why ("grouped.groups: must be in [1, 1024] (got 0)").
  void validate() const;
  // e.g. "grouped 8x14336x4096 rows/group~512 contiguous bf16->bf16".
  std::string str() const;
  // Canonical text of everything that keys the cache; starts "grouped1;".
  std::string canonical() const;
  std::string key() const;  // 16 hex digits of stable_hash(canonical())
  // Fewest bytes one run at rows_per_group moves (A, B, D once) and its flops, for reports.
  double min_bytes() const;
  double flops() const;
};

// Device pointers for one run (16-byte aligned). Shapes: see above; capacity is the rows of A
// and D (contiguous) or the rows per group of A and D (masked), at least 1.
struct GroupedGemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;        // [G, n, k]
  void* d = nullptr;
  const int32_t* rows = nullptr;  // [G] on the GPU: ends (contiguous) or counts (masked)
  int64_t capacity = 0;
  const void* bias = nullptr;     // [G, n], when problem.bias
  const float* scale_a = nullptr; // fp8: [1] tensorwise, one per row of A rowwise, [kb, rows of A] block
  const float* scale_b = nullptr; // fp8: [G] tensorwise, [G, n] rowwise, [G, nb, round_up(kb, 4)] block
};

// The op tag of grouped GEMMs (see KernelFor in gemmtune/kernel.hpp).
struct GroupedOp {
  using Problem = GroupedGemmProblem;
  using Args = GroupedGemmArgs;
  static constexpr const char* name = "grouped";
};

// A selected grouped GEMM kernel; run() applies the problem's alpha.
using GroupedKernel = KernelFor<GroupedOp>;
extern template class KernelFor<GroupedOp>;

// Parses "GxNxK" (e.g. "8x14336x4096"); throws Error naming `field`.
void parse_groups_n_k(std::string_view text, int64_t& groups, int64_t& n, int64_t& k, std::string_view field = "shape");

}  // namespace gemmtune
