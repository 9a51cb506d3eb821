// Compile-only test of the CUTLASS kernel template (no GPU needed): generates, builds with nvcc
// and loads a bf16 and an fp8 instance end to end through the backend's Builder, then checks
// that each .so exports the C entry points, reports the config it was asked for, and answers
// can_implement / workspace for a shape (host-side code only). Prints nvcc's wall time per
// instance.
//
// Exit codes: 0 passed, 1 failed, 77 skipped (no CUTLASS headers or no nvcc): registered with
// SKIP_RETURN_CODE 77. The store is a fresh temp directory (every run really compiles) unless
// $GEMMTUNE_CUTLASS_TEST_ARTIFACTS names one to reuse.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/cutlass/cutlass_backend.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::cutlass_backend;
namespace fs = std::filesystem;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void check_instance(Builder& builder, const GemmProblem& p, const Config& c) {
  InstanceSpec spec = InstanceSpec::of(c, p);
  std::printf("---- %s\n", spec.text().c_str());
  Built b = builder.build(spec);
  std::printf("nvcc: %.1f s%s, %zu bytes\n", b.compile_s, b.store_hit ? " (store hit)" : "", b.artifact.bytes->size());
  auto lib = Library::open(b.artifact, spec.text());  // dlsym of every entry point, ABI, config text
  expect(lib->config() == spec.text(), "gt_cutlass_config is the instance's text");

  GtCutlassArgs a{};
  a.abi_version = GT_CUTLASS_ABI_VERSION;
  a.sm_count = 132;
  a.m = p.m, a.n = p.n, a.k = p.k;
  a.lda = p.lda(), a.ldb = p.ldb(), a.ldc = p.ldd(), a.ldd = p.ldd();
  a.alpha = 1, a.beta = 0;
  expect(lib->can_implement(&a) == GT_CUTLASS_OK, std::string("can_implement(") + p.str() + "): " + lib->status_text(lib->can_implement(&a)));
  expect(lib->workspace(&a) < (size_t(1) << 30), "workspace size is sane: " + std::to_string(lib->workspace(&a)));
  GtCutlassArgs bad = a;
  bad.lda = p.lda() + 1;  // breaks TMA's 16-byte rule
  expect(lib->can_implement(&bad) == GT_CUTLASS_MISALIGNED, "a misaligned lda is refused");
  bad = a;
  bad.abi_version = 999;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ABI, "a foreign ABI version is refused");
  GtCutlassArgs norun = a;  // null pointers: run() refuses before touching CUDA
  expect(lib->run(&norun, nullptr, nullptr) == GT_CUTLASS_BAD_ARGS, "run() with null pointers is refused");
}

}  // namespace

int main() {
  fs::path root;
  bool temp = false;
  if (const char* d = std::getenv("GEMMTUNE_CUTLASS_TEST_ARTIFACTS"); d && *d) {
    root = d;
  } else {
    root = fs::temp_directory_path() / ("gemmtune-cutlass-compile-" + std::to_string(getpid()));
    temp = true;
  }
  BuilderOptions opt = BuilderOptions::defaults([](const std::string& l) { std::printf("%s\n", l.c_str()); });
  opt.artifacts = root;
  opt.jobs = 1;  // one nvcc at a time: an SM90 instance takes ~3 GB
  int rc = 0;
  try {
    Builder builder(opt);
    if (Verdict v = builder.available(); !v || builder.load_only()) {
      std::printf("SKIP: CUTLASS backend cannot build here: %s\n", v ? "load-only" : v.reason.c_str());
      rc = 77;
    } else {
      std::printf("toolchain: %s\n", builder.version().c_str());
      // bf16 nn.Linear with bias and GELU, cooperative 128x128x64.
      GemmProblem bf16 = GemmProblem::linear(4096, 4096, 4096);
      bf16.bias = true, bf16.act = Activation::gelu_tanh;
      check_instance(builder, bf16, Config{128, 128, 64, 1, 1, Schedule::cooperative, false});
      // fp8 e4m3 -> bf16, tensorwise scales, ping-pong, cluster 2x1, swap-AB (decode-like shape).
      GemmProblem fp8 = GemmProblem::linear(16, 4096, 4096, DType::e4m3);
      fp8.scale = ScaleMode::tensorwise;
      check_instance(builder, fp8, Config{64, 128, 128, 2, 1, Schedule::pingpong, true});

      // A machine without nvcc (the GPU machine) reads the same store as a kernel pack.
      setenv("GEMMTUNE_NVCC", "/nonexistent/nvcc", 1);
      Builder pack(opt);
      expect(pack.available() && pack.load_only(), "without nvcc the store is usable load-only");
      InstanceSpec spec = InstanceSpec::of(Config{64, 128, 128, 2, 1, Schedule::pingpong, true}, fp8);
      expect(pack.key(spec) == builder.key(spec), "load-only computes the same artifact key");
      expect(pack.cached(spec) && pack.build(spec).store_hit, "load-only finds the built instance");
      InstanceSpec absent = InstanceSpec::of(Config{128, 192, 128, 1, 1, Schedule::cooperative, false}, fp8);
      expect(!pack.cached(absent), "load-only reports an instance it lacks as not cached");
      rc = failures ? 1 : 0;
    }
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    rc = 1;
  }
  if (temp) {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::printf("%s\n", rc == 0 ? "PASSED" : rc == 77 ? "SKIPPED" : "FAILED");
  return rc;
}
