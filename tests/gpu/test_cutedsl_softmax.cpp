// Every CuTe DSL softmax candidate against the float64 host reference, on the matrix of
// cutedsl_softmax_problems.hpp (rows of 1 to 1000000 columns: one pass, clusters of 2 to 16,
// the cluster re-read kind and online kernels; bf16 / fp16 / fp32 and mixed; packed, padded and odd ld; scales 1, 0.37, -0.5, 0 and
// -1.5), every row of a problem with 6 or more rows of one of six kinds (finite, one NaN, one
// +Inf, all -Inf, -Inf at every other column, one -Inf beside 1e4), as torch.softmax. Inputs
// random (never constant), outputs poisoned (NaN bits) before every run, the padding between
// cols and ld NaN in x and checked untouched in y. Candidates come from the backend, as the
// engine gets them: compiled here when the CuTe DSL is installed, else (the GPU machine) from
// precompiled artifacts (GEMMTUNE_CUTEDSL_LOAD_ONLY=1 and GEMMTUNE_ARTIFACTS; scripts/
// precompile-cutedsl.sh builds them). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <future>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/softmax.hpp"
#include "core/cuda.hpp"
#include "gpu/cutedsl_softmax_problems.hpp"
#include "support/gpu.hpp"
#include "support/host_softmax.hpp"

using namespace gemmtune;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Row r of `v` (packed [rows, cols] doubles) becomes special by r % 6:
//   0 finite   1 one NaN   2 one +Inf   3 all -Inf   4 -Inf at every other column (column 0
//   stays finite)   5 one -Inf and one 1e4 (every other entry underflows to 0)
void make_special(std::vector<double>& v, int64_t cols, int64_t r, std::mt19937_64& rng) {
  double* row = &v[size_t(r * cols)];
  const int64_t at = int64_t(rng() % uint64_t(cols));
  switch (r % 6) {
    case 1:
      row[at] = kNaN;
      break;
    case 2:
      row[at] = kInf;
      break;
    case 3:
      for (int64_t c = 0; c < cols; ++c) row[c] = -kInf;
      break;
    case 4:
      for (int64_t c = 1; c < cols; c += 2) row[c] = -kInf;
      break;
    case 5:
      row[at] = -kInf;
      row[(at + 1) % cols] = 1e4;
      break;
    default:
      break;
  }
}

DeviceInfo this_device() {
  DeviceInfo dev;
  int device = 0;
  GT_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  GT_CUDA(cudaGetDeviceProperties(&prop, device));
  dev.index = device, dev.name = prop.name, dev.sm_count = prop.multiProcessorCount;
  dev.cc_major = prop.major, dev.cc_minor = prop.minor;
  return dev;
}

struct Tally {
  int problems = 0, unsupported = 0, runs = 0, failed = 0;
  int reread_runs = 0, c16_runs = 0;  // the issue-6 kinds: cluster re-read, one-pass cluster of 16
  int packed_runs = 0;                 // the packed kind (16-bit x kept packed in registers)
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
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  std::vector<double> values(size_t(p.rows * p.cols));
  for (double& v : values) v = dist(rng);
  if (specials)
    for (int64_t r = 0; r < p.rows; ++r) make_special(values, p.cols, r, rng);
  const int64_t ld = p.row_stride();
  std::vector<uint8_t> x(size_t(p.elems()) * size_of(p.in));
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < ld; ++c)
      host::store(p.in, x.data(), r * ld + c, c < p.cols ? values[size_t(r * p.cols + c)] : kNaN);
  const host::SoftmaxRef ref = host::host_softmax(p, x.data());
  DeviceBuffer dx(x.size()), dy(size_t(p.elems()) * size_of(p.out));
  GT_CUDA(cudaMemcpy(dx.get(), x.data(), x.size(), cudaMemcpyHostToDevice));
  Stream stream;

  auto cands = backend.candidates(p);
  EXPECT_FALSE(cands.empty());
  // Prepare (compile or load) all at once: the compile workers run in parallel.
  int device = 0;
  GT_CUDA(cudaGetDevice(&device));
  std::vector<std::future<std::string>> prepared;
  for (auto& c : cands)
    prepared.push_back(std::async(std::launch::async, [&c, device]() -> std::string {
      try {
        GT_CUDA(cudaSetDevice(device));
        c->prepare();
        return {};
      } catch (const Error& e) {
        return e.message();
      }
    }));
  struct Outcome {
    std::string name;
    host::SoftmaxCheck res;
    bool pad_ok = true;
  };
  std::deque<std::future<Outcome>> pending;
  const size_t max_pending = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 16);
  auto drain = [&](size_t keep) {
    while (pending.size() > keep) {
      const Outcome o = pending.front().get();
      pending.pop_front();
      EXPECT_TRUE(o.res.ok) << o.name << ": " << o.res.reason;
      EXPECT_TRUE(o.pad_ok) << o.name << ": wrote into the padding between cols and ld";
      tally.failed += !(o.res.ok && o.pad_ok);
    }
  };
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
    }
    std::vector<uint8_t> y(dy.bytes());
    GT_CUDA(cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost));
    pending.push_back(std::async(std::launch::async, [&p, &x, &ref, ld, y = std::move(y), name = c->name()] {
      Outcome o{name, host::softmax_compare(p, x.data(), y.data(), ref), true};
      const size_t es = size_of(p.out);
      for (int64_t r = 0; r < p.rows && o.pad_ok; ++r)
        for (size_t b = size_t(r * ld + p.cols) * es; b < size_t((r + 1) * ld) * es; ++b)
          if (y[b] != 0xff) {
            o.pad_ok = false;
            break;
          }
      return o;
    }));
    drain(max_pending - 1);
  }
  drain(0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

std::unique_ptr<SoftmaxBackend> backend_or_skip() {
  BackendContext ctx{this_device(), [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); }};
  auto b = make_cutedsl_softmax_backend(ctx);
  if (Verdict v = b->available(); !v) {
    ADD_FAILURE() << "cutedsl not available: " << v.reason
                  << " (on the GPU machine: GEMMTUNE_CUTEDSL_LOAD_ONLY=1 and GEMMTUNE_ARTIFACTS pointing at the "
                     "precompiled store)";
    return nullptr;
  }
  std::printf("  cutedsl %s\n", b->version().c_str());
  return b;
}

}  // namespace

TEST(CutedslSoftmax, EveryCandidateOfTheMatrixMatchesTheHostReference) {
  REQUIRE_GPU();
  auto backend = backend_or_skip();
  if (!backend) return;
  Tally t;
  uint64_t seed = 1;
  for (auto& [what, p] : cutedsl_softmax_test::problem_matrix()) {
    SCOPED_TRACE(what);
    check_problem(*backend, p, p.rows >= 6, seed++, t);
  }
  std::printf("  %d problems (%d not supported), %d candidate runs (%d cluster re-read, %d one-pass cluster of 16, "
              "%d packed), %d failed\n",
              t.problems, t.unsupported, t.runs, t.reread_runs, t.c16_runs, t.packed_runs, t.failed);
  EXPECT_EQ(t.unsupported, 0) << "every entry has candidates (load-only: precompile the matrix)";
  EXPECT_GT(t.runs, 300);
  EXPECT_GE(t.reread_runs, 20);
  EXPECT_GE(t.c16_runs, 20);
  EXPECT_GE(t.packed_runs, 30);
}

// A loaded candidate refuses misaligned pointers with an Error naming the problem, and a config
// that cannot run the problem is refused by load().
TEST(CutedslSoftmax, RefusesWhatItCannotRun) {
  REQUIRE_GPU();
  auto backend = backend_or_skip();
  if (!backend) return;
  const SoftmaxProblem p =
      SoftmaxProblem::make(cutedsl_softmax_test::rows_for(1024), 1024, DType::bf16);  // in the matrix
  if (!backend->supports(p)) GTEST_SKIP() << "no artifact for " << p.str();
  auto cands = backend->candidates(p);
  ASSERT_FALSE(cands.empty());
  cands[0]->prepare();
  DeviceBuffer x(size_t(p.elems()) * 2 + 16), y(size_t(p.elems()) * 2 + 16);
  GT_CUDA(cudaMemset(x.get(), 0, x.bytes()));
  EXPECT_THROW(cands[0]->run({static_cast<const char*>(x.get()) + 2, y.get()}, nullptr), Error);
  EXPECT_NO_THROW(cands[0]->run({x.get(), y.get()}, nullptr));
  GT_CUDA(cudaDeviceSynchronize());
  EXPECT_THROW(backend->load(SoftmaxProblem::make(64, 4096, DType::bf16), "p32_t256_v8x4"), Error);  // 1024 columns
  EXPECT_THROW(backend->load(p, "p33_t256_v8x4"), Error);
}
