#include "tune/gpu_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "tune/spin.hpp"

namespace gemmtune {

namespace {
constexpr int kMaxReps = 32;  // launches per sample, chosen from opt.round_budget_ms
}  // namespace

template <class Op>
GpuBench<Op>::GpuBench(const Problem& p, std::vector<detail::CandidateFor<Op>*> cands, const TuneOptions& opt,
                       const DeviceInfo& dev, const Stream& stream, const std::function<void(size_t)>& before_run)
    : p_(p), cands_(std::move(cands)), stream_(stream), start_(kMaxReps), stop_(kMaxReps) {
  // Enough input copies to exceed 3x L2, within 1/4 of device memory and at most 64.
  sets_.push_back(std::make_unique<Operands>(p, opt.seed + 1, stream.get()));
  size_t in_bytes = std::max<size_t>(sets_[0]->input_bytes(), 1);
  size_t want = std::clamp<size_t>((3 * size_t(dev.l2_bytes) + in_bytes - 1) / in_bytes, 1, 64);
  size_t per_set = in_bytes + sets_[0]->output_bytes();
  want = std::min(want, std::max<size_t>(1, size_t(dev.global_mem_bytes / 4) / per_set));
  if (opt.input_sets > 0) want = std::clamp<size_t>(size_t(opt.input_sets), 1, want);
  for (size_t s = 1; s < want; ++s) sets_.push_back(std::make_unique<Operands>(p, opt.seed + 1 + s, stream.get()));
  flush_ = DeviceBuffer(2 * size_t(std::max<int64_t>(dev.l2_bytes, 1 << 20)));
  spin_us_ = opt.spin_us;

  // Time-based warm-up: round-robin launches until the GPU has been busy for warmup_ms; the
  // last round's times estimate each candidate.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> est(cands_.size(), 0);
  do {
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (before_run) before_run(i);
      start_[0].record(stream_.get());
      run_once(i);
      stop_[0].record(stream_.get());
      est[i] = 1000.0 * stop_[0].since(start_[0]);
    }
  } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < opt.warmup_ms);

  // A flush costs about as much GPU time as moving 2x L2 once more; count it in the budget.
  std::vector<double> sorted = est;
  std::sort(sorted.begin(), sorted.end());
  double typical_us = std::max(sorted[sorted.size() / 2], 1.0) + 50.0 + std::max(spin_us_, 0.0);
  reps_ = std::clamp(int(std::lround(opt.round_budget_ms * 1000.0 / typical_us)), 1, kMaxReps);
}

template <class Op>
void GpuBench<Op>::run_once(size_t i) {
  cands_[i]->run(sets_[next_set_]->args(), stream_.get());
  next_set_ = (next_set_ + 1) % sets_.size();
}

template <class Op>
double GpuBench<Op>::sample(size_t i) {
  for (int r = 0; r < reps_; ++r) {
    GT_CUDA(cudaMemsetAsync(flush_.get(), r & 0xff, flush_.bytes(), stream_.get()));
    gpu_spin(spin_us_, stream_.get());
    start_[r].record(stream_.get());
    run_once(i);
    stop_[r].record(stream_.get());
  }
  GT_CUDA(cudaGetLastError());
  std::vector<double> us(reps_);
  for (int r = 0; r < reps_; ++r) us[r] = 1000.0 * stop_[r].since(start_[r]);
  std::nth_element(us.begin(), us.begin() + reps_ / 2, us.end());
  return us[reps_ / 2];
}

template class GpuBench<GemmOp>;
template class GpuBench<SoftmaxOp>;
template class GpuBench<GroupedOp>;

}  // namespace gemmtune
