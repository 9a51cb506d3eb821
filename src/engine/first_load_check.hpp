// The check of a cached choice on its first load in a process (docs/isolation.md).
//
// A choice read from the tuning cache (or the remote cache, or an imported one) is checked once
// per process against the GPU reference, as a tune checks every candidate: one reference run on
// the op's verification operands. The check runs on a thread of its own (its own non-blocking
// stream, operands and reference), so that Engine::select returns at once (a cache hit stays
// under a millisecond); the kernel's first run() waits for the verdict. Most of the check's time
// is what the first run would pay anyway (loading the kernel's module into the context).
//
// Contract: run() never launches the choice before the check has passed; after a failed check
// every run() throws Error naming the reason, and failed() tells the engine to quarantine the
// choice and re-tune on the next select(). The checking thread touches nothing of the engine
// (it owns copies of what it needs), so the engine may be destroyed while it runs; the
// destructor of the last holder waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "core/log.hpp"
#include "engine/checked_run.hpp"
#include "gemmtune/error.hpp"
#include "tune/ops.hpp"

namespace gemmtune::detail {

struct FirstLoadVerdict {
  bool ok = false;
  std::string reason;   // why not, when !ok
  double rel_err = 0;
  double check_ms = 0;  // the whole check on its thread: operands, reference, one run, compare
};

template <class Op>
class FirstLoadChecked final : public CandidateFor<Op> {
 public:
  FirstLoadChecked(std::shared_ptr<CandidateFor<Op>> inner, const typename Op::Problem& p, uint64_t seed,
                   int device, Log log)
      : inner_(std::move(inner)), log_(std::move(log)) {
    verdict_ = std::async(std::launch::async, [cand = inner_, p, seed, device] { return check(*cand, p, seed, device); })
                   .share();
  }
  ~FirstLoadChecked() override {
    if (verdict_.valid()) verdict_.wait();
  }

  std::string backend() const override { return inner_->backend(); }
  std::string id() const override { return inner_->id(); }
  std::string name() const override { return inner_->name(); }
  bool is_default() const override { return inner_->is_default(); }
  bool can_overlap() const override { return inner_->can_overlap(); }

  void run(const typename Op::Args& args, cudaStream_t stream) override {
    wait_passed();
    inner_->run(args, stream);
  }
  void run_overlapped(const typename Op::Args& args, cudaStream_t stream) override {
    wait_passed();
    inner_->run_overlapped(args, stream);
  }

  // True once the check has finished and failed (never waits).
  bool failed() const {
    return verdict_.wait_for(std::chrono::seconds(0)) == std::future_status::ready && !verdict_.get().ok;
  }
  const FirstLoadVerdict& verdict() const { return verdict_.get(); }

 private:
  void wait_passed() {
    if (passed_.load(std::memory_order_acquire)) return;
    std::shared_future<FirstLoadVerdict> f = verdict_;  // one copy per thread (std::shared_future)
    const FirstLoadVerdict& v = f.get();
    std::call_once(said_, [&] {
      if (v.ok)
        log_.debug("cached choice " + inner_->backend() + " " + inner_->name() + " verified on its first load (rel err " +
                   std::to_string(v.rel_err) + ", check " + std::to_string(v.check_ms) + " ms beside the caller)");
      else
        log_.warn("cached choice " + inner_->backend() + " " + inner_->name() + " failed its first-load check: " +
                  v.reason);
    });
    if (!v.ok)
      GT_THROW("the cached choice " + inner_->backend() + " " + inner_->name() +
               " failed its check on this machine (" + v.reason + "); it is not run: select() again re-tunes");
    passed_.store(true, std::memory_order_release);
  }

  // On the checking thread: one run on fresh verification operands against the GPU reference.
  static FirstLoadVerdict check(CandidateFor<Op>& cand, const typename Op::Problem& p, uint64_t seed, int device) {
    const auto t0 = std::chrono::steady_clock::now();
    FirstLoadVerdict v;
    try {
      GT_CUDA(cudaSetDevice(device));
      // The caller may be capturing a CUDA graph meanwhile: this thread's allocations and
      // synchronizations must not invalidate it (they touch only this thread's stream).
      cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
      GT_CUDA(cudaThreadExchangeStreamCaptureMode(&relaxed));
      Stream s;
      typename OpTraits<Op>::Operands ops = OpTraits<Op>::verify_operands(p, seed, s.get());
      typename OpTraits<Op>::Checker checker(p, ops, s.get());
      run_poisoned<Op>(cand, ops, s.get());
      CheckResult c = check_outputs<Op>(checker, ops, s.get());
      v.rel_err = c.rel_err;
      v.ok = c.ok;
      v.reason = c.reason;
    } catch (const Error& e) {
      v.ok = false;
      v.reason = e.message();
      cudaGetLastError();
    } catch (const std::exception& e) {
      v.ok = false;
      v.reason = e.what();
    }
    v.check_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return v;
  }

  std::shared_ptr<CandidateFor<Op>> inner_;
  Log log_;
  std::shared_future<FirstLoadVerdict> verdict_;
  std::atomic<bool> passed_{false};
  std::once_flag said_;
};

}  // namespace gemmtune::detail
