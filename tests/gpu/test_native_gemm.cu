// The native decode GEMM kernels: every config decode_configs offers (up to 64 per problem) on a
// matrix of decode shapes, dtypes and epilogues, against the float64 host reference, D poisoned
// before each run; and the same result on every run (the k splits are summed in a fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "backends/native/decode_gemm.hpp"
#include "core/device.hpp"
#include "gpu/helpers.hpp"
#include "support/host_reference.hpp"
#include "tune/gpu_bench.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;

namespace {

std::vector<gpu_test::Named> decode_matrix() {
  std::vector<gpu_test::Named> out;
  auto add = [&](std::string what, GemmProblem p) { out.push_back({std::move(what), p}); };
  // m over every token-tile boundary, n over partial CTAs and one row, k over partial chunks
  // (8 bf16 = one 16-byte piece; 1000 = 31.25 chunks), and a long k split many ways.
  for (int64_t m : {1, 3, 8, 9, 16})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{129, 1000}, {1, 64}, {4096, 8}, {1280, 8192}}) {
      add("bf16", GemmProblem::linear(m, n, k));
      add("e4m3 tensorwise", GemmProblem::linear(m, n, 2 * k, DType::e4m3));
    }
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{5, 300, 512}, {16, 96, 2048}}) {
    const GemmProblem base = GemmProblem::linear(m, n, k);
    auto with = [&](std::string what, std::function<void(GemmProblem&)> f) {
      GemmProblem p = base;
      f(p);
      add(what, p);
    };
    with("fp16", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp16); });
    with("bf16->fp32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::bf16, DType::fp32); });
    with("e4m3->fp16 unscaled", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3, DType::fp16), p.scale = ScaleMode::none; });
    with("e4m3 rowwise", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3), p.scale = ScaleMode::rowwise; });
    with("alpha+beta*C+bias+silu", [](auto& p) { p.alpha = 1.5f, p.beta = -1, p.bias = true, p.act = Activation::silu; });
    with("bias+gelu", [](auto& p) { p.bias = true, p.act = Activation::gelu_tanh; });
    with("relu", [](auto& p) { p.act = Activation::relu; });
    with("odd ld", [](auto& p) { p.a.ld = p.k + 8, p.b.ld = p.k + 24, p.d.ld = p.n + 1; });
    with("odd ld beta*C", [](auto& p) { p.a.ld = p.k + 8, p.c.ld = p.n + 3, p.d.ld = p.n + 7, p.beta = 2; });
  }
  return out;
}

}  // namespace

TEST(NativeGemm, EveryConfigIsCorrectOnTheDecodeMatrix) {
  const DeviceInfo dev = query_device(0);
  Stream s;
  int checked = 0;
  for (auto& [what, p] : decode_matrix()) {
    SCOPED_TRACE(what + ": " + p.str());
    ASSERT_EQ(native::decode_unsupported(p), "");
    OperandSet ops(p, 0x5151 + uint64_t(p.m * 31 + p.n * 7 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    const auto cfgs = native::decode_configs(p, dev.sm_count, 64);
    ASSERT_FALSE(cfgs.empty());
    for (const auto& c : cfgs) {
      SCOPED_TRACE(c.name());
      if (std::string why = native::decode_device_check(c, p); !why.empty()) {
        ADD_FAILURE() << "offered but cannot launch: " << why;
        continue;
      }
      ops.poison_d(s.get());
      ASSERT_NO_THROW(native::run_decode_gemm(c, p, ops.args(), s.get()));
      s.sync();
      CheckResult r = gpu_test::check_d(p, ops.args(), ref);
      EXPECT_TRUE(r.ok) << r.reason;
      ++checked;
    }
  }
  std::printf("checked %d native decode runs\n", checked);
}

TEST(NativeGemm, KSplitsAreSummedInAFixedOrder) {
  const DeviceInfo dev = query_device(0);
  Stream s;
  const GemmProblem p = GemmProblem::linear(16, 1280, 8192);
  OperandSet ops(p, 77, s.get());
  const size_t bytes = size_t(p.elems_d()) * size_of(p.d.dtype);
  for (const auto& c : native::decode_configs(p, dev.sm_count, 64)) {
    if (c.k_splits() == 1) continue;
    SCOPED_TRACE(c.name());
    ASSERT_EQ(native::decode_device_check(c, p), "");
    std::vector<uint8_t> first(bytes), again(bytes);
    for (int run = 0; run < 3; ++run) {
      ops.poison_d(s.get());
      native::run_decode_gemm(c, p, ops.args(), s.get());
      GT_CUDA(cudaMemcpyAsync(run ? again.data() : first.data(), ops.args().d, bytes, cudaMemcpyDeviceToHost, s.get()));
      s.sync();
      if (run) EXPECT_EQ(std::memcmp(first.data(), again.data(), bytes), 0) << "run " << run << " differs from run 0";
    }
  }
}

// ---- the probe (bench/decode-native-probe.sh; never run by default) ---------------------------
//
// For each decode problem of the llm-layers suite (m in GEMMTUNE_PROBE_M, default 1,16,64; bf16
// and e4m3): every native config of decode_configs (64 at most), every cuBLASLt candidate, and
// a streaming read of W's bytes (our own kernel, best of six launches shapes), timed through
// GpuBench (cold L2, spin, events) in interleaved rounds, medians. Prints one line per problem:
// the stream time, cuBLASLt's default and best, the best native config.

namespace {

// Reads `bytes` of src with 16-byte loads, UNROLL loads in flight per thread; writes dst[0]
// only on an impossible xor, so that the loads stay.
template <int UNROLL>
__global__ void stream_read_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t* dst) {
  uint32_t x = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(src + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) dst[0] = x;
}

// A streaming read of args.b's bytes as a GEMM "candidate", so GpuBench times it as it times the kernels.
class StreamRead final : public detail::CandidateFor<GemmOp> {
 public:
  StreamRead(const GemmProblem& p, int blocks, int threads, int unroll) : p_(p), blocks_(blocks), threads_(threads), unroll_(unroll) {}
  std::string backend() const override { return "stream"; }
  std::string id() const override { return name(); }
  std::string name() const override {
    return "stream_b" + std::to_string(blocks_) + "_t" + std::to_string(threads_) + "_u" + std::to_string(unroll_);
  }
  void run(const GemmArgs& a, cudaStream_t s) override {
    const int64_t n16 = p_.elems_b() * int64_t(size_of(p_.b.dtype)) / 16;
    auto* src = static_cast<const uint4*>(a.b);
    auto* dst = static_cast<uint32_t*>(a.d);
    if (unroll_ == 4) stream_read_kernel<4><<<blocks_, threads_, 0, s>>>(src, n16, dst);
    else stream_read_kernel<8><<<blocks_, threads_, 0, s>>>(src, n16, dst);
    GT_CUDA(cudaGetLastError());
  }

 private:
  GemmProblem p_;
  int blocks_, threads_, unroll_;
};

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = std::min(s.find(sep, b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

TEST(NativeGemmProbe, DISABLED_TimeEveryConfig) {
  const DeviceInfo dev = query_device(0);
  BackendContext ctx = gpu_test::context(dev, {});
  ctx.max_configs = 64;
  auto lt = make_cublaslt_backend(ctx);
  auto native_backend = make_native_gemm_backend(ctx);
  const auto ms = split_list(env_or("GEMMTUNE_PROBE_M", "1,16,64"), ',');
  const std::vector<std::string> variants = {"native"};
  const int rounds = std::atoi(env_or("GEMMTUNE_PROBE_ROUNDS", "7").c_str());
  const std::pair<int64_t, int64_t> layers[] = {{6144, 4096}, {4096, 4096},  {28672, 4096}, {4096, 14336}, {128256, 4096},
                                                {10240, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}, {1280, 8192},
                                                {8192, 1024}, {7168, 8192},  {8192, 3584}};
  Stream stream;
  TuneOptions opt;
  opt.warmup_ms = 30;
  std::printf("%-34s %8s %8s %8s", "problem", "stream", "lt_dflt", "lt_best");
  for (auto& v : variants) std::printf(" %8s %-26s", v.c_str(), "config");
  std::printf("\n");
  std::map<std::string, std::vector<double>> ratios;  // per (dtype m group): best / stream
  for (const char* dts : {"bf16", "e4m3"})
    for (const auto& mtext : ms)
      for (auto [n, k] : layers) {
        const GemmProblem p = GemmProblem::linear(std::atoll(mtext.c_str()), n, k, parse_dtype(dts));
        std::vector<std::unique_ptr<detail::CandidateFor<GemmOp>>> owned;
        std::vector<std::string> group;  // "stream", "lt", "lt_default", "native"
        for (int b : {dev.sm_count * 4, dev.sm_count * 8, dev.sm_count * 16})
          for (int u : {4, 8}) {
            owned.push_back(std::make_unique<StreamRead>(p, b, 512, u));
            group.push_back("stream");
          }
        for (auto& c : lt->candidates(p)) {
          group.push_back(c->is_default() ? "lt_default" : "lt");
          owned.push_back(std::move(c));
        }
        for (const auto& c : native::decode_configs(p, dev.sm_count, 64)) {
          if (!native::decode_device_check(c, p).empty()) continue;
          owned.push_back(native_backend->load(p, c.name()));
          group.push_back("native");
        }
        std::vector<detail::CandidateFor<GemmOp>*> cands;
        for (auto& c : owned) {
          gpu_test::prepare(*c);
          cands.push_back(c.get());
        }
        GpuBench<GemmOp> bench(p, cands, opt, dev, stream);
        std::vector<std::vector<double>> t(cands.size());
        for (int r = 0; r < rounds; ++r)
          for (size_t i = 0; i < cands.size(); ++i) t[i].push_back(bench.sample(i));
        std::map<std::string, std::pair<double, std::string>> best;
        for (size_t i = 0; i < cands.size(); ++i) {
          std::sort(t[i].begin(), t[i].end());
          const double med = t[i][t[i].size() / 2];
          auto& b = best[group[i]];
          if (b.second.empty() || med < b.first) b = {med, cands[i]->name()};
        }
        const double lt_best = std::min(best["lt"].second.empty() ? 1e30 : best["lt"].first, best["lt_default"].first);
        std::printf("%-34s %8.2f %8.2f %8.2f", (std::string(dts) + " " + mtext + "x" + std::to_string(n) + "x" + std::to_string(k)).c_str(),
                    best["stream"].first, best["lt_default"].first, lt_best);
        for (auto& v : variants) {
          std::printf(" %8.2f %-26s", best[v].first, best[v].second.c_str());
          ratios[std::string(dts) + " m=" + mtext + " " + v].push_back(best[v].first / best["stream"].first);
        }
        ratios[std::string(dts) + " m=" + mtext + " lt"].push_back(lt_best / best["stream"].first);
        std::printf("\n");
        std::fflush(stdout);
      }
  std::printf("\ngeomean time / stream time:\n");
  for (auto& [key, v] : ratios) {
    double s = 0;
    for (double x : v) s += std::log(x);
    std::printf("  %-24s %.3f (%zu problems)\n", key.c_str(), std::exp(s / double(v.size())), v.size());
  }
}
