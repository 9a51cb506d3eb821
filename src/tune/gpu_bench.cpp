#include "tune/gpu_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gemmtune {

namespace {
// Launches per sample are chosen so a sample takes about opt.round_budget_ms of GPU time.
constexpr int kMaxReps = 100;
// Below this per-launch time, host launch gaps could show: time a CUDA graph of the launches.
constexpr double kGraphBelowUs = 100;
}  // namespace

// An instantiated graph of reps_ launches of one candidate over the rotated sets.
struct GpuBench::Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

GpuBench::GpuBench(const GemmProblem& p, std::vector<detail::Candidate*> cands, const TuneOptions& opt,
                   const DeviceInfo& dev, const Stream& stream)
    : p_(p), cands_(std::move(cands)), stream_(stream) {
  // Enough input copies to exceed 3x L2, within 1/4 of device memory and at most 64.
  sets_.push_back(std::make_unique<OperandSet>(p, opt.seed + 1, stream.get()));
  size_t in_bytes = std::max<size_t>(sets_[0]->input_bytes(), 1);
  size_t want = std::clamp<size_t>((3 * size_t(dev.l2_bytes) + in_bytes - 1) / in_bytes, 1, 64);
  size_t per_set = in_bytes + size_t(p.elems_d()) * size_of(p.d.dtype);
  want = std::min(want, std::max<size_t>(1, size_t(dev.global_mem_bytes / 4) / per_set));
  for (size_t s = 1; s < want; ++s) sets_.push_back(std::make_unique<OperandSet>(p, opt.seed + 1 + s, stream.get()));
  flush_ = DeviceBuffer(2 * size_t(std::max<int64_t>(dev.l2_bytes, 1 << 20)));

  // Time-based warm-up: round-robin launches until the GPU has been busy for warmup_ms.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> est(cands_.size(), 0);
  do {
    for (size_t i = 0; i < cands_.size(); ++i) {
      start_.record(stream_.get());
      run_once(i);
      stop_.record(stream_.get());
      est[i] = 1000.0 * stop_.since(start_);
    }
  } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < opt.warmup_ms);

  std::vector<double> sorted = est;
  std::sort(sorted.begin(), sorted.end());
  double typical_us = std::max(sorted[sorted.size() / 2], 1.0);
  reps_ = std::clamp(int(std::lround(opt.round_budget_ms * 1000.0 / typical_us)), 1, kMaxReps);

  graphs_.resize(cands_.size());
  if (typical_us < kGraphBelowUs) {
    for (size_t i = 0; i < cands_.size(); ++i) {
      auto g = std::make_unique<Graph>();
      // Capture may be refused by a backend (e.g. it synchronizes): fall back to launches.
      if (cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal) != cudaSuccess) continue;
      bool captured = true;
      try {
        for (int r = 0; r < reps_; ++r) run_once(i);
      } catch (const Error&) {
        captured = false;  // a partial graph would time fewer launches than reps_
      }
      if (cudaStreamEndCapture(stream_.get(), &g->graph) == cudaSuccess && captured && g->graph &&
          cudaGraphInstantiate(&g->exec, g->graph, 0) == cudaSuccess)
        graphs_[i] = std::move(g);
      cudaGetLastError();
    }
  }
}

GpuBench::~GpuBench() = default;

void GpuBench::run_once(size_t i) {
  cands_[i]->run(sets_[next_set_]->args(), stream_.get());
  next_set_ = (next_set_ + 1) % sets_.size();
}

double GpuBench::sample(size_t i) {
  GT_CUDA(cudaMemsetAsync(flush_.get(), int(next_set_ & 0xff), flush_.bytes(), stream_.get()));
  start_.record(stream_.get());
  if (graphs_[i]) {
    GT_CUDA(cudaGraphLaunch(graphs_[i]->exec, stream_.get()));
  } else {
    for (int r = 0; r < reps_; ++r) run_once(i);
  }
  stop_.record(stream_.get());
  GT_CUDA(cudaGetLastError());
  return 1000.0 * stop_.since(start_) / reps_;
}

}  // namespace gemmtune
