// The problems every block-scaled FP8 candidate meets in tests/gpu/test_fp8_block.cpp. Also
// precompiled on the build machine for the GPU machine's CuTe DSL pack (tests/gpu/packs/
// fp8_block.jsonl, kept equal by the host test GpuTestPacks.Fp8BlockProblems).
//
// m, n not multiples of 128, k not a multiple of 128 (refused by cuBLASLt with a reason; computed
// by Triton and the CuTe DSL, whose k tile is the scale block), a padded scale leading dimension
// (ceil(k/128) % 4 != 0), one to sixteen k blocks (both parities: the CuTe DSL kernel promotes two
// k blocks per loop trip), more tiles than SMs with odd tile counts (persistent CTAs, clusters
// straddling the edge), decode (swap-AB), epilogues and output dtypes. Host float64 reference
// cost under ~0.5 G multiply-adds per problem.
#pragma once

#include <string>
#include <vector>

#include "gemmtune/problem.hpp"
#include "gpu/helpers.hpp"

namespace gemmtune::fp8_block_test {

inline GemmProblem block(int64_t m, int64_t n, int64_t k, DType out = DType::bf16) {
  GemmProblem p = GemmProblem::linear(m, n, k, DType::e4m3, out);
  p.scale = ScaleMode::block;
  return p;
}

inline std::vector<gpu_test::Named> problems() {
  std::vector<gpu_test::Named> out;
  auto add = [&](std::string what, GemmProblem p) { out.push_back({std::move(what), p}); };
  add("aligned 256x384x1024", block(256, 384, 1024));
  add("m, n not multiples of 128", block(200, 328, 768));
  add("ceil(k/128) = 5: sb's leading dimension padded to 8", block(136, 264, 640));
  add("decode m = 16, bias+gelu", [] {
    GemmProblem p = block(16, 1024, 2048);
    p.bias = true, p.act = Activation::gelu_tanh;
    return p;
  }());
  add("fp16 out, alpha, beta*C", [] {
    GemmProblem p = block(192, 256, 512, DType::fp16);
    p.alpha = 0.5f, p.beta = -1.0f;
    return p;
  }());
  add("fp32 out, silu", [] {
    GemmProblem p = block(128, 640, 1536, DType::fp32);
    p.act = Activation::silu;
    return p;
  }());
  add("k = 1040, not a multiple of 128", block(144, 200, 1040));
  add("k = 1000, rows not 16-byte aligned", block(72, 136, 1000));
  add("k = 96 < 128", block(64, 136, 96));
  add("e5m2 A x e4m3 B", [] {
    GemmProblem p = block(130, 256, 384);
    p.a.dtype = DType::e5m2;
    return p;
  }());
  add("B row-major (K x N)", [] {
    GemmProblem p = block(96, 272, 512);
    p.b.layout = Layout::row;
    return p;
  }());
  add("more tiles than SMs, odd tile counts, two k blocks", block(520, 1160, 256));
  add("m = 100 (swap-AB), bias+relu, padded lda / ldd", [] {
    GemmProblem p = block(100, 1536, 1024);
    p.bias = true, p.act = Activation::relu, p.a.ld = 1040, p.d.ld = 1544;
    return p;
  }());
  return out;
}

}  // namespace gemmtune::fp8_block_test
