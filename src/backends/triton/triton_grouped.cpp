// The Triton grouped GEMM backend: python/gemmtune/kernels/triton_grouped.py (a persistent kernel
// whose tile scheduler walks the groups on the GPU), compiled ahead of time by the Python
// workers, loaded and launched with the driver API.
//
// Launch ABI: a, b, d, rows, bias, scale_a, scale_b (pointers), G, M_ROWS, MAX_M, N, K, lda, ldd
// (i32), alpha (f32), then Triton's hidden global and profile scratch pointers; grid (NUM_SMS).
// M_ROWS is the rows A and D hold (contiguous: capacity; masked: G * capacity), MAX_M the masked
// layout's rows per group. The kernel makes TMA descriptors in its global scratch: a candidate
// owns one scratch buffer, so runs of one candidate on different streams must not overlap.
#include "backends/triton/triton_grouped.hpp"

#include <cuda.h>

#include <algorithm>
#include <cstdio>

#include "backends/backend.hpp"
#include "backends/triton/configs.hpp"
#include "backends/triton/launch.hpp"
#include "compile/artifact_cache.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace triton {

namespace {
constexpr int kDefaultSms = 132;  // H100 / H200 SXM, when the device reports none
bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
}  // namespace

std::string GroupedConfig::id() const {
  char buf[80];
  std::snprintf(buf, sizeof buf, "g%dx%dx%d_w%d_s%d_gm%d", block_m, block_n, block_k, num_warps, num_stages, group_m);
  return chunks == 1 ? std::string(buf) : std::string(buf) + "_c" + std::to_string(chunks);
}

GroupedConfig GroupedConfig::parse(const std::string& id) {
  GroupedConfig c;
  int used = 0, tail = 0;
  const bool ok = std::sscanf(id.c_str(), "g%dx%dx%d_w%d_s%d_gm%d%n", &c.block_m, &c.block_n, &c.block_k,
                              &c.num_warps, &c.num_stages, &c.group_m, &used) == 6 &&
                  (used == int(id.size()) ||
                   (std::sscanf(id.c_str() + used, "_c%d%n", &c.chunks, &tail) == 1 && used + tail == int(id.size())));
  if (!ok || c.id() != id)
    GT_THROW("triton grouped config '" + id + "': expected g<BM>x<BN>x<BK>_w<W>_s<S>_gm<G>[_c<C>]");
  return c;
}

std::string GroupedConfig::cannot_run(const GroupedGemmProblem& p) const {
  for (int v : {block_m, block_n, block_k})
    if (!pow2(v) || v < 16 || v > 256) return "tile sizes must be powers of two in [16, 256]";
  if (!pow2(num_warps) || num_warps > 16) return "num_warps must be a power of two in [1, 16]";
  if (num_stages < 1 || num_stages > 8) return "num_stages must be in [1, 8]";
  if (group_m < 1 || group_m > 64) return "group_m must be in [1, 64]";
  if (chunks < 1 || chunks > 4) return "chunks must be in [1, 4]";
  if (chunks > 1 && p.scale == ScaleMode::block) return "block scales take one row slice a tile (chunks 1)";
  // The kernel keeps chunks fp32 accumulators of block_m x block_n in registers.
  if (int64_t(chunks) * block_m * block_n / (32 * num_warps) > 128)
    return "chunks x block_m x block_n fp32 accumulators need more than 128 registers a thread";
  if (is_fp8(p.a) && block_k < 32) return "fp8 tiles need block_k >= 32";
  if (p.scale == ScaleMode::block && block_k != 128) return "block scales need block_k 128 (one k tile a scale block)";
  // Measured on the H200 (Mixtral up, 512 rows a group): 128x256 and 64x256 block-scaled tiles
  // took 1.7 ms, twice the 128x128 tile's 0.85 ms (two column blocks' scales per k tile).
  if (p.scale == ScaleMode::block && block_n > 128) return "block scales: tiles of at most 128 columns (one B scale block)";
  // Shared memory: the pipeline's A and B tiles and the epilogue's layout change of the tile
  // (Triton 3.6, measured for 128x256x64 bf16 tiles: 3 / 4 stages need 278552 / 327712 bytes with
  // an fp32 D, 229408 with 4 stages and a bf16 D: tile bytes per stage, plus block_m * block_n
  // bytes (16-bit D) or 4 * block_m * block_n (fp32 D), plus 32).
  const int64_t smem = int64_t(num_stages) * (int64_t(chunks) * block_m + block_n) * block_k * int64_t(size_of(p.a)) +
                       int64_t(block_m) * block_n * (p.d == DType::fp32 ? 4 : 1) + 32;
  if (smem > kMaxSharedBytes)
    return "needs about " + std::to_string(smem) + " bytes of shared memory (sm_90: " +
           std::to_string(kMaxSharedBytes) + ")";
  return {};
}

std::vector<GroupedConfig> grouped_configs(const GroupedGemmProblem& p) {
  // (block_m, block_n, block_k, warps, stages, group_m). 128-row tiles for many rows per group,
  // 64-row tiles where groups are short (decode) and B's bandwidth is the limit.
  static const GroupedConfig k16[] = {
      {128, 256, 64, 8, 4, 8}, {128, 256, 64, 8, 3, 8}, {128, 128, 64, 8, 4, 8},
      {128, 128, 64, 4, 4, 8}, {64, 256, 64, 4, 4, 8},  {64, 128, 128, 4, 4, 8},
  };
  static const GroupedConfig k8[] = {
      {128, 256, 128, 8, 3, 8}, {128, 128, 128, 8, 4, 8}, {128, 128, 128, 4, 4, 8},
      {64, 256, 128, 4, 4, 8},  {64, 128, 128, 4, 5, 8},
  };
  // Where groups are short (<= 128 rows a group): a tile of two 64-row slices that loads each
  // weight tile once for both (chunks 2). Measured on the H200 (scripts/gpu/grouped_bench.py,
  // bench/results/2026-12-05-h200-s24-grouped.md): the fastest bf16 config at 64 rows a group for
  // DeepSeek-V3's up projection (32x4096x7168, 3% in the mean of the balanced and skewed splits),
  // within 1% of the fastest on the other three shapes.
  static const GroupedConfig k16_short[] = {{64, 256, 64, 8, 4, 8, 2}};
  std::vector<GroupedConfig> out;
  auto add = [&](const GroupedConfig& c) {
    if (c.cannot_run(p).empty()) out.push_back(c);
  };
  if (is_fp8(p.a)) {
    for (const auto& c : k8) add(c);
  } else {
    for (const auto& c : k16) add(c);
    if (p.rows_bucket() <= 128)
      for (const auto& c : k16_short) add(c);
  }
  return out;
}

int grouped_max_g(const GroupedGemmProblem& p) {
  int g = 16;
  while (g < p.groups) g *= 2;
  return g;
}

nlohmann::json grouped_params(const GroupedConfig& c, const GroupedGemmProblem& p, int num_sms,
                              const std::string& template_digest) {
  return {{"kernel", "grouped_gemm"},
          {"a_dtype", to_string(p.a)},
          {"out_dtype", to_string(p.d)},
          {"masked", p.layout == GroupedLayout::masked},
          {"has_bias", p.bias},
          {"act", to_string(p.act)},
          {"scale", to_string(p.scale)},
          {"max_g", grouped_max_g(p)},
          {"block_m", c.block_m},
          {"block_n", c.block_n},
          {"block_k", c.block_k},
          {"group_m", c.group_m},
          {"chunks", c.chunks},
          {"num_sms", num_sms},
          {"num_warps", c.num_warps},
          {"num_stages", c.num_stages},
          {"n_div16", p.n % 16 == 0},
          {"k_div16", p.k % 16 == 0},
          {"template", template_digest}};
}

Verdict grouped_verdict(const GroupedGemmProblem& p) {
  // TMA reads A and B: their rows (k elements) must be multiples of 16 bytes.
  if ((p.k * int64_t(size_of(p.a))) % 16 != 0)
    return Verdict::no("TMA reads A and B: k * " + std::to_string(size_of(p.a)) +
                       " bytes must be a multiple of 16 (k = " + std::to_string(p.k) + ")");
  if (p.groups * p.n > 0x7fffffff || p.k > 0x7fffffff) return Verdict::no("groups * n and k must fit in 32 bits");
  return Verdict::yes();
}

}  // namespace triton

namespace {

constexpr const char* kName = "triton";

compile::Job grouped_job(const triton::GroupedConfig& c, const GroupedGemmProblem& p, int sms, const std::string& digest) {
  return {"triton", "grouped " + c.id(), {}, triton::grouped_params(c, p, sms, digest)};
}

class TritonGroupedCandidate final : public detail::CandidateFor<GroupedOp> {
 public:
  TritonGroupedCandidate(const GroupedGemmProblem& p, const triton::GroupedConfig& c, std::string digest, int device,
                         int sms)
      : p_(p), cfg_(c), digest_(std::move(digest)), device_(device), sms_(sms) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.id(); }
  std::string name() const override { return "grouped " + cfg_.id(); }
  std::vector<compile::Job> jobs() const override { return {grouped_job(cfg_, p_, sms_, digest_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "triton grouped: " + id() + ": prepare expects one artifact");
    GT_CUDA(cudaSetDevice(device_));
    kernel_ = triton::load_kernel(built[0].artifact, triton::Grid{unsigned(sms_), 1, 1}, 15, "triton grouped",
                                  triton::kMaxSharedBytes);
  }

  void run(const GroupedGemmArgs& a, cudaStream_t s) override {
    GT_CHECK(kernel_.fn, "triton grouped: " + id() + ": run before prepare");
    triton::ensure_context(device_);
    auto ptr = [](const void* x) { return CUdeviceptr(reinterpret_cast<uintptr_t>(x)); };
    CUdeviceptr A = ptr(a.a), B = ptr(a.b), D = ptr(a.d), rows = ptr(a.rows), bias = ptr(a.bias),
                sa = ptr(a.scale_a), sb = ptr(a.scale_b);
    const bool masked = p_.layout == GroupedLayout::masked;
    int32_t G = int32_t(p_.groups), n = int32_t(p_.n), k = int32_t(p_.k);
    int32_t m_rows = int32_t(masked ? p_.groups * a.capacity : a.capacity);  // KernelFor::run checked < 2^31
    int32_t max_m = int32_t(masked ? a.capacity : 0);
    int32_t lda = k, ldd = n;
    float alpha = p_.alpha;
    kernel_.launch({&A, &B, &D, &rows, &bias, &sa, &sb, &G, &m_rows, &max_m, &n, &k, &lda, &ldd, &alpha}, s);
  }

 private:
  GroupedGemmProblem p_;
  triton::GroupedConfig cfg_;
  std::string digest_;
  int device_, sms_;
  triton::LoadedKernel kernel_;
};

class TritonGroupedBackend final : public GroupedBackend {
 public:
  explicit TritonGroupedBackend(const BackendContext& ctx)
      : link_(ctx, "triton"),
        template_(triton::read_template(ctx, "gemmtune/kernels/triton_grouped.py")),
        sms_(ctx.device.sm_count > 0 ? ctx.device.sm_count : triton::kDefaultSms) {}

  std::string name() const override { return kName; }
  std::string version() const override {
    if (!available()) return "triton (unavailable)";
    return "triton " + link_.version() + " (grouped template " + template_.digest + ")";
  }
  Verdict available() const override {
    if (Verdict v = triton::device_verdict(link_.ctx.device); !v) return v;
    if (!template_.broken.empty()) return Verdict::no(template_.broken);
    return link_.available();
  }
  Verdict supports(const GroupedGemmProblem& p) const override {
    if (Verdict v = triton::grouped_verdict(p); !v) return v;
    if (triton::grouped_configs(p).empty()) return Verdict::no("no Triton grouped config fits this problem");
    return Verdict::yes();
  }
  std::vector<std::unique_ptr<Cand>> candidates(const GroupedGemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<Cand>> out;
    const bool load_only = link_.load_only();
    const std::string& digest = template_.digest;
    for (const auto& c : triton::grouped_configs(p))
      if (!load_only || link_.stored({grouped_job(c, p, sms_, digest)}))
        out.push_back(std::make_unique<TritonGroupedCandidate>(p, c, digest, link_.ctx.device.index, sms_));
    if (out.empty()) GT_THROW("load-only and the artifact store holds none of this problem's Triton grouped kernels");
    return out;
  }
  std::unique_ptr<Cand> load(const GroupedGemmProblem& p, const std::string& id) override {
    require(p);
    const triton::GroupedConfig c = triton::GroupedConfig::parse(id);
    const std::string why = c.cannot_run(p);
    GT_CHECK(why.empty(), "triton: grouped config " + id + " cannot run " + p.str() + ": " + why);
    return std::make_unique<TritonGroupedCandidate>(p, c, template_.digest, link_.ctx.device.index, sms_);
  }

 private:
  void require(const GroupedGemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "triton: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "triton: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  triton::Template template_;
  int sms_;
};

}  // namespace

std::unique_ptr<GroupedBackend> make_triton_grouped_backend(const BackendContext& ctx) {
  return std::make_unique<TritonGroupedBackend>(ctx);
}

}  // namespace gemmtune
