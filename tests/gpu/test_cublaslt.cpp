// The cublaslt backend's torch baseline (docs/cublaslt.md): for every op and dtype it is among
// the candidates, it is the one is_default candidate, no other candidate repeats its algo, it
// round-trips through load(), and it is correct both on the engine's (256-byte-aligned) buffers
// and on pointers aligned to 16 bytes only (where it runs its fallback algo).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <set>

#include "backends/backend.hpp"
#include "backends/cublaslt/lt.hpp"
#include "core/device.hpp"
#include "gpu/helpers.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;

namespace {

std::vector<gpu_test::Named> baseline_problems() {
  std::vector<gpu_test::Named> out;
  auto add = [&](std::string what, GemmProblem p) { out.push_back({std::move(what), p}); };
  // The shapes of issue 14: fp8 nn.Linear at m = 64, 128.
  for (int64_t m : {64, 128}) {
    add("e4m3 tensorwise", GemmProblem::linear(m, 4096, 4096, DType::e4m3));
    add("e4m3 tensorwise", GemmProblem::linear(m, 1280, 8192, DType::e4m3));
  }
  add("bf16 torch.mm", GemmProblem::linear(64, 4096, 4096));
  GemmProblem p = GemmProblem::linear(128, 6144, 4096);
  p.bias = true;
  add("bf16 addmm bias", p);
  p = GemmProblem::linear(64, 4096, 4096, DType::fp16);
  p.bias = true, p.act = Activation::gelu_tanh;
  add("fp16 bias+gelu", p);
  p = GemmProblem::linear(7, 129, 64, DType::fp16);
  p.beta = 0.5f;
  add("fp16 beta*C (odd shape)", p);
  add("fp32", GemmProblem::linear(64, 512, 256, DType::fp32));
  p = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  p.bias = true;
  add("e4m3 bias", p);
  return out;
}

size_t bytes(int64_t rows, int64_t ld, DType t) { return size_t(rows) * size_t(ld) * size_of(t); }

// The operands of `ops` copied to device buffers at a 16-byte offset from a 256-byte boundary.
struct Misaligned {
  static constexpr size_t kOffset = 16;
  Misaligned(const GemmProblem& p, const GemmArgs& src) {
    GT_CHECK(p.a.layout == Layout::row && p.b.layout == Layout::col && p.d.layout == Layout::row,
             "test: linear layout only");
    args = src;
    args.a = copy(src.a, bytes(p.m, p.lda(), p.a.dtype));
    args.b = copy(src.b, bytes(p.n, p.ldb(), p.b.dtype));
    if (p.uses_c()) args.c = copy(src.c, bytes(p.m, p.ldc(), p.c.dtype));
    if (p.bias) args.bias = copy(src.bias, bytes(1, p.n, p.d.dtype));
    d_bytes = bytes(p.m, p.ldd(), p.d.dtype);
    args.d = const_cast<void*>(copy(src.d, d_bytes));
  }
  const void* copy(const void* from, size_t n) {
    bufs.emplace_back(n + 256);
    char* to = bufs.back().as<char>() + kOffset;
    GT_CUDA(cudaMemcpy(to, from, n, cudaMemcpyDeviceToDevice));
    return to;
  }
  void poison_d() { GT_CUDA(cudaMemset(args.d, 0xff, d_bytes)); }
  std::deque<DeviceBuffer> bufs;
  GemmArgs args;
  size_t d_bytes = 0;
};

}  // namespace

TEST(CublasLtBaseline, TorchsConfigurationIsTheDefaultCandidateAndCorrect) {
  BackendContext ctx = gpu_test::context(query_device(0), [](const std::string&) {});
  auto backend = make_cublaslt_backend(ctx);
  ASSERT_TRUE(backend->available()) << backend->available().reason;
  Stream s;
  for (auto& [what, p] : baseline_problems()) {
    SCOPED_TRACE(what + ": " + p.str());
    ASSERT_NO_THROW(p.validate());
    if (Verdict v = backend->supports(p); !v) {
      ADD_FAILURE() << "cublaslt does not support " << p.str() << ": " << v.reason;
      continue;
    }
    auto cands = backend->candidates(p);
    ASSERT_FALSE(cands.empty());
    std::vector<size_t> defaults;
    std::set<std::string> ids;
    for (size_t i = 0; i < cands.size(); ++i) {
      if (cands[i]->is_default()) defaults.push_back(i);
      EXPECT_TRUE(ids.insert(cands[i]->id()).second) << "repeated id " << cands[i]->id();
    }
    ASSERT_EQ(defaults.size(), 1u) << "exactly one baseline";
    auto& base = cands[defaults[0]];
    ASSERT_TRUE(lt::is_torch_id(base->id())) << base->id();
    EXPECT_EQ(base->name().rfind("torch ", 0), 0u) << base->name();
    std::printf("%-24s %-44s %zu candidates; baseline: %s\n", what.c_str(), p.str().c_str(), cands.size(),
                base->name().c_str());
    // Same algo config => one candidate: no plain candidate runs the baseline's main algo.
    cublasLtMatmulAlgo_t main, fallback;
    lt::parse_torch_id(base->id(), main, fallback);
    EXPECT_EQ(ids.count(lt::algo_to_hex(main)), 0u) << "the baseline's algo is listed twice";

    std::vector<std::string> failed = gpu_test::prepare_all(cands, 0);
    ASSERT_EQ(failed[defaults[0]], "");
    OperandSet ops(p, 0x5eed + uint64_t(p.m * 31 + p.n * 7 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));

    // The engine's buffers (cudaMalloc: 256-byte aligned): torch's own pick.
    ops.poison_d(s.get());
    ASSERT_NO_THROW(base->run(ops.args(), s.get()));
    s.sync();
    CheckResult r = gpu_test::check_d(p, ops.args(), ref);
    EXPECT_TRUE(r.ok) << "aligned: " << r.reason;

    // Pointers 16 bytes past a 256-byte boundary: the fallback algo, still correct.
    Misaligned mis(p, ops.args());
    mis.poison_d();
    ASSERT_NO_THROW(base->run(mis.args, s.get()));
    s.sync();
    r = gpu_test::check_d(p, mis.args, ref);
    EXPECT_TRUE(r.ok) << "16-byte aligned: " << r.reason;

    // From the cache: load() rebuilds the same baseline.
    auto loaded = backend->load(p, base->id());
    EXPECT_EQ(loaded->id(), base->id());
    EXPECT_TRUE(loaded->is_default());
    gpu_test::prepare(*loaded);
    ops.poison_d(s.get());
    ASSERT_NO_THROW(loaded->run(ops.args(), s.get()));
    s.sync();
    r = gpu_test::check_d(p, ops.args(), ref);
    EXPECT_TRUE(r.ok) << "loaded: " << r.reason;
  }
}
