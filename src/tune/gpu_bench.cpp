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
  // Per workload, enough input copies to exceed 3x L2, all of them within 1/4 of device memory,
  // at most 64 each.
  const size_t workloads = OpTraits<Op>::timing_splits(p);
  sets_.resize(workloads);
  next_set_.assign(workloads, 0);
  for (size_t w = 0; w < workloads; ++w) {
    auto& sets = sets_[w];
    uint64_t seed = opt.seed + 1 + 1000 * w;
    sets.push_back(OpTraits<Op>::timing_operands(p, w, seed, stream.get()));
    size_t in_bytes = std::max<size_t>(sets[0]->input_bytes(), 1);
    size_t want = std::clamp<size_t>((3 * size_t(dev.l2_bytes) + in_bytes - 1) / in_bytes, 1, 64);
    size_t per_set = in_bytes + sets[0]->output_bytes();
    want = std::min(want, std::max<size_t>(1, size_t(dev.global_mem_bytes / 4 / workloads) / per_set));
    if (opt.input_sets > 0) want = std::clamp<size_t>(size_t(opt.input_sets), 1, want);
    for (size_t s = 1; s < want; ++s) sets.push_back(OpTraits<Op>::timing_operands(p, w, seed + s, stream.get()));
  }
  flush_ = L2Flush(dev.l2_bytes, stream_.get());
  spin_us_ = opt.spin_us;

  // Time-based warm-up: round-robin launches until the GPU has been busy for warmup_ms; the
  // last round's times estimate each candidate.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> est(cands_.size(), 0);
  do {
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (before_run) before_run(i);
      est[i] = 0;
      for (size_t w = 0; w < workloads; ++w) {
        start_[0].record(stream_.get());
        run_once(i, w);
        stop_[0].record(stream_.get());
        est[i] += 1000.0 * stop_[0].since(start_[0]);
      }
    }
  } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < opt.warmup_ms);

  // A flush costs about as much GPU time as moving 2x L2 once more; count it in the budget.
  std::vector<double> sorted = est;
  std::sort(sorted.begin(), sorted.end());
  // A sample launches each workload once per rep: typical_us covers them all.
  double typical_us = std::max(sorted[sorted.size() / 2], 1.0) + double(workloads) * (50.0 + std::max(spin_us_, 0.0));
  reps_ = std::clamp(int(std::lround(opt.round_budget_ms * 1000.0 / typical_us)), 1, kMaxReps);
}

template <class Op>
void GpuBench<Op>::run_once(size_t i, size_t w) {
  cands_[i]->run(sets_[w][next_set_[w]]->args(), stream_.get());
  next_set_[w] = (next_set_[w] + 1) % sets_[w].size();
}

template <class Op>
double GpuBench<Op>::sample(size_t i) {
  double sum = 0;
  for (size_t w = 0; w < sets_.size(); ++w) {
    for (int r = 0; r < reps_; ++r) {
      flush_.run(stream_.get());
      gpu_spin(spin_us_, stream_.get());
      start_[r].record(stream_.get());
      run_once(i, w);
      stop_[r].record(stream_.get());
    }
    GT_CUDA(cudaGetLastError());
    std::vector<double> us(reps_);
    for (int r = 0; r < reps_; ++r) us[r] = 1000.0 * stop_[r].since(start_[r]);
    std::nth_element(us.begin(), us.begin() + reps_ / 2, us.end());
    sum += us[reps_ / 2];
  }
  return sum / double(sets_.size());
}

template class GpuBench<GemmOp>;
template class GpuBench<SoftmaxOp>;
template class GpuBench<GroupedOp>;

}  // namespace gemmtune
