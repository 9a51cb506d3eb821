// The Triton softmax backend: configs, compile parameters, and the candidate that loads the
// cubin and launches it with the driver API (launch ABI: x, y, rows (i32), cols (i32), ld (i64),
// scale (f32), then Triton's hidden global and profile scratch pointers).
#include "backends/triton/triton_softmax.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backends/backend.hpp"
#include "backends/triton/launch.hpp"
#include "compile/artifact_cache.hpp"
#include "core/cuda.hpp"
#include "core/driver.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace triton {
namespace {

constexpr const char* kTemplate = "gemmtune/kernels/triton_softmax.py";
constexpr int kMaxRowsBlock = 65536;  // block_n limit of the template
// Values a thread keeps in registers (softmax_rows), 32 at 32 warps; longer rows go online.
constexpr int kMaxPerThread = 64;
bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t next_pow2(int64_t v) {
  int64_t p = 16;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

std::string SoftmaxConfig::id() const {
  return online ? "online_b" + std::to_string(block_n) + "_w" + std::to_string(num_warps)
                : "rows_b" + std::to_string(block_n) + "_r" + std::to_string(rows) + "_w" + std::to_string(num_warps);
}

SoftmaxConfig SoftmaxConfig::parse(const std::string& id) {
  SoftmaxConfig c;
  int b = 0, r = 1, w = 0, used = 0;
  const bool rows_form = std::sscanf(id.c_str(), "rows_b%d_r%d_w%d%n", &b, &r, &w, &used) == 3 && used == int(id.size());
  const bool online_form = !rows_form && std::sscanf(id.c_str(), "online_b%d_w%d%n", &b, &w, &used) == 2 && used == int(id.size());
  if (!rows_form && !online_form)
    GT_THROW("triton softmax config '" + id + "': expected rows_b<N>_r<R>_w<W> or online_b<N>_w<W>");
  c.online = online_form, c.block_n = b, c.rows = online_form ? 1 : r, c.num_warps = w;
  if (c.id() != id) GT_THROW("triton softmax config '" + id + "': not in canonical form");
  return c;
}

std::string SoftmaxConfig::cannot_run(const SoftmaxProblem& p) const {
  if (!pow2(block_n) || block_n < 16 || block_n > kMaxRowsBlock) return "block_n must be a power of two in [16, 65536]";
  if (!pow2(rows) || rows > 64) return "rows must be a power of two in [1, 64]";
  if (!pow2(num_warps) || num_warps > 32) return "num_warps must be a power of two in [1, 32]";
  if (online && rows != 1) return "the online kernel takes one row per program";
  if (!online && block_n < p.cols) return "block_n " + std::to_string(block_n) + " is shorter than the row";
  // 1024-thread programs get 64 registers a thread: 64 values spill there (measured: 200+ bytes).
  const int64_t max_per = num_warps == 32 ? kMaxPerThread / 2 : kMaxPerThread;
  if (int64_t(block_n) * rows / (32 * num_warps) > max_per)
    return "more than " + std::to_string(max_per) + " values a thread";
  if (p.cols > 0x7fffffff || p.rows > 0x7fffffff) return "rows and cols must fit in 32 bits";
  return {};
}

std::vector<SoftmaxConfig> softmax_configs(const SoftmaxProblem& p) {
  std::vector<SoftmaxConfig> out;
  auto add = [&](SoftmaxConfig c) {
    if (c.cannot_run(p).empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // rows: the row whole (block_n = next power of two); small rows several per program so that a
  // program moves 1K-8K elements; 8..64 values a thread.
  const int64_t bn = next_pow2(p.cols);
  if (bn <= kMaxRowsBlock) {
    for (int64_t tile : {bn, int64_t(1024), int64_t(2048), int64_t(4096), int64_t(8192)}) {
      if (tile < bn || (tile != bn && tile / bn > 64)) continue;
      const int r = int(tile / bn);
      for (int per : {8, 16, 32, 64}) {
        const int64_t w = tile / (32 * per);
        if (w >= 1 && w <= 32) add({false, int(bn), r, int(w)});
      }
    }
  }
  // online: rows longer than 8K (the rows kernel covers the others), chunks of 1K-8K.
  if (p.cols > 8192 || out.empty())
    for (int b : {1024, 2048, 4096, 8192})
      for (int per : {8, 16}) {
        const int w = b / (32 * per);
        if (w >= 1 && w <= 32) add({true, b, 1, w});
      }
  return out;
}

nlohmann::json softmax_params(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& template_digest) {
  return {{"kernel", c.online ? "softmax_online" : "softmax_rows"},
          {"in_dtype", to_string(p.in)},
          {"out_dtype", to_string(p.out)},
          {"block_n", c.block_n},
          {"rows", c.rows},
          {"num_warps", c.num_warps},
          {"ld_div16", p.row_stride() % 16 == 0},
          {"cols_div16", p.cols % 16 == 0},
          {"template", template_digest}};
}

int64_t softmax_grid(const SoftmaxConfig& c, const SoftmaxProblem& p) {
  return c.online ? p.rows : (p.rows + c.rows - 1) / c.rows;
}

}  // namespace triton

namespace {

using nlohmann::json;
constexpr const char* kName = "triton";

compile::Job softmax_job(const triton::SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& digest) {
  return {"triton", "softmax " + c.id(), {}, triton::softmax_params(c, p, digest)};
}

class TritonSoftmaxCandidate final : public detail::CandidateFor<SoftmaxOp> {
 public:
  TritonSoftmaxCandidate(const SoftmaxProblem& p, const triton::SoftmaxConfig& c, std::string digest, int device)
      : p_(p), cfg_(c), digest_(std::move(digest)), device_(device) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.id(); }
  std::string name() const override { return cfg_.id(); }
  std::vector<compile::Job> jobs() const override { return {softmax_job(cfg_, p_, digest_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "triton softmax: " + id() + ": prepare expects one artifact");
    const int64_t grid = triton::softmax_grid(cfg_, p_);
    GT_CHECK(grid <= 0x7fffffff, "triton softmax: grid too large");
    GT_CUDA(cudaSetDevice(device_));
    // Launch ABI: x, y, rows, cols, ld, scale; the kernels need at most the default 48 KiB of
    // shared memory.
    kernel_ = triton::load_kernel(built[0].artifact, triton::Grid{unsigned(grid), 1, 1}, 6, "triton softmax", 48 * 1024);
  }

  void run(const SoftmaxArgs& a, cudaStream_t s) override {
    GT_CHECK(kernel_.fn, "triton softmax: " + id() + ": run before prepare");
    triton::ensure_context(device_);
    for (const void* ptr : {static_cast<const void*>(a.x), static_cast<const void*>(a.y)})
      GT_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, "triton softmax: x and y must be 16-byte aligned");
    CUdeviceptr x = CUdeviceptr(reinterpret_cast<uintptr_t>(a.x)), y = CUdeviceptr(reinterpret_cast<uintptr_t>(a.y));
    int32_t rows = int32_t(p_.rows), cols = int32_t(p_.cols);
    int64_t ld = p_.row_stride();
    float scale = p_.scale;
    kernel_.launch({&x, &y, &rows, &cols, &ld, &scale}, s);
  }

 private:
  SoftmaxProblem p_;
  triton::SoftmaxConfig cfg_;
  std::string digest_;
  int device_;
  triton::LoadedKernel kernel_;
};

class TritonSoftmaxBackend final : public SoftmaxBackend {
 public:
  explicit TritonSoftmaxBackend(const BackendContext& ctx)
      : link_(ctx, "triton"), template_(triton::read_template(ctx, triton::kTemplate)) {}

  std::string name() const override { return kName; }
  std::string version() const override {
    if (!available()) return "triton (unavailable)";
    return "triton " + link_.version() + " (softmax template " + template_.digest + ")";
  }
  Verdict available() const override {
    if (Verdict v = triton::device_verdict(link_.ctx.device); !v) return v;
    if (!template_.broken.empty()) return Verdict::no(template_.broken);
    return link_.available();
  }
  Verdict supports(const SoftmaxProblem& p) const override {
    if (p.cols > 0x7fffffff || p.rows > 0x7fffffff) return Verdict::no("rows and cols must fit in 32 bits");
    if (triton::softmax_configs(p).empty()) return Verdict::no("no Triton softmax config fits this problem");
    return Verdict::yes();
  }
  std::vector<std::unique_ptr<Cand>> candidates(const SoftmaxProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<Cand>> out;
    const bool load_only = link_.load_only();
    for (const auto& c : triton::softmax_configs(p))
      if (!load_only || link_.stored({softmax_job(c, p, template_.digest)}))
        out.push_back(std::make_unique<TritonSoftmaxCandidate>(p, c, template_.digest, link_.ctx.device.index));
    if (out.empty()) GT_THROW("load-only and the artifact store holds none of this problem's Triton softmax kernels");
    return out;
  }
  std::unique_ptr<Cand> load(const SoftmaxProblem& p, const std::string& id) override {
    require(p);
    const triton::SoftmaxConfig c = triton::SoftmaxConfig::parse(id);
    const std::string why = c.cannot_run(p);
    GT_CHECK(why.empty(), "triton: softmax config " + id + " cannot run " + p.str() + ": " + why);
    return std::make_unique<TritonSoftmaxCandidate>(p, c, template_.digest, link_.ctx.device.index);
  }

 private:
  void require(const SoftmaxProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "triton: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "triton: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  triton::Template template_;
};

}  // namespace

std::unique_ptr<SoftmaxBackend> make_triton_softmax_backend(const BackendContext& ctx) {
  return std::make_unique<TritonSoftmaxBackend>(ctx);
}

}  // namespace gemmtune
