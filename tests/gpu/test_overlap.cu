// Programmatic dependent launch (RunOptions::overlap_previous): every candidate that says it can
// overlap (Kernel::can_overlap: the native decode kernels, the CuTe DSL and CUTLASS) launched
// behind a kernel that writes A late. A is NaN until that kernel copies the real values in, after
// ~20 us of spinning, and that kernel lets the candidate launch from its start: a candidate that
// reads A (or anything but its weights) before griddepcontrol.wait gives NaN or stale values, and
// fails the float64 host reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/native/decode_gemm.hpp"
#include "core/device.hpp"
#include "gpu/helpers.hpp"
#include "gpu/overlap_problems.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;

namespace {

// Up to two buffers a late kernel restores (n16: 16-byte words; 0 for an unused one).
struct LateCopy {
  const uint4* src[2];
  uint4* dst[2];
  int64_t n16[2];
};

// Waits `cycles`, then restores the buffers: the previous kernel of an overlapped launch, writing
// the activations late. It lets the next kernel launch at once (launch_dependents first), so that
// kernel runs beside the wait: whatever it reads before its own griddepcontrol.wait is still NaN.
__global__ void late_copy(LateCopy c, long long cycles) {
  asm volatile("griddepcontrol.launch_dependents;");
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (int b = 0; b < 2; ++b)
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < c.n16[b]; i += int64_t(gridDim.x) * blockDim.x)
      c.dst[b][i] = c.src[b][i];
}

// The activations' values kept aside, so that each run can start from NaN and get them back late:
// A and, with block scales, A's scales (a quantizing kernel writes both).
class LateA {
 public:
  LateA(const GemmProblem& p, const GemmArgs& args) {
    keep(0, args.a, size_t(p.elems_a()) * size_of(p.a.dtype));
    if (p.scale == ScaleMode::block) keep(1, args.scale_a, size_t(p.scale_a_elems()) * sizeof(float));
  }
  // Enqueues on `s`: the buffers := NaN (0xff bytes: NaN in bf16, fp16, e4m3 and fp32), then the
  // late copy.
  void enqueue(int sms, cudaStream_t s) const {
    for (int b = 0; b < 2; ++b)
      if (copy_.n16[b]) GT_CUDA(cudaMemsetAsync(copy_.dst[b], 0xff, size_t(copy_.n16[b]) * 16, s));
    late_copy<<<sms, 256, 0, s>>>(copy_, 40000);
    GT_CUDA(cudaGetLastError());
  }

 private:
  void keep(int b, const void* ptr, size_t bytes) {
    GT_CHECK(bytes % 16 == 0, "LateA: the late copy moves 16-byte words");
    saved_[b] = DeviceBuffer(bytes);
    GT_CUDA(cudaMemcpy(saved_[b].get(), ptr, bytes, cudaMemcpyDeviceToDevice));
    copy_.src[b] = saved_[b].as<const uint4>();
    copy_.dst[b] = static_cast<uint4*>(const_cast<void*>(ptr));
    copy_.n16[b] = int64_t(bytes / 16);
  }
  DeviceBuffer saved_[2];
  LateCopy copy_{};
};

}  // namespace

// The native decode kernels, every config decode_configs offers.
TEST(Overlap, NativeReadsTheActivationsAfterThePreviousKernel) {
  const DeviceInfo dev = query_device(0);
  Stream s;
  for (DType dt : {DType::bf16, DType::e4m3}) {
    const GemmProblem p = GemmProblem::linear(4, 4096, 4096, dt);
    SCOPED_TRACE(p.str());
    OperandSet ops(p, 99, s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    const LateA late(p, ops.args());
    for (const auto& c : native::decode_configs(p, dev.sm_count, 64)) {
      SCOPED_TRACE(c.name());
      ASSERT_EQ(native::decode_device_check(c, p), "");
      ops.poison_d(s.get());
      late.enqueue(dev.sm_count, s.get());
      native::run_decode_gemm(c, p, ops.args(), s.get(), /*overlap=*/true);
      s.sync();
      CheckResult r = gpu_test::check_d(p, ops.args(), ref);
      EXPECT_TRUE(r.ok) << r.reason;
    }
  }
}

// A native GEMM whose A is the previous native GEMM's D, launched overlapped behind it: the
// previous kernel lets it launch from its start (decode_gemm.cu), so its CTAs run beside the
// previous one's; it must still read A only once the previous grid is done (D is NaN until
// then). Each config of the first GEMM, the second's first config; the second's reference is
// computed from the first's D as the GPU wrote it.
TEST(Overlap, NativeReadsThePreviousNativeGemmsOutput) {
  const DeviceInfo dev = query_device(0);
  Stream s;
  const GemmProblem p1 = GemmProblem::linear(8, 4096, 4096, DType::bf16);
  const GemmProblem p2 = GemmProblem::linear(8, 2048, 4096, DType::bf16);
  OperandSet ops1(p1, 7, s.get()), ops2(p2, 8, s.get());
  GemmArgs args2 = ops2.args();
  args2.a = ops1.args().d;  // [8, 4096] bf16, ldd = 4096 = p2's lda
  const native::DecodeConfig c2 = native::decode_configs(p2, dev.sm_count).at(0);
  ASSERT_EQ(native::decode_device_check(c2, p2), "");
  const auto ref1 = host::host_gemm(p1, host::download(p1, ops1.args()));
  int checked = 0;
  for (const auto& c1 : native::decode_configs(p1, dev.sm_count, 64)) {
    SCOPED_TRACE(c1.name() + " -> " + c2.name());
    ASSERT_EQ(native::decode_device_check(c1, p1), "");
    ops1.poison_d(s.get());
    ops2.poison_d(s.get());
    native::run_decode_gemm(c1, p1, ops1.args(), s.get());
    native::run_decode_gemm(c2, p2, args2, s.get(), /*overlap=*/true);
    s.sync();
    CheckResult r1 = gpu_test::check_d(p1, ops1.args(), ref1);
    ASSERT_TRUE(r1.ok) << r1.reason;
    CheckResult r2 = gpu_test::check_d(p2, args2, host::host_gemm(p2, host::download(p2, args2)));
    EXPECT_TRUE(r2.ok) << r2.reason;
    ++checked;
  }
  EXPECT_GT(checked, 1);
}

// The CuTe DSL and CUTLASS: every candidate of overlap_test::problems() (decode and prefill sizes,
// bf16 and fp8 with tensorwise scales and a bias) through run_overlapped. (Triton's candidates
// launch plainly: triton_backend.cpp says why.)
// The CuTe DSL and CUTLASS run load-only from a kernel pack on the GPU machine (scripts/precompile.sh
// part gpu-tests; test_cutedsl.cpp says how); a backend that is not available is reported and skipped.
TEST(Overlap, CutedslCutlassReadTheActivationsAfterThePreviousKernel) {
  const DeviceInfo dev = query_device(0);
  const BackendContext ctx = gpu_test::context(dev);
  std::vector<std::pair<std::string, std::function<std::unique_ptr<Backend>()>>> backends = {
      {"cutedsl", [&] { return make_cutedsl_backend(ctx); }},
      {"cutlass", [&] { return make_cutlass_backend(ctx); }},
  };
  const std::vector<GemmProblem> problems = overlap_test::problems();
  Stream s;
  int available = 0;
  for (auto& [name, make] : backends) {
    auto b = make();
    if (Verdict v = b->available(); !v) {
      std::printf("%s: not available: %s\n", name.c_str(), v.reason.c_str());
      continue;
    }
    ++available;
    int checked = 0;
    for (const GemmProblem& p : problems) {
      SCOPED_TRACE(name + " " + p.str());
      if (Verdict v = b->supports(p); !v) {
        std::printf("%s: %s not supported: %s\n", name.c_str(), p.str().c_str(), v.reason.c_str());
        continue;
      }
      auto cands = b->candidates(p);
      OperandSet ops(p, 0x0e71 + uint64_t(p.m), s.get());
      s.sync();
      const auto ref = host::host_gemm(p, host::download(p, ops.args()));
      const LateA late(p, ops.args());
      std::vector<std::string> failed = gpu_test::prepare_all(cands, dev.index);
      for (size_t i = 0; i < cands.size(); ++i) {
        auto& c = cands[i];
        SCOPED_TRACE(c->id());
        EXPECT_EQ(failed[i], "");
        EXPECT_TRUE(c->can_overlap()) << "every " << name << " candidate launches overlapped";
        if (!failed[i].empty() || !c->can_overlap()) continue;
        ops.poison_d(s.get());
        late.enqueue(dev.sm_count, s.get());
        ASSERT_NO_THROW(c->run_overlapped(ops.args(), s.get()));
        s.sync();
        CheckResult r = gpu_test::check_d(p, ops.args(), ref);
        EXPECT_TRUE(r.ok) << r.reason;
        ++checked;
      }
    }
    std::printf("%s: %d overlapped candidate runs checked\n", name.c_str(), checked);
    EXPECT_GT(checked, 0) << name;
  }
  if (available == 0) GTEST_SKIP() << "neither the CuTe DSL nor CUTLASS is available";
}
