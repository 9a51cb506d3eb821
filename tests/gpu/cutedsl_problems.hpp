// The problem matrix of the CuTe DSL GPU test (tests/gpu/test_cutedsl.cpp). Also used on the
// build machine to precompile its artifacts (tests/host/test_cutedsl_configs.cpp,
// CutedslPrecompile.GpuTestMatrix), since the GPU machine has no CuTe DSL to compile with.
//
// Every problem is one the backend supports (TMA's 16-byte rule on lda, ldb, ldd); the shapes
// cover partial tiles in M, N and K, a single k-block, long K (the mainloop ring wraps many
// times), more tiles than SMs (persistent CTAs take several tiles, clusters straddle the edge),
// decode shapes (swap-AB), every layout, dtype pairing and epilogue, odd leading dimensions.
// Host float64 reference cost stays under ~1 G multiply-adds per problem.
#pragma once

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"
#include "gpu/helpers.hpp"

namespace gemmtune::cutedsl_test {

using gpu_test::Named;

inline std::vector<Named> problem_matrix() {
  std::vector<Named> out;
  // Only valid problems: an invalid one fails here, naming the entry, in the host test
  // (CutedslProblems.EveryEntryIsValid) and on the build machine's precompile, not on the GPU.
  auto add = [&](std::string what, GemmProblem p) {
    try {
      p.validate();
    } catch (const Error& e) {
      GT_THROW("cutedsl_problems.hpp: \"" + what + "\" (" + p.str() + ") is not a valid problem: " + e.message());
    }
    out.push_back({std::move(what), p});
  };
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {7, 136, 64},      // one partial tile, one k-block
      {129, 264, 4096},  // partial tiles, long K
      {1000, 1032, 520}, // partial tiles everywhere, K not a multiple of the tile K
      {2048, 2048, 256}, // 256 tiles of 128x128: persistent CTAs take 2 each
      {256, 512, 8192},  // the mainloop ring wraps ~20 times per tile
      {4096, 64, 128},   // tall and thin
      {1, 4096, 512},    // decode: swap-AB
      {16, 1024, 1024},  // small m: swap-AB
      {64, 8192, 64},    // short K, wide N
  };
  for (auto [m, n, k] : shapes) add("bf16 linear", GemmProblem::linear(m, n, k));

  const GemmProblem base = GemmProblem::linear(136, 264, 520);  // m: a 16-byte multiple (col-major A, D)
  for (auto& [what, p] : gpu_test::layout_variants(base)) add(what, p);
  auto with = [&](std::string what, std::function<void(GemmProblem&)> f) {
    GemmProblem p = base;
    f(p);
    add(std::move(what), p);
  };
  with("fp16", [](auto& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp16); });
  with("fp16 A:col B:row", [](auto& p) {
    p = GemmProblem::linear(p.m, p.n, p.k, DType::fp16), p.a.layout = Layout::col, p.b.layout = Layout::row;
  });
  with("e4m3 tensorwise", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3); });
  with("e4m3 tensorwise long K", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 8192, DType::e4m3); });
  with("e4m3 unscaled", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3), p.scale = ScaleMode::none; });
  with("e4m3 rowwise", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3), p.scale = ScaleMode::rowwise; });
  with("e4m3 -> fp16", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3, DType::fp16); });
  with("e5m2 x e4m3", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e5m2), p.b.dtype = DType::e4m3; });
  with("e4m3 x e5m2", [](auto& p) { p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3), p.b.dtype = DType::e5m2; });
  with("e4m3 bias+relu", [](auto& p) {
    p = GemmProblem::linear(p.m, p.n, 1024, DType::e4m3), p.bias = true, p.act = Activation::relu;
  });
  with("e4m3 rowwise bias+gelu decode", [](auto& p) {
    p = GemmProblem::linear(8, 4096, 1024, DType::e4m3), p.scale = ScaleMode::rowwise, p.bias = true,
    p.act = Activation::gelu_tanh;
  });
  with("alpha", [](auto& p) { p.alpha = -0.75f; });
  with("beta*C", [](auto& p) { p.beta = 0.5f; });
  with("beta*C, C col-major, odd ldc", [](auto& p) { p.beta = -2, p.c.layout = Layout::col, p.c.ld = p.m + 3; });
  with("bias", [](auto& p) { p.bias = true; });
  with("relu", [](auto& p) { p.act = Activation::relu; });
  with("bias+gelu", [](auto& p) { p.bias = true, p.act = Activation::gelu_tanh; });
  with("bias+gelu, m = 129 (Engine.TunesCachesAndReloads)", [](auto& p) {
    p = GemmProblem::linear(129, 512, 1024), p.bias = true, p.act = Activation::gelu_tanh;
  });
  with("silu", [](auto& p) { p.act = Activation::silu; });
  with("alpha+beta*C+bias+silu", [](auto& p) { p.alpha = 1.5f, p.beta = -1, p.bias = true, p.act = Activation::silu; });
  with("decode bias+silu+beta*C", [](auto& p) {
    p = GemmProblem::linear(4, 2048, 512), p.bias = true, p.act = Activation::silu, p.beta = 1;
  });
  with("padded ld", [](auto& p) { p.a.ld = p.k + 8, p.b.ld = p.k + 16, p.d.ld = p.n + 8; });
  with("padded ld beta*C", [](auto& p) { p.a.ld = p.k + 8, p.c.ld = p.n + 3, p.d.ld = p.n + 24, p.beta = 2; });
  return out;
}

}  // namespace gemmtune::cutedsl_test
