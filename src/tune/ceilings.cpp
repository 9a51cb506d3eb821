// Ceilings of the current GPU, measured with plain CUDA copies and cuBLASLt's default picks.
#include "tune/ceilings.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "tune/operands.hpp"
#include "tune/timing.hpp"

namespace gemmtune {
namespace {

constexpr int kSamples = 20;
constexpr int kGemmBatch = 5;          // GEMMs per timed sample (~7 ms at 8192^3 bf16)
constexpr double kGemmWarmupMs = 200;  // GPU time before timing: clocks settle under load
constexpr uint64_t kSeed = 0x5eed5eedull;

double median_ms(std::vector<double> ms) { return summarize(std::move(ms)).median; }

// A 2 GiB device-to-device copy (capped at 1/8 of device memory per buffer); counts the bytes
// read and written, i.e. twice the copy size.
double measure_copy_TBps(const DeviceInfo& dev, const Stream& s) {
  size_t bytes = size_t(2) << 30;
  if (dev.global_mem_bytes > 0) bytes = std::min(bytes, size_t(dev.global_mem_bytes / 8));
  bytes &= ~size_t(4095);
  GT_CHECK(bytes > 0, "ceilings: device memory too small for the copy test");
  DeviceBuffer src(bytes), dst(bytes);
  GT_CUDA(cudaMemsetAsync(src.get(), 0x5a, bytes, s.get()));
  auto copy = [&] { GT_CUDA(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s.get())); };
  for (int i = 0; i < 3; ++i) copy();
  Event e0, e1;
  std::vector<double> ms;
  for (int i = 0; i < kSamples; ++i) {
    e0.record(s.get());
    copy();
    e1.record(s.get());
    ms.push_back(e1.since(e0));
  }
  return 2.0 * double(bytes) / (median_ms(ms) * 1e-3) / 1e12;
}

// Milliseconds for kGemmBatch runs of `cand`, back to back.
double time_batch(detail::Candidate& cand, const GemmArgs& args, const Stream& s) {
  Event e0, e1;
  e0.record(s.get());
  for (int i = 0; i < kGemmBatch; ++i) cand.run(args, s.get());
  e1.record(s.get());
  return e1.since(e0);
}

// TFLOP/s of cuBLASLt's default pick (what torch gets) for p, on random inputs.
double measure_gemm_tflops(Backend& lt, const GemmProblem& p, const Stream& s) {
  Verdict v = lt.supports(p);
  GT_CHECK(v, "ceilings: cuBLASLt does not support " + p.str() + ": " + v.reason);
  auto cands = lt.candidates(p);
  auto it = std::find_if(cands.begin(), cands.end(), [](const auto& c) { return c->is_default(); });
  GT_CHECK(it != cands.end(), "ceilings: cuBLASLt gave no default pick for " + p.str());
  detail::Candidate& pick = **it;
  pick.prepare({});
  OperandSet ops(p, kSeed, s.get());
  const GemmArgs args = ops.args();
  for (double warm = 0; warm < kGemmWarmupMs;) warm += time_batch(pick, args, s);
  std::vector<double> per_run;
  for (int i = 0; i < kSamples; ++i) per_run.push_back(time_batch(pick, args, s) / kGemmBatch);
  return p.flops() / (median_ms(per_run) * 1e-3) / 1e12;
}

}  // namespace

Ceilings measure_ceilings(const DeviceInfo& dev, std::function<void(const std::string&)> log) {
  const BackendContext ctx{dev, Log(std::move(log), LogLevel::info)};
  std::string why;
  GT_CHECK(cuda_device_present(&why), "ceilings: no CUDA device (" + why + ")");
  std::unique_ptr<Backend> lt = make_cublaslt_backend(ctx);
  Verdict avail = lt->available();
  GT_CHECK(avail, "ceilings: cuBLASLt is not available: " + avail.reason);
  Stream s;
  Ceilings c;
  c.copy_TBps = measure_copy_TBps(ctx.device, s);
  c.bf16_tflops = measure_gemm_tflops(*lt, GemmProblem::linear(8192, 8192, 8192, DType::bf16), s);
  GemmProblem fp8 = GemmProblem::linear(8192, 8192, 8192, DType::e4m3, DType::bf16);
  fp8.scale = ScaleMode::tensorwise;
  c.fp8_tflops = measure_gemm_tflops(*lt, fp8, s);
  return c;
}

double roof_tflops(const GemmProblem& p, const Ceilings& c) {
  double peak = c.bf16_tflops;  // bf16 and fp16 tensor cores run at one rate on Hopper
  if (is_fp8(p.a.dtype)) peak = c.fp8_tflops;
  // fp32 with tf32: Hopper's TF32 tensor-core rate is half its BF16 rate. Plain fp32 runs on
  // FFMA units (H100/H200 SXM: 67 TFLOP/s vs 989 dense BF16, ~1/15): 1/16 of the bf16 rate is
  // a rough bound, not measured (no FFMA kernel is timed here).
  else if (p.a.dtype == DType::fp32) peak = p.tf32 ? c.bf16_tflops / 2 : c.bf16_tflops / 16;
  if (!(peak > 0) || !(c.copy_TBps > 0)) return 0;
  double t = std::max(p.flops() / (peak * 1e12), p.min_bytes() / (c.copy_TBps * 1e12));
  return p.flops() / t / 1e12;
}

}  // namespace gemmtune
