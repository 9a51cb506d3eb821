// What several GPU tests (tests/gpu/*.cpp) share: the device, engine options for quick tuning,
// preparing candidates in parallel, D against the float64 host reference, named layout
// variants of a GEMM problem, and the softmax checks (random inputs with torch's special
// rows and NaN padding, outputs compared on other threads, padding left poisoned).
// Defined in helpers.cpp, but for the templates and layout_variants (cutedsl_problems.hpp uses
// it, and host tests include that file: it must not need helpers.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "core/cuda.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/softmax.hpp"
#include "support/host_softmax.hpp"
#include "tune/verify.hpp"

namespace gemmtune::gpu_test {

// ---- devices, engines, candidates ------------------------------------------------------------

// The current device: index, name, SM count and compute capability (nothing else filled in).
DeviceInfo current_device();

// A fresh path `name` in this process's temporary directory (gemmtune-gpu-test-<pid>), any old
// file there removed.
std::filesystem::path temp_cache(const char* name);

// Engine options that tune quickly (10 ms warm-up, 3 to 5 rounds, 3 tie rounds) with the cache
// at `cache`.
EngineOptions quick(const std::filesystem::path& cache);

// The race's pick is the fastest correct candidate up to its near-tie rules (src/tune/timing.hpp):
// a candidate within duel_window (or tie_tolerance) of the fastest median may be preferred, and
// a duel may hand the pick to the next one within that reach of the champion, so the winner's
// median is at most (1 + reach)^2 x the fastest `ok` candidate's median, reach =
// max(duel_window, tie_tolerance). (Exactly which one wins is tested on a CPU with a fake timer.)
void expect_winner_within_race_reach(const TuneReport& r, const TuneOptions& opt);

// The GPU tests' artifact cache, one per process, with the options the environment gives
// (GEMMTUNE_ARTIFACTS: a kernel pack; GEMMTUNE_LOAD_ONLY), as an engine's would be.
compile::ArtifactCache& artifacts();
// A backend context on `dev` over artifacts(); `log` may be empty (silent).
BackendContext context(const DeviceInfo& dev, std::function<void(const std::string&)> log = {});
// Builds (store hit or compile) the candidate's artifacts through artifacts() and prepares it,
// as the engine does. Throws Error.
void prepare(detail::CandidateBase& c);

// Starts prepare() (build / load) of every candidate at once on its own thread, as the engine
// does, with `device` current there; each future holds "" when prepared, else the Error's
// message. The candidates must outlive the futures.
template <class Candidate>
std::vector<std::future<std::string>> prepare_async(std::vector<std::unique_ptr<Candidate>>& cands, int device) {
  std::vector<std::future<std::string>> out;
  for (auto& c : cands)
    out.push_back(std::async(std::launch::async, [&c, device]() -> std::string {
      try {
        GT_CUDA(cudaSetDevice(device));
        prepare(*c);
        return {};
      } catch (const Error& e) {
        return e.message();
      }
    }));
  return out;
}

// prepare_async, waited for: "" or the error message per candidate.
template <class Candidate>
std::vector<std::string> prepare_all(std::vector<std::unique_ptr<Candidate>>& cands, int device) {
  std::vector<std::string> out;
  for (auto& f : prepare_async(cands, device)) out.push_back(f.get());
  return out;
}

// ---- GEMM ----------------------------------------------------------------------------------

// D of `args` (on the device) against `ref` (host::host_gemm's), with host::host_compare.
CheckResult check_d(const GemmProblem& p, const GemmArgs& args, const std::vector<double>& ref);

// An entry of a problem matrix: the problem and what it exercises.
struct Named {
  std::string what;
  GemmProblem p;
};

// `base` in each of the eight layouts of A, B and D (C follows D), named "layout A:<a> B:<b> D:<d>".
inline std::vector<Named> layout_variants(const GemmProblem& base) {
  std::vector<Named> out;
  for (Layout la : {Layout::row, Layout::col})
    for (Layout lb : {Layout::row, Layout::col})
      for (Layout ld : {Layout::row, Layout::col}) {
        GemmProblem p = base;
        p.a.layout = la, p.b.layout = lb, p.c.layout = ld, p.d.layout = ld;
        out.push_back({std::string("layout A:") + to_string(la) + " B:" + to_string(lb) + " D:" + to_string(ld), p});
      }
  return out;
}

// ---- softmax ---------------------------------------------------------------------------------

// A softmax input made on the host: x (p.in, rows of p.row_stride() elements, NaN in the padding
// between cols and ld, so that a kernel which reads it makes its row NaN) and the float64
// reference of it. Values uniform in [-8, 8) from mt19937_64(seed); with `specials`, row r
// becomes special by r % 6:
//   0 finite   1 one NaN   2 one +Inf   3 all -Inf   4 -Inf at every other column (column 0
//   stays finite)   5 one -Inf and one 1e4 (every other entry underflows to 0)
struct SoftmaxHostInput {
  std::vector<uint8_t> x;
  host::SoftmaxRef ref;
};
SoftmaxHostInput softmax_host_input(const SoftmaxProblem& p, bool specials, uint64_t seed);

// The first row of y (p's whole output, p.elems() elements of p.out, poisoned with 0xff bytes
// before the run) whose padding between cols and ld was written; -1 when none was.
int64_t written_padding_row(const SoftmaxProblem& p, const std::vector<uint8_t>& y);

// Checks outputs of p against in.ref (host::softmax_compare, and the padding left poisoned) on
// other threads while the caller runs the next kernels: the float64 comparison dominates these
// tests. Failures are reported (EXPECT_TRUE, naming the kernel) on the caller's thread, in add()
// and finish(), so that the caller's SCOPED_TRACE applies. p and in must outlive the checker.
class SoftmaxOutputChecks {
 public:
  SoftmaxOutputChecks(const SoftmaxProblem& p, const SoftmaxHostInput& in) : p_(p), in_(in) {}

  // Queues y (as written by the kernel `name` into an output poisoned with 0xff bytes: see
  // written_padding_row); waits for the oldest checks while too many are pending.
  void add(std::string name, std::vector<uint8_t> y);
  // Waits for every pending check; the number of failed outputs so far.
  int finish();

 private:
  struct Outcome {
    std::string name;
    host::SoftmaxCheck res;
    bool pad_ok = true;
  };
  void drain(size_t keep);

  const SoftmaxProblem& p_;
  const SoftmaxHostInput& in_;
  std::deque<std::future<Outcome>> pending_;
  int failed_ = 0;
};

}  // namespace gemmtune::gpu_test
