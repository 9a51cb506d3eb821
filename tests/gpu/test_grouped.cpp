// Grouped GEMM: every Triton, CUTLASS and CuTe DSL grouped candidate against a float64 host reference per group
// (contiguous and masked layouts, balanced, skewed and ragged splits with empty groups, bf16,
// fp16, fp8 tensorwise, rowwise and block, bias and activations), rows no group owns left poisoned; the
// engine's per-group GPU check catches wrong outputs; select -> cache -> reload -> run on other
// splits without a re-tune; the tune's timing runs on a balanced and a skewed split.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <numeric>

#include "backends/backend.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/grouped.hpp"
#include "gpu/cutedsl_grouped_problems.hpp"
#include "gpu/cutlass_grouped_problems.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"
#include "support/host_reference.hpp"
#include "core/device.hpp"
#include "tune/gpu_bench.hpp"
#include "tune/grouped_check.hpp"

using namespace gemmtune;
namespace fs = std::filesystem;
using gpu_test::quick;
using gpu_test::temp_cache;

namespace {

// D of `ops` (after a run) against the float64 host reference of each group; every row no group
// owns must still hold NaN. "" when correct.
std::string host_check(const GroupedGemmProblem& p, const GroupedOperands& ops) {
  const size_t out = size_of(p.d);
  const std::vector<uint8_t> d = host::download_bytes(ops.args().d, size_t(ops.total_rows() * p.n) * out);
  std::vector<bool> owned(size_t(ops.total_rows()), false);
  for (size_t g = 0; g < ops.counts().size(); ++g) {
    const int64_t m = ops.counts()[g], r0 = ops.first_row(g);
    for (int64_t r = r0; r < r0 + m; ++r) owned[size_t(r)] = true;
    if (m == 0) continue;
    const GemmProblem gp = GroupedChecker::group_problem(p, m);
    const GemmArgs ga = GroupedChecker::group_args(p, ops, g, ops.args().d);
    const std::vector<double> ref = host::host_gemm(gp, host::download(gp, ga));
    const std::vector<uint8_t> dg(d.begin() + r0 * p.n * int64_t(out), d.begin() + (r0 + m) * p.n * int64_t(out));
    const CheckResult c = host::host_compare(gp, host::unpack_d(gp, dg), ref);
    if (!c.ok) return "group " + std::to_string(g) + " (" + std::to_string(m) + " rows): " + c.reason;
  }
  for (int64_t r = 0; r < ops.total_rows(); ++r) {
    if (owned[size_t(r)]) continue;
    for (int64_t c = 0; c < p.n; ++c)
      if (!std::isnan(host::load(p.d, d.data(), r * p.n + c)))
        return "wrote row " + std::to_string(r) + ", which no group owns";
  }
  return {};
}

struct Case {
  GroupedGemmProblem p;
  std::vector<std::vector<int64_t>> splits;  // besides the balanced, Zipf(1.5) and ragged ones
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](GroupedGemmProblem p, std::vector<std::vector<int64_t>> extra = {}) { out.push_back({p, extra}); };
  add(GroupedGemmProblem::make(8, 384, 512, 64), {{0, 0, 300, 1, 17, 0, 100, 95}});
  auto masked = GroupedGemmProblem::make(5, 200, 264, 48);
  masked.layout = GroupedLayout::masked;
  add(masked, {{0, 0, 0, 0, 0}, {1, 129, 0, 64, 15}});
  auto half = GroupedGemmProblem::make(33, 256, 128, 20, DType::fp16);
  half.bias = true, half.act = Activation::silu, half.alpha = 0.5f;
  add(half);
  add(GroupedGemmProblem::make(4, 256, 512, 100, DType::e4m3), {{400, 0, 0, 0}});
  auto tw = GroupedGemmProblem::make(6, 128, 256, 40, DType::e4m3);
  tw.scale = ScaleMode::tensorwise, tw.layout = GroupedLayout::masked, tw.act = Activation::gelu_tanh, tw.bias = true;
  add(tw);
  // Block scales (DeepSeek-V3's): whole blocks; then partial last n and k blocks, masked.
  auto blk = GroupedGemmProblem::make(4, 384, 640, 100, DType::e4m3);
  blk.scale = ScaleMode::block;
  add(blk, {{300, 0, 1, 99}});
  auto blk_masked = GroupedGemmProblem::make(3, 200, 1008, 40, DType::e4m3);
  blk_masked.scale = ScaleMode::block, blk_masked.layout = GroupedLayout::masked;
  blk_masked.bias = true, blk_masked.act = Activation::silu;
  add(blk_masked, {{0, 70, 13}});
  auto f32 = GroupedGemmProblem::make(3, 128, 64, 31);
  f32.d = DType::fp32, f32.act = Activation::relu;
  add(f32);
  auto one = GroupedGemmProblem::make(1, 4096, 1024, 300);
  add(one);
  return out;
}

// Every candidate of `backend` for every case, on the balanced, Zipf(1.5), ragged and the case's
// own splits, against the host reference and the engine's GPU check. Returns the runs made.
size_t every_candidate_matches(GroupedBackend& backend, const std::vector<Case>& cases, const DeviceInfo& dev) {
  Stream s;
  uint64_t seed = 21;
  size_t runs = 0, expected = 0;  // every candidate on every split
  for (const Case& c : cases) {
    const GroupedGemmProblem& p = c.p;
    SCOPED_TRACE(backend.name() + ": " + p.str());
    EXPECT_TRUE(backend.supports(p)) << backend.supports(p).reason;
    if (!backend.supports(p)) continue;
    auto cands = backend.candidates(p);
    EXPECT_FALSE(cands.empty());
    std::vector<std::future<std::string>> prepared = gpu_test::prepare_async(cands, dev.index);
    std::vector<std::string> why(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) why[i] = prepared[i].get();
    std::vector<std::unique_ptr<GroupedOperands>> sets;
    sets.push_back(std::make_unique<GroupedOperands>(p, seed++, s.get(), GroupedSplit::balanced));
    auto skewed = p;
    skewed.skew = 1.5;
    sets.push_back(std::make_unique<GroupedOperands>(skewed, seed++, s.get(), GroupedSplit::skewed));
    sets.push_back(std::make_unique<GroupedOperands>(p, seed++, s.get(), GroupedSplit::ragged));
    for (const auto& split : c.splits) sets.push_back(std::make_unique<GroupedOperands>(p, split, seed++, s.get()));
    expected += cands.size() * sets.size();
    for (const auto& ops : sets) {
      std::string counts;
      for (int64_t m : ops->counts()) counts += std::to_string(m) + " ";
      SCOPED_TRACE("split " + counts);
      for (size_t i = 0; i < cands.size(); ++i) {
        if (!why[i].empty()) {
          ADD_FAILURE() << cands[i]->name() << ": prepare: " << why[i];
          continue;
        }
        ops->poison_outputs(s.get());
        cands[i]->run(ops->args(), s.get());
        GT_CUDA(cudaStreamSynchronize(s.get()));
        ++runs;
        EXPECT_EQ(host_check(p, *ops), "") << cands[i]->name();
        // The engine's own GPU check agrees.
        GroupedChecker checker(p, *ops, s.get());
        const CheckResult r = checker.check(s.get());
        EXPECT_TRUE(r.ok) << cands[i]->name() << ": " << r.reason;
      }
    }
  }
  EXPECT_EQ(runs, expected);
  return runs;
}

}  // namespace

TEST(GroupedCandidates, EveryTritonCandidateMatchesTheHostReferenceOnEverySplit) {
  REQUIRE_GPU();
  const DeviceInfo dev = gpu_test::current_device();
  BackendContext ctx = gpu_test::context(dev, [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  auto backend = make_triton_grouped_backend(ctx);
  if (Verdict v = backend->available(); !v) GTEST_FAIL() << "triton not available: " << v.reason;
  EXPECT_GT(every_candidate_matches(*backend, cases(), dev), 120u);
}

// CUTLASS's grouped instances (sm90_grouped.cuh) on their problems (gpu/cutlass_grouped_problems.hpp,
// precompiled into the GPU tests' pack: the GPU machine has no nvcc). Skipped when no instance
// of them can be built or loaded here.
TEST(GroupedCandidates, EveryCutlassCandidateMatchesTheHostReferenceOnEverySplit) {
  REQUIRE_GPU();
  const DeviceInfo dev = gpu_test::current_device();
  BackendContext ctx = gpu_test::context(dev, [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  auto backend = make_cutlass_grouped_backend(ctx);
  if (Verdict v = backend->available(); !v) GTEST_SKIP() << "cutlass not available: " << v.reason;
  std::vector<Case> cs;
  for (const GroupedGemmProblem& p : cutlass_grouped_test::problems()) {
    Case c{p, {}};
    if (p.groups == 8) c.splits = {{0, 0, 300, 1, 17, 0, 100, 95}};
    if (p.layout == GroupedLayout::masked) c.splits = {{0, 0, 0, 0, 0}, {1, 129, 0, 64, 15}};
    cs.push_back(c);
  }
  for (const Case& c : cs)
    if (Verdict v = backend->supports(c.p); !v) GTEST_SKIP() << "cutlass: " << c.p.str() << ": " << v.reason;
  EXPECT_GT(every_candidate_matches(*backend, cs, dev), 60u);
}

// The CuTe DSL's grouped instances (gemm_sm90.py, grouped mode) on their problems
// (gpu/cutedsl_grouped_problems.hpp, precompiled into the GPU tests' pack: the GPU machine has no
// CuTe DSL): bf16, fp16 and fp8 (rowwise, tensorwise), both layouts, balanced, skewed, ragged and
// hand-made splits with empty groups. Skipped when no instance of them can be built or loaded here.
TEST(GroupedCandidates, EveryCutedslCandidateMatchesTheHostReferenceOnEverySplit) {
  REQUIRE_GPU();
  const DeviceInfo dev = gpu_test::current_device();
  BackendContext ctx = gpu_test::context(dev, [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  auto backend = make_cutedsl_grouped_backend(ctx);
  if (Verdict v = backend->available(); !v) GTEST_SKIP() << "cutedsl not available: " << v.reason;
  std::vector<Case> cs;
  for (const GroupedGemmProblem& p : cutedsl_grouped_test::problems()) {
    Case c{p, {}};
    if (p.groups == 8) c.splits = {{0, 0, 300, 1, 17, 0, 100, 95}};
    if (p.groups == 5) c.splits = {{0, 0, 0, 0, 0}, {1, 129, 0, 64, 15}};
    if (p.groups == 4 && p.rows_per_group == 100) c.splits = {{400, 0, 0, 0}};
    if (p.groups == 6) c.splits = {{0, 40, 3, 17, 0, 1}};
    cs.push_back(c);
  }
  for (const Case& c : cs)
    if (Verdict v = backend->supports(c.p); !v) GTEST_SKIP() << "cutedsl: " << c.p.str() << ": " << v.reason;
  EXPECT_GT(every_candidate_matches(*backend, cs, dev), 120u);
}

// The per-group GPU check fails a wrong value, a NaN, and a write into a row no group owns.
TEST(GroupedCheck, CatchesWrongOutputs) {
  REQUIRE_GPU();
  const DeviceInfo dev = gpu_test::current_device();
  auto p = GroupedGemmProblem::make(4, 128, 256, 32);
  p.layout = GroupedLayout::masked;
  auto cand = std::move(make_triton_grouped_backend(gpu_test::context(dev))->candidates(p).at(0));
  gpu_test::prepare(*cand);
  Stream s;
  GroupedOperands ops(p, std::vector<int64_t>{10, 0, 32, 5}, 3, s.get());
  GroupedChecker checker(p, ops, s.get());
  auto run = [&] {
    ops.poison_outputs(s.get());
    cand->run(ops.args(), s.get());
    return checker.check(s.get());
  };
  CheckResult ok = run();
  ASSERT_TRUE(ok.ok) << ok.reason;
  auto poke = [&](int64_t row, int64_t col, uint16_t bits) {
    GT_CUDA(cudaMemcpy(static_cast<uint16_t*>(ops.args().d) + row * p.n + col, &bits, 2, cudaMemcpyHostToDevice));
    return checker.check(s.get());
  };
  const int64_t g2 = ops.first_row(2);
  uint16_t v = 0;
  GT_CUDA(cudaMemcpy(&v, static_cast<uint16_t*>(ops.args().d) + (g2 + 3) * p.n + 7, 2, cudaMemcpyDeviceToHost));
  CheckResult wrong = poke(g2 + 3, 7, uint16_t(v + 8));
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.reason.find("group 2"), std::string::npos) << wrong.reason;
  run();
  EXPECT_FALSE(poke(g2, 0, 0x7fc0).ok);  // NaN where a value belongs
  run();
  CheckResult pad = poke(ops.first_row(1), 0, 0x3f80);  // 1.0 in the empty group's rows
  EXPECT_FALSE(pad.ok);
  EXPECT_NE(pad.reason.find("no group owns"), std::string::npos) << pad.reason;
  run();
  EXPECT_FALSE(poke(ops.first_row(0) + 10, 3, 0x3f80).ok);  // just past group 0's rows
}

// select tunes once per (shape, rows bucket); other rows in the bucket and other splits at run
// time reuse it, from memory and from the cache; the kernel is right on splits it never saw.
TEST(GroupedEngine, TunesOncePerBucketAndRunsAnySplit) {
  REQUIRE_GPU();
  const fs::path cache = temp_cache("grouped.sqlite");
  auto p = GroupedGemmProblem::make(8, 512, 1024, 100);
  p.skew = 1.0;
  std::string id;
  Stream s;
  {
    Engine e(quick(cache));
    TuneReport r;
    GroupedKernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    EXPECT_EQ(r.op, "grouped");
    EXPECT_FALSE(r.from_cache);
    ASSERT_NE(r.winner(), nullptr);
    EXPECT_TRUE(k.backend() == "triton" || k.backend() == "cutlass" || k.backend() == "cutedsl") << k.backend();
    for (const auto& c : r.results) EXPECT_NE(c.status, CandidateStatus::wrong) << c.name << ": " << c.reason;
    // cuBLASLt has no grouped kernel and says so (the CuTe DSL, load-only, may lack this problem's).
    bool cublaslt_refused = false;
    for (const auto& n : r.notes) cublaslt_refused |= n.rfind("cublaslt: does not support: ", 0) == 0;
    EXPECT_TRUE(cublaslt_refused);
    id = k.id();
    // Another rows-per-group of the same bucket: the same key, answered without tuning.
    auto q = p;
    q.rows_per_group = 70, q.skew = 0;
    TuneReport r2;
    GroupedKernel k2 = e.select(q, &r2);
    EXPECT_TRUE(r2.from_cache);
    EXPECT_EQ(r2.key, r.key);
    EXPECT_EQ(k2.id(), id);
  }
  Engine e(quick(cache));
  TuneReport r;
  GroupedKernel k = e.select(p, &r);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(k.id(), id);
  for (const std::vector<int64_t>& split : std::vector<std::vector<int64_t>>{
           {100, 100, 100, 100, 100, 100, 100, 100}, {800, 0, 0, 0, 0, 0, 0, 0}, {3, 97, 0, 250, 1, 1, 148, 300}}) {
    GroupedOperands ops(p, split, 9, s.get());
    k.run(ops.args(), s.get());
    GT_CUDA(cudaStreamSynchronize(s.get()));
    EXPECT_EQ(host_check(p, ops), "");
  }
  // Arguments are checked: no rows array, a capacity of 0.
  GroupedOperands ops(p, 10, s.get(), GroupedSplit::balanced);
  GroupedGemmArgs bad = ops.args();
  bad.rows = nullptr;
  EXPECT_THROW(k.run(bad, s.get()), Error);
  bad = ops.args();
  bad.capacity = 0;
  EXPECT_THROW(k.run(bad, s.get()), Error);
}

namespace {

// A candidate that computes nothing: each run reads back the split it was given (rows: the
// cumulative ends of a contiguous problem) as group sizes.
class SplitRecorder final : public detail::CandidateFor<GroupedOp> {
 public:
  explicit SplitRecorder(int64_t groups) : groups_(size_t(groups)) {}
  std::string backend() const override { return "test"; }
  std::string id() const override { return "split-recorder"; }
  std::string name() const override { return id(); }
  void run(const GroupedGemmArgs& args, cudaStream_t s) override {
    std::vector<int32_t> ends(groups_);
    GT_CUDA(cudaMemcpyAsync(ends.data(), args.rows, groups_ * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
    GT_CUDA(cudaStreamSynchronize(s));
    std::vector<int64_t> sizes(groups_);
    for (size_t g = 0; g < groups_; ++g) sizes[g] = ends[g] - (g ? ends[g - 1] : 0);
    seen.push_back(sizes);
  }
  std::vector<std::vector<int64_t>> seen;

 private:
  size_t groups_;
};

}  // namespace

// A tune times grouped candidates on a balanced split and on Zipf(skew) sizes (skew 0: balanced
// only), every sample on both, so a kernel fast only on equal groups is not the pick.
TEST(GroupedTiming, EverySampleRunsTheBalancedAndTheSkewedSplit) {
  REQUIRE_GPU();
  const DeviceInfo dev = query_device(0);
  Stream stream;
  TuneOptions opt;
  opt.warmup_ms = 1, opt.input_sets = 2;
  for (double skew : {1.0, 0.0}) {
    SCOPED_TRACE("skew " + std::to_string(skew));
    auto p = GroupedGemmProblem::make(8, 256, 256, 64);
    p.skew = skew;
    SplitRecorder rec(p.groups);
    GpuBench<GroupedOp> bench(p, {&rec}, opt, dev, stream);
    rec.seen.clear();
    EXPECT_GT(bench.sample(0), 0.0);
    size_t balanced = 0, skewed = 0;
    for (const auto& sizes : rec.seen) {
      EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t(0)), 8 * 64);
      const bool equal = std::all_of(sizes.begin(), sizes.end(), [](int64_t m) { return m == 64; });
      (equal ? balanced : skewed)++;
    }
    EXPECT_EQ(balanced, size_t(bench.launches_per_sample()));
    EXPECT_EQ(skewed, skew > 0 ? size_t(bench.launches_per_sample()) : 0u);
  }
}
