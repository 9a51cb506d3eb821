// Block-scaled FP8 (ScaleMode::block: one fp32 scale per 1x128 slice of A's rows and per 128x128
// block of B, applied to each 128-deep k block's partial sums; layouts in gemmtune/problem.hpp).
//
// The GPU reference against the float64 host reference; every candidate of every backend that
// offers block scales (cuBLASLt, Triton, and CUTLASS and the CuTe DSL where their kernel pack is
// loaded: GEMMTUNE_ARTIFACTS, load-only; skipped without one) against the float64 host reference
// (random inputs and scales, D poisoned with NaN before each run), on the shapes of
// gpu/fp8_block_problems.hpp; the backends without block scales refuse with a reason; and the
// engine end to end (tune, cache, reload, run).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <sstream>

#include "backends/backend.hpp"
#include "core/device.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gpu/fp8_block_problems.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"
#include "tune/verify.hpp"

using namespace gemmtune;

namespace {

using fp8_block_test::block;

std::vector<gpu_test::Named> block_problems() { return fp8_block_test::problems(); }

// Whether the CuTe DSL's and CUTLASS's kernels take p's layouts (A row-major, B column-major, a
// 16-bit output, TMA's 16-byte rows of A); both then need m a multiple of 4 (A's block scales are
// loaded by TMA).
bool layouts_taken(const GemmProblem& p) {
  return p.a.layout == Layout::row && p.b.layout == Layout::col && size_of(p.d.dtype) == 2 && p.lda() % 16 == 0;
}
// Whether the CuTe DSL kernel takes p: what its pack must hold.
bool cutedsl_takes(const GemmProblem& p) { return layouts_taken(p) && p.m % 4 == 0; }

std::vector<std::unique_ptr<Backend>> all_backends() {
  BackendContext ctx = gpu_test::context(query_device(0), [](const std::string&) {});
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(make_cublaslt_backend(ctx));
  out.push_back(make_triton_backend(ctx));
  out.push_back(make_cutlass_backend(ctx));
  out.push_back(make_cutedsl_backend(ctx));
  out.push_back(make_native_gemm_backend(ctx));
  return out;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(Fp8Block, GpuReferenceMatchesFloat64Host) {
  REQUIRE_GPU();
  std::vector<GemmProblem> ps;
  for (auto& [what, p] : block_problems()) ps.push_back(p);
  // Column-major A and D, odd leading dimensions, a partial last block in every dimension.
  GemmProblem odd = block(259, 515, 1031);
  odd.a = {DType::e4m3, Layout::col, 263}, odd.b.ld = 1040, odd.d = {DType::bf16, Layout::col, 270};
  odd.c = odd.d, odd.beta = 0.25f, odd.bias = true;
  ps.push_back(odd);
  for (size_t i = 0; i < ps.size(); ++i) {
    const GemmProblem& p = ps[i];
    SCOPED_TRACE(p.str());
    Stream s;
    OperandSet ops(p, 500 + i, s.get());
    DeviceBuffer ref(size_t(p.m * p.n) * sizeof(float));
    reference_gemm(p, ops.args(), ref.as<float>(), s.get());
    s.sync();
    std::vector<float> f(size_t(p.m * p.n));
    GT_CUDA(cudaMemcpy(f.data(), ref.get(), f.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const std::vector<double> gpu(f.begin(), f.end());
    const auto exact = host::host_gemm(p, host::download(p, ops.args()));
    GemmProblem p32 = p;
    p32.d.dtype = DType::fp32;
    const CheckResult r = host::host_compare(p32, gpu, exact, tolerance_for(p32));
    EXPECT_TRUE(r.ok) << r.reason;
  }
}

TEST(Fp8Block, ScalesMatter) {
  // The float64 reference with block scales differs from the unscaled one (the scales are
  // random per block, not constant), and a D computed with the scales of the wrong block fails
  // the comparison: the check can fail.
  REQUIRE_GPU();
  GemmProblem p = block(256, 256, 512);
  Stream s;
  OperandSet ops(p, 99, s.get());
  s.sync();
  const host::Operands o = host::download(p, ops.args());
  const auto ref = host::host_gemm(p, o);
  host::Operands swapped = o;  // A's scales of k blocks 0 and 1 exchanged
  for (int64_t i = 0; i < p.m; ++i) std::swap(swapped.sa[size_t(i)], swapped.sa[size_t(p.m + i)]);
  const auto wrong = host::host_gemm(p, swapped);
  EXPECT_FALSE(host::host_compare(p, wrong, ref, tolerance_for(p)).ok);
}

TEST(Fp8Block, EveryCandidateMatchesFloat64Reference) {
  REQUIRE_GPU();
  auto backends = all_backends();
  const DeviceInfo dev = query_device(0);
  Stream s;
  int checked = 0;
  std::set<std::string> offered;
  std::ostringstream refused;
  for (auto& [what, p] : block_problems()) {
    SCOPED_TRACE(what + ": " + p.str());
    ASSERT_NO_THROW(p.validate());
    OperandSet ops(p, 0xb10c + uint64_t(p.m * 31 + p.n * 7 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    for (auto& b : backends) {
      if (Verdict v = b->available(); !v) continue;
      Verdict v = b->supports(p);
      const std::string name = b->name();
      if (name == "cutedsl") {
        // Available here only with a kernel pack (load-only), which must hold every problem it takes.
        EXPECT_EQ(bool(v), cutedsl_takes(p)) << "cutedsl: " << v.reason;
        if (!v && what.rfind("fp32 out", 0) == 0) EXPECT_TRUE(contains(v.reason, "output")) << v.reason;
      }
      if ((name == "cutlass" || name == "cutedsl") && p.m % 4 != 0 && layouts_taken(p))
        EXPECT_TRUE(!v && contains(v.reason, "multiple of 4")) << name << ": m = " << p.m << ": " << v.reason;
      if (name == "native") {
        EXPECT_FALSE(v) << name << " offers block scales: test its candidates here";
        // Where nothing else is refused (other rules may come first elsewhere), block scales are the reason.
        if (what.rfind("aligned", 0) == 0 || what.rfind("decode", 0) == 0)
          EXPECT_TRUE(contains(v.reason, "block")) << name << ": " << v.reason;
        continue;
      }
      if (name == "cublaslt") {
        const bool expect = dev.cc_major == 9 && p.k % 128 == 0;
        if (!expect) {
          EXPECT_FALSE(v) << "cuBLASLt must refuse " << p.str();
          // k % 128 != 0: "k a multiple of 128", or first "every leading dimension a multiple of 16 bytes"
          if (p.k % 128 != 0) EXPECT_TRUE(contains(v.reason, "multiple of")) << v.reason;
        }
      }
      if (name == "triton") EXPECT_TRUE(v) << "Triton refuses " << p.str() << ": " << v.reason;
      if (!v) {
        refused << "  " << name << " / " << what << ": " << v.reason << "\n";
        continue;
      }
      auto cands = b->candidates(p);
      EXPECT_FALSE(cands.empty()) << name << " supports but has no candidates";
      std::vector<std::string> failed = gpu_test::prepare_all(cands, 0);
      for (size_t i = 0; i < cands.size(); ++i) {
        auto& c = cands[i];
        SCOPED_TRACE(name + " " + c->name());
        ASSERT_EQ(failed[i], "") << "a candidate the backend offered does not compile / load";
        ops.poison_d(s.get());
        ASSERT_NO_THROW(c->run(ops.args(), s.get()));
        s.sync();
        CheckResult r = gpu_test::check_d(p, ops.args(), ref);
        EXPECT_TRUE(r.ok) << r.reason;
        ++checked;
        offered.insert(name);
      }
    }
  }
  for (auto& b : backends)
    if (b->name() == "cutlass" && b->available())
      EXPECT_TRUE(offered.count("cutlass")) << "CUTLASS is available but offered no block-scaled candidate (does the "
                                               "kernel pack hold tests/gpu/packs/fp8_block.jsonl's CUTLASS instances?)";
  std::printf("block-scaled FP8: checked %d candidate runs (backends: ", checked);
  for (auto& n : offered) std::printf("%s ", n.c_str());
  std::printf(")\nrefused:\n%s", refused.str().c_str());
  EXPECT_GT(checked, 0);
}

TEST(Fp8Block, EngineTunesCachesReloadsAndRuns) {
  REQUIRE_GPU();
  const auto cache = gpu_test::temp_cache("fp8-block.sqlite");
  GemmProblem p = block(384, 512, 1024);
  p.bias = true;
  std::string id, backend;
  auto check = [&](const Kernel& k) {
    Stream s;
    OperandSet ops(p, 4242, s.get());
    ops.poison_d(s.get());
    k.run(ops.args(), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    CheckResult r = gpu_test::check_d(p, ops.args(), ref);
    EXPECT_TRUE(r.ok) << k.backend() << " " << k.name() << ": " << r.reason;
  };
  {
    EngineOptions o = gpu_test::quick(cache);
    o.backends = {"cublaslt", "triton"};
    Engine e(o);
    TuneReport r;
    Kernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    for (auto& c : r.results) EXPECT_NE(c.status, CandidateStatus::wrong) << c.backend << " " << c.name << ": " << c.reason;
    check(k);
    id = k.id(), backend = k.backend();
  }
  {
    EngineOptions o = gpu_test::quick(cache);
    o.backends = {"cublaslt", "triton"};
    Engine e(o);
    TuneReport r;
    Kernel k = e.select(p, &r);
    EXPECT_TRUE(r.from_cache);
    EXPECT_EQ(k.id(), id);
    EXPECT_EQ(k.backend(), backend);
    check(k);
  }
  // The block problem and the tensorwise one of the same shape are different cache entries.
  GemmProblem t = p;
  t.scale = ScaleMode::tensorwise;
  EXPECT_NE(t.key(), p.key());
}
