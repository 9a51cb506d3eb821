// Softmax through the engine: every candidate of every softmax backend (native CUDA, Triton)
// against the float64 host reference, the engine's GPU reference and check (which must catch
// wrong outputs), select -> cache -> reload in a second engine -> run, and torch's special
// values through the selected kernel. Inputs random, outputs poisoned, NaN fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <set>

#include "backends/backend.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/softmax.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"
#include "support/host_softmax.hpp"
#include "tune/softmax_check.hpp"

using namespace gemmtune;
namespace fs = std::filesystem;
using gpu_test::expect_winner_within_race_reach;
using gpu_test::quick;
using gpu_test::temp_cache;

namespace {

// Device input for p: random in [-8, 8) with torch's special rows (softmax_check.hpp) and NaN
// padding; the host copy of its bytes and the float64 reference.
struct Input {
  SoftmaxOperands ops;
  std::vector<uint8_t> x;
  host::SoftmaxRef ref;
  Input(const SoftmaxProblem& p, uint64_t seed, cudaStream_t s) : ops(p, seed, s, /*specials=*/true) {
    x.resize(ops.input_bytes());
    GT_CUDA(cudaMemcpyAsync(x.data(), ops.args().x, x.size(), cudaMemcpyDeviceToHost, s));
    GT_CUDA(cudaStreamSynchronize(s));
    ref = host::host_softmax(p, x.data());
  }
};

// y (device) against the host reference; the padding must keep the poison (all bits set).
std::string check(const SoftmaxProblem& p, const Input& in, cudaStream_t s) {
  std::vector<uint8_t> y(in.ops.output_bytes());
  GT_CUDA(cudaMemcpyAsync(y.data(), in.ops.args().y, y.size(), cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  const host::SoftmaxCheck c = host::softmax_compare(p, in.x.data(), y.data(), in.ref);
  if (!c.ok) return c.reason;
  if (const int64_t r = gpu_test::written_padding_row(p, y); r >= 0)
    return "wrote into the padding of row " + std::to_string(r);
  return {};
}

std::vector<SoftmaxProblem> shapes() {
  std::vector<SoftmaxProblem> out;
  auto add = [&](int64_t rows, int64_t cols, DType in, DType o, int64_t ld = 0, float scale = 1.0f) {
    SoftmaxProblem p = SoftmaxProblem::make(rows, cols, in);
    p.out = o, p.ld = ld, p.scale = scale;
    out.push_back(p);
  };
  add(64, 1024, DType::bf16, DType::bf16);
  add(40, 4096, DType::fp16, DType::fp16, 0, 0.125f);
  add(24, 16384, DType::fp32, DType::fp32);
  add(16, 65536, DType::bf16, DType::bf16);
  add(9, 262144, DType::bf16, DType::bf16, 0, -0.5f);
  add(33, 1000, DType::bf16, DType::fp32, 1008, 0.37f);
  add(17, 33, DType::fp32, DType::bf16, 40);
  add(8, 131073, DType::fp16, DType::fp16);
  // issue 19: short rows (a CTA span starting inside a 16-byte pack), a vocabulary width whose
  // rows do not start on a pack, one long row over the whole GPU
  add(3000, 7, DType::bf16, DType::bf16);
  add(6, 50257, DType::bf16, DType::bf16, 0, 0.37f);
  add(1, 1048576, DType::bf16, DType::bf16);
  return out;
}

}  // namespace

// Every candidate of every softmax backend, prepared and run outside the engine.
TEST(SoftmaxCandidates, EveryBackendEveryCandidateMatchesTheHostReference) {
  REQUIRE_GPU();
  const DeviceInfo dev = gpu_test::current_device();
  BackendContext ctx = gpu_test::context(dev, [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  std::vector<std::unique_ptr<SoftmaxBackend>> backends;
  backends.push_back(make_native_softmax_backend(ctx));
  backends.push_back(make_triton_softmax_backend(ctx));
  Stream s;
  uint64_t seed = 11;
  int runs = 0;
  for (const SoftmaxProblem& p : shapes()) {
    SCOPED_TRACE(p.str());
    Input in(p, seed++, s.get());
    for (auto& b : backends) {
      if (Verdict v = b->available(); !v) {
        ADD_FAILURE() << b->name() << " not available: " << v.reason;
        continue;
      }
      if (!b->supports(p)) continue;
      auto cands = b->candidates(p);
      EXPECT_FALSE(cands.empty()) << b->name();
      // Dropping launches the device cannot make must not leave an error in the runtime (a
      // later launch's cudaGetLastError would report it as its own).
      EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << b->name() << " candidates()";
      // Prepare (Triton: compile) all at once; the compile workers run in parallel.
      std::vector<std::future<std::string>> prepared = gpu_test::prepare_async(cands, dev.index);
      for (size_t i = 0; i < cands.size(); ++i) {
        auto& c = cands[i];
        if (std::string why = prepared[i].get(); !why.empty()) {
          ADD_FAILURE() << b->name() << " " << c->name() << ": prepare: " << why;
          continue;
        }
        try {
          in.ops.poison_outputs(s.get());
          c->run(in.ops.args(), s.get());
          GT_CUDA(cudaStreamSynchronize(s.get()));
        } catch (const Error& e) {
          ADD_FAILURE() << b->name() << " " << c->name() << ": " << e.message();
          continue;
        }
        ++runs;
        const std::string why = check(p, in, s.get());
        EXPECT_EQ(why, "") << b->name() << " " << c->name();
      }
    }
  }
  EXPECT_GT(runs, 100);
}

// The engine's GPU reference agrees with the float64 host one, and its check fails wrong outputs.
TEST(SoftmaxCheck, GpuReferenceAndCheckCatchWrongOutputs) {
  REQUIRE_GPU();
  SoftmaxProblem p = SoftmaxProblem::make(24, 3000, DType::bf16);
  p.ld = 3008, p.scale = 0.5f;
  Stream s;
  Input in(p, 5, s.get());
  DeviceBuffer ref(size_t(p.rows * p.cols) * sizeof(float)), mx(size_t(p.rows) * sizeof(double));
  reference_softmax(p, in.ops.args().x, ref.as<float>(), mx.as<double>(), s.get());
  std::vector<float> gref(size_t(p.rows * p.cols));
  GT_CUDA(cudaMemcpyAsync(gref.data(), ref.get(), gref.size() * 4, cudaMemcpyDeviceToHost, s.get()));
  GT_CUDA(cudaStreamSynchronize(s.get()));
  for (size_t i = 0; i < gref.size(); ++i) {
    const double want = in.ref.y[i];
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(gref[i])) << i;
    } else {
      ASSERT_NEAR(gref[i], want, 1e-7 * std::fabs(want) + 1e-44) << i;
    }
  }
  // A correct output (the native online kernel) passes; then break it four ways.
  auto cand = make_native_softmax_backend(BackendContext{DeviceInfo{}, Log()})->load(p, "online_v8_t256");
  auto run_and_check = [&] {
    in.ops.poison_outputs(s.get());
    cand->run(in.ops.args(), s.get());
    return compare_softmax(p, in.ops.args().x, in.ops.args().y, ref.as<float>(), mx.as<double>(), s.get());
  };
  CheckResult ok = run_and_check();
  EXPECT_TRUE(ok.ok) << ok.reason;
  EXPECT_LT(ok.rel_err, 1e-2);
  auto poke = [&](int64_t elem, uint16_t bits) {
    GT_CUDA(cudaMemcpy(static_cast<uint16_t*>(in.ops.args().y) + elem, &bits, 2, cudaMemcpyHostToDevice));
    return compare_softmax(p, in.ops.args().x, in.ops.args().y, ref.as<float>(), mx.as<double>(), s.get());
  };
  // Row 0 is finite (special rows are r % 8 in 1..5): a 2% error, a NaN, a write into the padding.
  std::vector<uint16_t> y0(8);
  GT_CUDA(cudaMemcpy(y0.data(), in.ops.args().y, 16, cudaMemcpyDeviceToHost));
  EXPECT_FALSE(poke(3, uint16_t(y0[3] + 6)).ok);  // bf16 + 6 ulp: over the 2^-8 bound
  run_and_check();
  CheckResult nan = poke(5, 0x7fc0);
  EXPECT_FALSE(nan.ok);
  EXPECT_EQ(nan.bad, 1);
  run_and_check();
  CheckResult pad = poke(3001, 0x3f80);  // 1.0 in the padding of row 0
  EXPECT_FALSE(pad.ok);
  EXPECT_NE(pad.reason.find("padding"), std::string::npos) << pad.reason;
  // A NaN row (row 1 has a NaN) answered with finite numbers fails too.
  run_and_check();
  EXPECT_FALSE(poke(p.row_stride() + 7, 0x3f80).ok);
}

TEST(SoftmaxEngine, TunesCachesReloadsAndRuns) {
  REQUIRE_GPU();
  const fs::path cache = temp_cache("softmax.sqlite");
  SoftmaxProblem p = SoftmaxProblem::make(300, 8192, DType::bf16);
  p.scale = 0.25f;
  std::string id, backend;
  Stream s;
  {
    Engine e(quick(cache));
    TuneReport r;
    SoftmaxKernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    EXPECT_EQ(r.op, "softmax");
    EXPECT_FALSE(r.from_cache);
    ASSERT_NE(r.winner(), nullptr);
    EXPECT_EQ(r.winner()->id, k.id());
    std::set<std::string> backends;
    for (auto& c : r.results) {
      EXPECT_NE(c.status, CandidateStatus::wrong) << c.backend << " " << c.name << ": " << c.reason;
      EXPECT_NE(c.status, CandidateStatus::failed) << c.backend << " " << c.name << ": " << c.reason;
      backends.insert(c.backend);
    }
    // Every available softmax backend took part (CuTe DSL needs its wheel or a precompiled store).
    std::set<std::string> expected = {"native", "triton"};
    for (const BackendStatus& b : e.backends())
      if (b.op == "softmax" && b.name == "cutedsl" && b.available) expected.insert("cutedsl");
    EXPECT_EQ(backends, expected);
    // The winner is the fastest correct candidate up to the race's near-tie reach (not
    // strictly: a duel on paired ratios may prefer one whose marginal median is a hair higher).
    expect_winner_within_race_reach(r, quick(cache).tune);
    Input in(p, 99, s.get());
    k.run(in.ops.args(), s.get());
    EXPECT_EQ(check(p, in, s.get()), "");
    id = k.id(), backend = k.backend();
    EXPECT_NE(e.cache_key(p), e.cache_key(GemmProblem::linear(300, 8192, 64)));
    EXPECT_NE(e.environment("softmax"), e.environment("gemm"));
  }
  {
    Engine e(quick(cache));
    TuneReport r;
    SoftmaxKernel k = e.select(p, &r);
    EXPECT_TRUE(r.from_cache);
    EXPECT_EQ(k.id(), id);
    EXPECT_EQ(k.backend(), backend);
    EXPECT_FALSE(r.results.empty());
    // Another scale: same cache entry (scale is a run-time argument), the kernel applies it.
    SoftmaxProblem q = p;
    q.scale = -2.0f;
    SoftmaxKernel kq = e.select(q, &r);
    EXPECT_TRUE(r.from_cache);
    Input in(q, 7, s.get());
    kq.run(in.ops.args(), s.get());
    EXPECT_EQ(check(q, in, s.get()), "");
    // Misuse: null or misaligned pointers name the field.
    EXPECT_THROW(kq.run({nullptr, in.ops.args().y}, s.get()), Error);
    EXPECT_THROW(kq.run({static_cast<const char*>(in.ops.args().x) + 2, in.ops.args().y}, s.get()), Error);
  }
}

// Long rows and each dtype through select(): the pick is correct on inputs it never saw.
TEST(SoftmaxEngine, SelectedKernelsAreCorrect) {
  REQUIRE_GPU();
  EngineOptions o = quick({});
  o.use_cache = false;
  Engine e(o);
  Stream s;
  uint64_t seed = 500;
  for (const SoftmaxProblem& p : {SoftmaxProblem::make(16, 262144, DType::bf16), SoftmaxProblem::make(64, 32768, DType::fp32),
                                  SoftmaxProblem::make(2048, 1024, DType::fp16), SoftmaxProblem::make(3, 5, DType::bf16)}) {
    SCOPED_TRACE(p.str());
    TuneReport r;
    SoftmaxKernel k = e.select(p, &r);
    for (auto& c : r.results) EXPECT_NE(c.status, CandidateStatus::wrong) << c.backend << " " << c.name << ": " << c.reason;
    Input in(p, seed++, s.get());
    k.run(in.ops.args(), s.get());
    EXPECT_EQ(check(p, in, s.get()), "") << k.backend() << " " << k.name();
  }
}

// Every row of bench/suites/softmax.csv keeps native candidates that read x once (warp, block,
// cluster, smem) after the residency filter: the bandwidth target needs one of them.
TEST(SoftmaxCandidates, SuiteRowsKeepOnePassCandidates) {
  REQUIRE_GPU();
  DeviceInfo dev;
  GT_CUDA(cudaGetDevice(&dev.index));
  auto backend = make_native_softmax_backend(BackendContext{dev, Log()});
  for (int64_t cols : {1024, 4096, 16384, 32768, 65536, 131072, 262144})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32}) {
      const SoftmaxProblem p = SoftmaxProblem::make((int64_t(1) << 29) / cols, cols, in);
      int one_pass = 0;
      std::string names;
      for (auto& c : backend->candidates(p))
        if (c->name().rfind("online", 0) != 0) ++one_pass, names += " " + c->name();
      EXPECT_GE(one_pass, 2) << p.str() << ":" << names;
      if (in == DType::bf16) std::printf("  %s: %d one-pass native candidates:%s\n", p.str().c_str(), one_pass, names.c_str());
    }
}
