// Manual compile matrix of the CUTLASS kernel template (NOT a ctest: each instance is ~40-55 s
// of nvcc and ~3.5 GB; CI runs only tests/cutlass/compile_instances.cpp). Builds one instance
// per named case through the backend's own path (problem_verdict -> check -> InstanceSpec ->
// Builder::build -> Library::open), i.e. the same generated TU and nvcc flags as the engine,
// and prints "RESULT <case> PASS|FAIL|REFUSED <nvcc s> <detail>". Results: docs/cutlass.md,
// "Compiled on the CPU, 2026-11-30".
//
// Build by hand against an existing build tree (one nvcc at a time on a small machine):
//   c++ -O2 -std=gnu++20 -Isrc -Iinclude -isystem /usr/local/cuda/include \
//     tests/cutlass/compile_matrix.cpp -o /tmp/compile_matrix build/libgemmtune.a \
//     /usr/local/cuda/lib/libcudart_static.a /usr/local/cuda/lib/libcublasLt.so \
//     /usr/lib/x86_64-linux-gnu/libsqlite3.a -ldl -lpthread -lrt
//   GEMMTUNE_CUTLASS_TEST_ARTIFACTS=/tmp/cm-store /tmp/compile_matrix fp16_beta
// With no case name it lists the cases.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "backends/cutlass/cutlass_backend.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::cutlass_backend;

namespace {

struct Case {
  const char* name;
  GemmProblem p;
  Config c;
};

Case make(const char* name) {
  const std::string n = name;
  if (n == "fp16_beta") {  // fp16 in/out, D = alpha*AB + beta*C
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096, DType::fp16);
    p.beta = 1.0f;
    return {name, p, Config{128, 128, 64, 1, 1, Schedule::cooperative, false}};
  }
  if (n == "bf16_fp32out") {  // bf16 in, fp32 out
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096, DType::bf16, DType::fp32);
    return {name, p, Config{128, 128, 64, 1, 1, Schedule::cooperative, false}};
  }
  if (n == "e5m2_e4m3") {  // fp8 mixed, tensorwise, bf16 out
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
    p.a.dtype = DType::e5m2;
    p.scale = ScaleMode::tensorwise;
    return {name, p, Config{128, 128, 128, 1, 1, Schedule::cooperative, false}};
  }
  if (n == "bf16_colD") {  // bf16, column-major D, with bias (a row broadcast over a col-major D)
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
    p.d.layout = Layout::col, p.c.layout = Layout::col;
    p.bias = true;
    return {name, p, Config{128, 128, 64, 1, 1, Schedule::cooperative, false}};
  }
  if (n == "cluster1x2") {  // bf16, cluster 1x2
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
    return {name, p, Config{128, 128, 64, 1, 2, Schedule::cooperative, false}};
  }
  if (n == "silu") {  // bf16, SiLU, ping-pong
    GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
    p.act = Activation::silu;
    return {name, p, Config{64, 128, 64, 1, 1, Schedule::pingpong, false}};
  }
  if (n == "fp16_swap_colDC") {  // swap-AB with column-major C and D, beta*C and bias (decode shape)
    GemmProblem p = GemmProblem::linear(16, 4096, 4096, DType::fp16);
    p.d.layout = Layout::col, p.c.layout = Layout::col;
    p.beta = 0.5f, p.bias = true;
    return {name, p, Config{64, 64, 64, 1, 1, Schedule::pingpong, true}};
  }
  GT_THROW(std::string("unknown case ") + name +
           " (cases: fp16_beta bf16_fp32out e5m2_e4m3 bf16_colD cluster1x2 silu fp16_swap_colDC)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("cases: fp16_beta bf16_fp32out e5m2_e4m3 bf16_colD cluster1x2 silu fp16_swap_colDC\n");
    return 0;
  }
  const char* store = std::getenv("GEMMTUNE_CUTLASS_TEST_ARTIFACTS");
  if (!store || !*store) {
    std::printf("set GEMMTUNE_CUTLASS_TEST_ARTIFACTS to a (temp) store directory\n");
    return 2;
  }
  BuilderOptions opt = BuilderOptions::defaults([](const std::string& l) { std::printf("%s\n", l.c_str()); });
  opt.artifacts = store;
  opt.jobs = 1;
  try {
    Case k = make(argv[1]);
    Builder builder(opt);
    if (Verdict v = builder.available(); !v || builder.load_only()) {
      std::printf("RESULT %s SKIP - %s\n", k.name, v ? "load-only" : v.reason.c_str());
      return 77;
    }
    if (Verdict v = problem_verdict(k.p); !v) {
      std::printf("RESULT %s REFUSED - problem_verdict: %s\n", k.name, v.reason.c_str());
      return 0;
    }
    if (Verdict v = check(k.c, k.p); !v) {
      std::printf("RESULT %s REFUSED - check: %s\n", k.name, v.reason.c_str());
      return 0;
    }
    InstanceSpec spec = InstanceSpec::of(k.c, k.p);
    std::printf("---- %s\n%s", spec.text().c_str(), spec.source().c_str());
    Built b = builder.build(spec);
    auto lib = Library::open(b.artifact, spec.text());
    GtCutlassArgs a{};
    a.abi_version = GT_CUTLASS_ABI_VERSION;
    a.sm_count = 132;
    a.m = k.p.m, a.n = k.p.n, a.k = k.p.k;
    a.lda = k.p.lda(), a.ldb = k.p.ldb(), a.ldc = k.p.ldc(), a.ldd = k.p.ldd();
    a.alpha = 1, a.beta = k.p.beta;
    const int ci = lib->can_implement(&a);
    const bool ok = lib->config() == spec.text() && ci == GT_CUTLASS_OK;
    std::printf("RESULT %s %s %.1f %s; can_implement: %s; %zu bytes\n", k.name, ok ? "PASS" : "FAIL", b.compile_s,
                spec.text().c_str(), lib->status_text(ci), b.artifact.bytes->size());
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::printf("RESULT %s FAIL - %s\n", argv[1], e.what());
    return 1;
  }
}
