// Every candidate of every backend, on the problem matrix, against the float64 host reference.
//
// Shapes: a sparse cross of m, n, k over {1, 7, 64, 129, 4096} (each value in each position);
// on top of that, every layout, dtype pairing and epilogue, and odd leading dimensions.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <sstream>

#include "backends/backend.hpp"
#include "core/device.hpp"
#include "gpu/helpers.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;

namespace {

using gpu_test::Named;

std::vector<Named> problem_matrix() {
  const int64_t cross[][3] = {{1, 7, 64},   {7, 64, 129},   {64, 129, 4096}, {129, 4096, 1},  {4096, 1, 7},
                              {1, 4096, 129}, {4096, 129, 64}, {129, 1, 4096}, {64, 4096, 7},  {7, 129, 1}};
  std::vector<Named> out;
  auto add = [&](std::string what, GemmProblem p) { out.push_back({std::move(what), p}); };
  for (auto& s : cross) add("bf16 linear", GemmProblem::linear(s[0], s[1], s[2]));

  // Variations on two shapes: one tiny and odd, one with a long k.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 129, 64}, {129, 64, 4096}}) {
    const GemmProblem base = GemmProblem::linear(m, n, k);
    for (auto& [what, p] : gpu_test::layout_variants(base)) add(what, p);
    auto with = [&](std::string what, std::function<void(GemmProblem&)> f) {
      GemmProblem p = base;
      f(p);
      add(what, p);
    };
    with("fp16", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp16); });
    with("bf16->fp32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::bf16, DType::fp32); });
    with("fp16->fp32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp16, DType::fp32); });
    with("fp32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp32); });
    with("fp32 tf32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp32), p.tf32 = true; });
    with("e4m3 tensorwise", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3); });
    with("e4m3 unscaled", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3), p.scale = ScaleMode::none; });
    with("e4m3->fp32", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3, DType::fp32); });
    with("e4m3->fp16", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3, DType::fp16); });
    with("e5m2 x e4m3", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e5m2), p.b.dtype = DType::e4m3; });
    with("e4m3 rowwise", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3), p.scale = ScaleMode::rowwise; });
    with("alpha", [](auto& p) { p.alpha = -0.75f; });
    with("beta*C", [](auto& p) { p.beta = 0.5f; });
    with("bias", [](auto& p) { p.bias = true; });
    with("relu", [](auto& p) { p.act = Activation::relu; });
    with("bias+gelu", [](auto& p) { p.bias = true, p.act = Activation::gelu_tanh; });
    with("silu", [](auto& p) { p.act = Activation::silu; });
    with("alpha+beta*C+bias+silu", [](auto& p) { p.alpha = 1.5f, p.beta = -1, p.bias = true, p.act = Activation::silu; });
    with("e4m3 bias+relu", [](auto& p) {
      p = GemmProblem::linear(p.m, p.n, p.k, DType::e4m3), p.bias = true, p.act = Activation::relu;
    });
    with("odd ld", [](auto& p) { p.a.ld = p.k + 3, p.b.ld = p.k + 5, p.d.ld = p.n + 1; });
    with("odd ld beta*C", [](auto& p) { p.a.ld = p.k + 8, p.c.ld = p.n + 3, p.d.ld = p.n + 7, p.beta = 2; });
  }
  return out;
}

std::vector<std::unique_ptr<Backend>> all_backends() {
  BackendContext ctx = gpu_test::context(query_device(0), [](const std::string&) {});
  std::vector<std::unique_ptr<Backend>> out;
  out.push_back(make_cublaslt_backend(ctx));
  out.push_back(make_triton_backend(ctx));
  out.push_back(make_cutlass_backend(ctx));
  out.push_back(make_native_gemm_backend(ctx));
  return out;
}

}  // namespace

TEST(Candidates, EveryCandidateIsCorrectOnTheProblemMatrix) {
  auto backends = all_backends();
  Stream s;
  int checked = 0, problems_covered = 0;
  std::ostringstream unsupported;
  std::set<std::string> unavailable;
  for (auto& [what, p] : problem_matrix()) {
    SCOPED_TRACE(what + ": " + p.str());
    ASSERT_NO_THROW(p.validate());
    OperandSet ops(p, 0x1234 + uint64_t(p.m * 31 + p.n * 7 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    bool covered = false;
    for (auto& b : backends) {
      if (Verdict v = b->available(); !v) {
        ASSERT_NE(b->name(), "cublaslt") << v.reason;  // the one backend every GPU machine has
        unavailable.insert(b->name() + ": " + v.reason);
        continue;
      }
      if (Verdict v = b->supports(p); !v) {
        unsupported << "  " << b->name() << " / " << what << " " << p.str() << ": " << v.reason << "\n";
        continue;
      }
      auto cands = b->candidates(p);
      EXPECT_FALSE(cands.empty()) << b->name() << " supports but has no candidates";
      std::vector<std::string> failed = gpu_test::prepare_all(cands, 0);
      for (size_t i = 0; i < cands.size(); ++i) {
        auto& c = cands[i];
        SCOPED_TRACE(b->name() + " " + c->name());
        ASSERT_EQ(failed[i], "") << "a candidate the backend offered does not compile / load";
        ops.poison_d(s.get());
        ASSERT_NO_THROW(c->run(ops.args(), s.get()));
        s.sync();
        CheckResult r = gpu_test::check_d(p, ops.args(), ref);
        EXPECT_TRUE(r.ok) << r.reason;
        ++checked;
        covered = true;
      }
    }
    problems_covered += covered;
  }
  std::printf("checked %d candidate runs; %d problems covered\nunsupported:\n%s", checked, problems_covered,
              unsupported.str().c_str());
  for (auto& u : unavailable) std::printf("not available: %s\n", u.c_str());
  EXPECT_GT(checked, 0);
}
