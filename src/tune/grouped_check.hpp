// Grouped GEMM operands (random inputs, a split of the rows among the groups, poisoned outputs)
// and their per-group check against the GPU reference of the dense GEMM (tune/verify.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda.hpp"
#include "gemmtune/grouped.hpp"
#include "tune/verify.hpp"

namespace gemmtune {

// The rows of each of `groups` groups, summing to groups * per_group. skew 0: equal; skew s > 0:
// Zipf(s) weights (group i of the sorted order gets ~ (i + 1)^-s) in an order drawn from `seed`.
std::vector<int64_t> grouped_split(int64_t groups, int64_t per_group, double skew, uint64_t seed);
// A split for verification: Zipf(1) sizes made ragged (sizes of every residue mod 16, one group
// empty when there are at least 4), summing to about groups * per_group.
std::vector<int64_t> grouped_ragged_split(int64_t groups, int64_t per_group, uint64_t seed);

// The splits a tune uses: the two it times (balanced; Zipf(p.skew) sizes) and the one it verifies on
// (grouped_ragged_split).
enum class GroupedSplit : uint8_t { balanced, skewed, ragged };

// One set of device operands for p at its rows bucket (p.rows_bucket() rows per group on
// average), split as given. A's rows that no group owns hold NaN (masked padding) or random
// values (contiguous tail); D is poisoned (NaN) everywhere. Inputs scaled as OperandSet's.
class GroupedOperands {
 public:
  GroupedOperands(const GroupedGemmProblem& p, uint64_t seed, cudaStream_t s, GroupedSplit split);
  GroupedOperands(const GroupedGemmProblem& p, std::vector<int64_t> counts, uint64_t seed, cudaStream_t s);

  GroupedGemmArgs args() const;
  void poison_outputs(cudaStream_t s) const;
  size_t input_bytes() const;   // A, B, bias, scales, rows
  size_t output_bytes() const;  // D
  const GroupedGemmProblem& problem() const { return p_; }
  const std::vector<int64_t>& counts() const { return counts_; }
  int64_t first_row(size_t g) const { return first_[g]; }  // of group g in A and D
  int64_t capacity() const { return capacity_; }
  int64_t total_rows() const { return total_rows_; }        // rows A and D hold
  const unsigned char* owned_rows() const { return owned_.as<const unsigned char>(); }  // [total_rows] 0/1, device
  // Block scales: group g's slice of A's scales as its dense problem takes them, [kb, m_g] (device).
  const float* group_scale_a(size_t g) const { return sa_groups_.as<const float>() + sa_group_off_.at(g); }

 private:
  void init(uint64_t seed, cudaStream_t s);

  GroupedGemmProblem p_;
  std::vector<int64_t> counts_, first_;
  int64_t capacity_ = 0, total_rows_ = 0;
  DeviceBuffer a_, b_, d_, rows_, bias_, sa_, sb_, owned_, sa_groups_;
  std::vector<int64_t> sa_group_off_;  // block scales: group g's first element in sa_groups_
};

// The GPU reference of every group (reference_gemm of the group's dense problem), once; check()
// compares each group's rows of D (compare(): the dense tolerances) and requires every row no
// group owns to still hold NaN.
class GroupedChecker {
 public:
  GroupedChecker(const GroupedGemmProblem& p, const GroupedOperands& ops, cudaStream_t s);
  CheckResult check(cudaStream_t s) const;

  // The dense problem and arguments of group g (m = its rows), as the reference computes it.
  static GemmProblem group_problem(const GroupedGemmProblem& p, int64_t m);
  static GemmArgs group_args(const GroupedGemmProblem& p, const GroupedOperands& ops, size_t g, const void* d);

 private:
  GroupedGemmProblem p_;
  const GroupedOperands& ops_;
  DeviceBuffer ref_;
};

}  // namespace gemmtune
