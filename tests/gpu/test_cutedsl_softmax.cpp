// Every CuTe DSL softmax candidate against the float64 host reference, on the matrix of
// cutedsl_softmax_problems.hpp (rows of 1 to 1000000 columns: one pass, clusters of 2 to 16,
// the cluster re-read kind and online kernels; bf16 / fp16 / fp32 and mixed; packed, padded and odd ld
// (odd widths and odd ld: the virtual-column kinds, rows not on 16-byte packs); scales 1, 0.37, -0.5, 0 and
// -1.5), every row of a problem with 6 or more rows of one of six kinds (finite, one NaN, one
// +Inf, all -Inf, -Inf at every other column, one -Inf beside 1e4), as torch.softmax. Inputs
// random (never constant), outputs poisoned (NaN bits) before every run, the padding between
// cols and ld NaN in x and checked untouched in y. Candidates come from the backend, as the
// engine gets them: compiled here when the CuTe DSL is installed, else (the GPU machine) from
// precompiled artifacts (GEMMTUNE_CUTEDSL_LOAD_ONLY=1 and GEMMTUNE_ARTIFACTS; scripts/precompile.sh
// builds them). Skips without a CUDA device, and without the CuTe DSL or any artifact of the matrix.
#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/softmax.hpp"
#include "core/cuda.hpp"
#include "gpu/cutedsl_softmax_problems.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"

using namespace gemmtune;

namespace {

struct Tally {
  int problems = 0, unsupported = 0, runs = 0, failed = 0;
  int reread_runs = 0, c16_runs = 0;  // the issue-6 kinds: cluster re-read, one-pass cluster of 16
  int packed_runs = 0;                 // the packed kind (16-bit x kept packed in registers)
  int virt_runs = 0;                   // virtual columns (rows not on 16-byte packs)
};

// Every candidate of the backend for p; the results are compared on other threads while the
// next candidates run, and reported here (SCOPED_TRACE is per thread).
void check_problem(SoftmaxBackend& backend, const SoftmaxProblem& p, bool specials, uint64_t seed, Tally& tally) {
  SCOPED_TRACE(p.str() + (specials ? " (special rows)" : ""));
  ++tally.problems;
  if (Verdict v = backend.supports(p); !v) {
    std::printf("  %s: not supported: %s\n", p.str().c_str(), v.reason.c_str());
    ++tally.unsupported;
    return;
  }
  const gpu_test::SoftmaxHostInput in = gpu_test::softmax_host_input(p, specials, seed);
  DeviceBuffer dx(in.x.size()), dy(size_t(p.elems()) * size_of(p.out));
  GT_CUDA(cudaMemcpy(dx.get(), in.x.data(), in.x.size(), cudaMemcpyHostToDevice));
  Stream stream;

  auto cands = backend.candidates(p);
  EXPECT_FALSE(cands.empty());
  // Prepare (compile or load) all at once: the compile workers run in parallel.
  int device = 0;
  GT_CUDA(cudaGetDevice(&device));
  std::vector<std::future<std::string>> prepared = gpu_test::prepare_async(cands, device);
  gpu_test::SoftmaxOutputChecks checks(p, in);
  for (size_t i = 0; i < cands.size(); ++i) {
    auto& c = cands[i];
    if (std::string why = prepared[i].get(); !why.empty()) {
      ADD_FAILURE() << c->name() << ": prepare: " << why;
      ++tally.failed;
      continue;
    }
    GT_CUDA(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), stream.get()));  // NaN in every dtype
    try {
      c->run({dx.get(), dy.get()}, stream.get());
      stream.sync();
    } catch (const Error& e) {
      ADD_FAILURE() << c->name() << ": " << e.message();
      ++tally.failed;
      continue;
    }
    ++tally.runs;
    {
      const cutedsl::SoftmaxConfig cfg = cutedsl::SoftmaxConfig::parse(c->id());
      tally.reread_runs += cfg.online && cfg.cluster > 1;
      tally.c16_runs += !cfg.online && cfg.cluster == 16;
      tally.packed_runs += cfg.packed;
      tally.virt_runs += cfg.virt;
    }
    std::vector<uint8_t> y(dy.bytes());
    GT_CUDA(cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost));
    checks.add(c->name(), std::move(y));
  }
  tally.failed += checks.finish();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The backend, or why these tests cannot run here (non-empty: the caller skips): the CuTe DSL
// neither installed nor precompiled (no store), as the CUTLASS tests skip without their pack.
std::unique_ptr<SoftmaxBackend> open_backend(std::string* skip) {
  BackendContext ctx = gpu_test::context(gpu_test::current_device(), [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  auto b = make_cutedsl_softmax_backend(ctx);
  if (Verdict v = b->available(); !v) {
    *skip = "cutedsl not available: " + v.reason +
            " (on the GPU machine: GEMMTUNE_CUTEDSL_LOAD_ONLY=1 and GEMMTUNE_ARTIFACTS pointing at the precompiled store)";
    return nullptr;
  }
  std::printf("  cutedsl %s\n", b->version().c_str());
  return b;
}

#define OPEN_BACKEND(b)                                   \
  std::string b##_skip;                                    \
  auto b = open_backend(&b##_skip);                        \
  if (!b) GTEST_SKIP() << b##_skip

}  // namespace

TEST(CutedslSoftmax, EveryCandidateOfTheMatrixMatchesTheHostReference) {
  REQUIRE_GPU();
  OPEN_BACKEND(backend);
  // A store without any artifact of the matrix (load-only: e.g. only the bench's pack) cannot
  // run it: skip, as the CUTLASS tests do without their pack. A store holding part of it fails below.
  bool any = false;
  for (auto& [what, p] : cutedsl_softmax_test::problem_matrix()) any = any || bool(backend->supports(p));
  if (!any) GTEST_SKIP() << "no CuTe DSL softmax artifact for any problem of the matrix (scripts/precompile.sh builds them)";
  Tally t;
  uint64_t seed = 1;
  for (auto& [what, p] : cutedsl_softmax_test::problem_matrix()) {
    SCOPED_TRACE(what);
    check_problem(*backend, p, p.rows >= 6, seed++, t);
  }
  std::printf("  %d problems (%d not supported), %d candidate runs (%d cluster re-read, %d one-pass cluster of 16, "
              "%d packed, %d virtual columns), %d failed\n",
              t.problems, t.unsupported, t.runs, t.reread_runs, t.c16_runs, t.packed_runs, t.virt_runs, t.failed);
  EXPECT_EQ(t.unsupported, 0) << "every entry has candidates (load-only: precompile the matrix)";
  EXPECT_GT(t.runs, 300);
  EXPECT_GE(t.reread_runs, 20);
  EXPECT_GE(t.c16_runs, 20);
  EXPECT_GE(t.packed_runs, 30);
  EXPECT_GE(t.virt_runs, 100);
}

// A loaded candidate refuses misaligned pointers with an Error naming the problem, and a config
// that cannot run the problem is refused by load().
TEST(CutedslSoftmax, RefusesWhatItCannotRun) {
  REQUIRE_GPU();
  OPEN_BACKEND(backend);
  const SoftmaxProblem p =
      SoftmaxProblem::make(cutedsl_softmax_test::rows_for(1024), 1024, DType::bf16);  // in the matrix
  if (!backend->supports(p)) GTEST_SKIP() << "no artifact for " << p.str();
  auto cands = backend->candidates(p);
  ASSERT_FALSE(cands.empty());
  gpu_test::prepare(*cands[0]);
  DeviceBuffer x(size_t(p.elems()) * 2 + 16), y(size_t(p.elems()) * 2 + 16);
  GT_CUDA(cudaMemset(x.get(), 0, x.bytes()));
  EXPECT_THROW(cands[0]->run({static_cast<const char*>(x.get()) + 2, y.get()}, nullptr), Error);
  EXPECT_NO_THROW(cands[0]->run({x.get(), y.get()}, nullptr));
  GT_CUDA(cudaDeviceSynchronize());
  EXPECT_THROW(backend->load(SoftmaxProblem::make(64, 4096, DType::bf16), "p32_t256_v8x4"), Error);  // 1024 columns
  EXPECT_THROW(backend->load(p, "p33_t256_v8x4"), Error);
}
