// Grouped GEMM operands and their per-group check (grouped_check.hpp).
#include "tune/grouped_check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "gemmtune/error.hpp"
#include "tune/operands.hpp"

namespace gemmtune {
namespace {

constexpr int64_t kTailRows = 40;  // contiguous: rows after the last group, never to be written
constexpr int kThreads = 256;

// Counts the elements of D (rows x n, dtype) in rows whose owned[] flag is 0 that are not NaN.
template <class T>
__global__ void count_written_kernel(const T* d, const unsigned char* owned, int64_t rows, int64_t n,
                                     unsigned long long* count) {
  unsigned long long local = 0;
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    if (owned[i / n]) continue;
    float v;
    if constexpr (std::is_same_v<T, float>) v = d[i];
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) v = __bfloat162float(d[i]);
    else v = __half2float(d[i]);
    if (!isnan(v)) ++local;
  }
  if (local) atomicAdd(count, local);
}

std::vector<float> host_uniform(int64_t n, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(size_t(std::max<int64_t>(n, 0)));
  for (float& x : v) x = u(rng);
  return v;
}

DeviceBuffer upload(const void* data, size_t bytes, cudaStream_t s) {
  DeviceBuffer b(bytes);
  if (bytes) GT_CUDA(cudaMemcpyAsync(b.get(), data, bytes, cudaMemcpyHostToDevice, s));
  return b;
}

}  // namespace

std::vector<int64_t> grouped_split(int64_t groups, int64_t per_group, double skew, uint64_t seed) {
  GT_CHECK(groups >= 1 && per_group >= 0 && skew >= 0, "grouped_split: bad arguments");
  std::vector<int64_t> counts(size_t(groups), per_group);
  if (skew == 0) return counts;
  std::vector<double> w(static_cast<size_t>(groups));
  for (int64_t i = 0; i < groups; ++i) w[size_t(i)] = std::pow(double(i + 1), -skew);
  std::mt19937_64 rng(seed);
  std::shuffle(w.begin(), w.end(), rng);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  const int64_t total = groups * per_group;
  int64_t given = 0;
  for (size_t g = 0; g < w.size(); ++g) given += counts[g] = int64_t(std::floor(w[g] / sum * double(total)));
  counts[size_t(std::max_element(w.begin(), w.end()) - w.begin())] += total - given;
  return counts;
}

std::vector<int64_t> grouped_ragged_split(int64_t groups, int64_t per_group, uint64_t seed) {
  std::vector<int64_t> counts = grouped_split(groups, per_group, 1.0, seed);
  // Every residue mod 16 among the sizes (the tiles' ragged ends), one empty group.
  for (size_t g = 0; g < counts.size(); ++g) counts[g] = std::max<int64_t>(counts[g] - int64_t(g % 16), 0) + int64_t(g % 16);
  if (groups >= 4) {
    const size_t smallest = size_t(std::min_element(counts.begin(), counts.end()) - counts.begin());
    const size_t largest = size_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
    counts[largest] += counts[smallest];
    counts[smallest] = 0;
  }
  return counts;
}

GroupedOperands::GroupedOperands(const GroupedGemmProblem& p, uint64_t seed, cudaStream_t s, GroupedSplit split)
    : p_(p) {
  p_.validate();
  counts_ = split == GroupedSplit::ragged ? grouped_ragged_split(p_.groups, p_.rows_bucket(), seed)
                                          : grouped_split(p_.groups, p_.rows_bucket(),
                                                          split == GroupedSplit::skewed ? p_.skew : 0.0, seed);
  init(seed, s);
}

GroupedOperands::GroupedOperands(const GroupedGemmProblem& p, std::vector<int64_t> counts, uint64_t seed, cudaStream_t s)
    : p_(p), counts_(std::move(counts)) {
  p_.validate();
  GT_CHECK(int64_t(counts_.size()) == p_.groups, "GroupedOperands: one count per group");
  for (int64_t c : counts_) GT_CHECK(c >= 0 && c <= 0x7fffffff, "GroupedOperands: counts must be in [0, 2^31)");
  init(seed, s);
}

void GroupedOperands::init(uint64_t seed, cudaStream_t s) {
  const int64_t G = p_.groups, n = p_.n, k = p_.k;
  const bool masked = p_.layout == GroupedLayout::masked;
  const int64_t total = std::accumulate(counts_.begin(), counts_.end(), int64_t(0));
  if (masked) {
    const int64_t widest = *std::max_element(counts_.begin(), counts_.end());
    capacity_ = (widest + 7) / 8 * 8 + 8;  // every group has padding rows
    total_rows_ = G * capacity_;
  } else {
    capacity_ = total_rows_ = total + kTailRows;
  }
  GT_CHECK(total_rows_ <= 0x7fffffff, "GroupedOperands: more than 2^31 rows");
  first_.resize(static_cast<size_t>(G));
  std::vector<int32_t> rows(static_cast<size_t>(G));
  std::vector<unsigned char> owned(static_cast<size_t>(total_rows_), 0);
  int64_t next = 0;
  for (size_t g = 0; g < size_t(G); ++g) {
    first_[g] = masked ? int64_t(g) * capacity_ : next;
    next += counts_[g];
    rows[g] = int32_t(masked ? counts_[g] : next);
    std::fill(owned.begin() + first_[g], owned.begin() + first_[g] + counts_[g], 1);
  }

  // Magnitudes as OperandSet's (tune/operands.cu): rms(A_g @ B_g^T) ~ 1/3 (fp8: 4/3) for any k.
  const float base = float(1.0 / std::sqrt(std::sqrt(double(k))));
  const float range = is_fp8(p_.a) ? 2.0f * base : base;
  const size_t in = size_of(p_.a), out = size_of(p_.d);
  a_ = DeviceBuffer(size_t(total_rows_ * k) * in);
  fill_random(a_.get(), p_.a, total_rows_ * k, seed * 8 + 1, range, s);
  if (masked)  // padding rows hold NaN: a kernel that lets them reach D fails its check
    for (size_t g = 0; g < size_t(G); ++g)
      poison(static_cast<char*>(a_.get()) + size_t((first_[g] + counts_[g]) * k) * in, p_.a,
             (capacity_ - counts_[g]) * k, s);
  b_ = DeviceBuffer(size_t(G * n * k) * in);
  fill_random(b_.get(), p_.a, G * n * k, seed * 8 + 2, range, s);
  d_ = DeviceBuffer(size_t(total_rows_ * n) * out);
  poison_outputs(s);
  rows_ = upload(rows.data(), rows.size() * sizeof(int32_t), s);
  owned_ = upload(owned.data(), owned.size(), s);
  if (p_.bias) {
    bias_ = DeviceBuffer(size_t(G * n) * out);
    fill_random(bias_.get(), p_.d, G * n, seed * 8 + 3, 0.5f, s);
  }
  std::vector<float> sa, sb, sa_groups;
  if (p_.scale != ScaleMode::none) {
    std::mt19937_64 rng(seed * 8 + 4);
    // A's scales as a dense problem over all rows of A takes them, B's as each group's does, G
    // times. Block scales also get each group's own [kb, m_g] copy of A's (what its dense
    // problem takes).
    const GemmProblem dense = GroupedChecker::group_problem(p_, total_rows_);
    const int64_t kb = dense.scale_k_blocks();
    sa = host_uniform(dense.scale_a_elems(), rng, 0.5f, 2.0f);
    sb = host_uniform(G * dense.scale_b_elems(), rng, 0.5f, 2.0f);
    sa_ = upload(sa.data(), sa.size() * sizeof(float), s);
    sb_ = upload(sb.data(), sb.size() * sizeof(float), s);
    if (p_.scale == ScaleMode::block) {
      sa_group_off_.resize(size_t(G));
      for (size_t g = 0; g < size_t(G); ++g) {
        sa_group_off_[g] = int64_t(sa_groups.size());
        for (int64_t j = 0; j < kb; ++j)
          for (int64_t r = 0; r < counts_[g]; ++r) sa_groups.push_back(sa[size_t(j * total_rows_ + first_[g] + r)]);
      }
      sa_groups_ = upload(sa_groups.data(), sa_groups.size() * sizeof(float), s);
    }
  }
  GT_CUDA(cudaStreamSynchronize(s));  // the host vectors above go out of scope
}

GroupedGemmArgs GroupedOperands::args() const {
  GroupedGemmArgs g;
  g.a = a_.get(), g.b = b_.get(), g.d = d_.get();
  g.rows = rows_.as<const int32_t>();
  g.capacity = capacity_;
  g.bias = bias_.get();
  g.scale_a = sa_.as<const float>(), g.scale_b = sb_.as<const float>();
  return g;
}

void GroupedOperands::poison_outputs(cudaStream_t s) const { poison(d_.get(), p_.d, total_rows_ * p_.n, s); }

size_t GroupedOperands::input_bytes() const {
  return a_.bytes() + b_.bytes() + bias_.bytes() + sa_.bytes() + sb_.bytes() + rows_.bytes();
}
size_t GroupedOperands::output_bytes() const { return d_.bytes(); }

// ---- check ---------------------------------------------------------------------------------------

GemmProblem GroupedChecker::group_problem(const GroupedGemmProblem& p, int64_t m) {
  GemmProblem g = GemmProblem::linear(m, p.n, p.k, p.a, p.d);
  g.alpha = p.alpha, g.bias = p.bias, g.act = p.act, g.scale = p.scale;
  return g;
}

GemmArgs GroupedChecker::group_args(const GroupedGemmProblem& p, const GroupedOperands& ops, size_t g, const void* d) {
  const GroupedGemmArgs all = ops.args();
  const size_t in = size_of(p.a), out = size_of(p.d);
  const int64_t r0 = ops.first_row(g), n = p.n, k = p.k;
  GemmArgs a;
  a.a = static_cast<const char*>(all.a) + size_t(r0 * k) * in;
  a.b = static_cast<const char*>(all.b) + size_t(int64_t(g) * n * k) * in;
  a.d = const_cast<char*>(static_cast<const char*>(d) + size_t(r0 * n) * out);
  if (p.bias) a.bias = static_cast<const char*>(all.bias) + size_t(int64_t(g) * n) * out;
  if (p.scale == ScaleMode::tensorwise) a.scale_a = all.scale_a, a.scale_b = all.scale_b + g;
  if (p.scale == ScaleMode::rowwise) a.scale_a = all.scale_a + r0, a.scale_b = all.scale_b + int64_t(g) * n;
  if (p.scale == ScaleMode::block) {
    const GemmProblem gp = group_problem(p, ops.counts()[g]);
    a.scale_a = ops.group_scale_a(g);
    a.scale_b = all.scale_b + int64_t(g) * gp.scale_n_blocks() * gp.scale_b_ld();
  }
  return a;
}

GroupedChecker::GroupedChecker(const GroupedGemmProblem& p, const GroupedOperands& ops, cudaStream_t s)
    : p_(p), ops_(ops), ref_(size_t(ops.total_rows() * p.n) * sizeof(float)) {
  for (size_t g = 0; g < ops.counts().size(); ++g) {
    if (ops.counts()[g] == 0) continue;
    const GemmProblem gp = group_problem(p_, ops.counts()[g]);
    reference_gemm(gp, group_args(p_, ops, g, ops.args().d), ref_.as<float>() + ops.first_row(g) * p_.n, s);
  }
}

CheckResult GroupedChecker::check(cudaStream_t s) const {
  CheckResult all;
  all.ok = true;
  const GroupedGemmArgs args = ops_.args();
  for (size_t g = 0; g < ops_.counts().size(); ++g) {
    const int64_t m = ops_.counts()[g];
    if (m == 0) continue;
    const GemmProblem gp = group_problem(p_, m);
    const GemmArgs ga = group_args(p_, ops_, g, args.d);
    CheckResult c = compare(gp, ga.d, ref_.as<float>() + ops_.first_row(g) * p_.n, s);
    all.rel_err = std::max(all.rel_err, c.rel_err);
    all.worst_ratio = std::max(all.worst_ratio, c.worst_ratio);
    all.bad += c.bad, all.nonfinite += c.nonfinite;
    if (!c.ok && all.ok) {
      all.ok = false;
      all.reason = "group " + std::to_string(g) + " (" + std::to_string(m) + " rows from row " +
                   std::to_string(ops_.first_row(g)) + "): " + c.reason;
    }
  }
  // Rows no group owns (masked padding, the contiguous tail) must still be NaN.
  DeviceBuffer count(sizeof(unsigned long long));
  GT_CUDA(cudaMemsetAsync(count.get(), 0, count.bytes(), s));
  const int64_t total = ops_.total_rows() * p_.n;
  const int blocks = int(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 65536));
  const unsigned char* owned = ops_.owned_rows();
  unsigned long long* n_written = count.as<unsigned long long>();
  switch (p_.d) {
    case DType::bf16:
      count_written_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(args.d), owned,
                                                       ops_.total_rows(), p_.n, n_written);
      break;
    case DType::fp16:
      count_written_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const __half*>(args.d), owned, ops_.total_rows(),
                                                       p_.n, n_written);
      break;
    default:
      count_written_kernel<<<blocks, kThreads, 0, s>>>(static_cast<const float*>(args.d), owned, ops_.total_rows(),
                                                       p_.n, n_written);
      break;
  }
  GT_CUDA(cudaGetLastError());
  unsigned long long written = 0;
  GT_CUDA(cudaMemcpyAsync(&written, n_written, sizeof written, cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  if (written) {
    all.ok = false;
    all.reason = std::to_string(written) + " values written in rows no group owns" +
                 (all.reason.empty() ? "" : "; " + all.reason);
  }
  return all;
}

}  // namespace gemmtune
