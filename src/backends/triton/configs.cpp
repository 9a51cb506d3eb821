// The Triton config space, its pruning, compile parameters and grids.
#include "backends/triton/configs.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>

#include "gemmtune/error.hpp"

namespace gemmtune::triton {
namespace {

using nlohmann::json;

struct Shape {
  int bm, bn, bk, warps, stages;
};

// Tiled configs (Inductor-like): small tiles with deep pipelines for small or skinny problems,
// 128x128 and 128x256 / 256x128 tiles for large ones. Scaled down to the problem below.
constexpr Shape kTiled[] = {
    {32, 64, 32, 4, 5},    {64, 32, 32, 4, 5},    {64, 64, 32, 4, 2},   {64, 64, 64, 4, 3},
    {64, 64, 128, 4, 5},   {64, 128, 32, 4, 3},   {64, 128, 64, 4, 4},  {128, 64, 32, 4, 3},
    {128, 64, 64, 4, 4},   {128, 128, 32, 8, 2},  {128, 128, 64, 4, 3}, {128, 128, 64, 8, 4},
    {128, 128, 128, 8, 3}, {64, 256, 64, 8, 4},   {256, 64, 64, 8, 4},  {128, 256, 64, 8, 3},
    {256, 128, 64, 8, 3},
    // Inductor's picks on the H200 where ours fell short (bench/results/*-triton-partial.md):
    // m=128 n=8192 k=28672 (64x128x128 w4 s4), large bf16 problems (128x128x64 w8 s5).
    {64, 128, 128, 4, 4},  {128, 128, 64, 8, 5},
};
// Persistent TMA configs (not scaled: dropped when a tile is larger than the problem).
constexpr Shape kPersistent[] = {
    {128, 64, 64, 4, 4}, {128, 128, 64, 4, 4}, {128, 128, 64, 8, 3},
    {128, 128, 128, 8, 3}, {128, 256, 64, 8, 3}, {256, 128, 64, 8, 3},
};
// Large problems (see large_problem): only the configs that won or came within ~1.3x on the
// H200 (bench/results/2026-11-30-h200-triton-*.json: persistent 128x256x64 w8 s3, 256x128x64,
// 128x128x64 w4 s4 and 128x128x128 w8 s3 within 5% of each other; Inductor's pick
// 128x128x64 w8 s5), 11 instead of 23-25 compiles. 16-bit inputs only (fp32: the general list,
// fp8: the lists below).
constexpr Shape kLargeTiled[] = {
    {128, 256, 64, 8, 3}, {256, 128, 64, 8, 3}, {128, 128, 64, 8, 5},
    {128, 128, 64, 4, 3}, {128, 128, 128, 8, 3}, {128, 64, 64, 4, 4},
};
constexpr Shape kLargePersistent[] = {
    {128, 256, 64, 8, 3}, {256, 128, 64, 8, 3}, {128, 128, 64, 4, 4}, {128, 128, 128, 8, 3}, {128, 128, 64, 4, 5},
};
// fp8 inputs: BLOCK_K 128 (one 128-byte swizzled row per stage) and tiles with at most
// kFp8MaxAccPerThread accumulator registers per thread (see fp8_fits_registers). For large
// problems these are the only fp8 configs; for the others they join the general tiled list
// (its BLOCK_K >= 64 shapes) and replace the general persistent list.
constexpr Shape kFp8Tiled[] = {
    {128, 128, 128, 8, 3}, {128, 128, 128, 8, 4}, {128, 128, 128, 8, 5}, {64, 256, 128, 8, 4},
    {256, 64, 128, 8, 4},  {128, 64, 128, 4, 4},  {64, 128, 128, 4, 4},
};
constexpr Shape kFp8Persistent[] = {
    {128, 128, 128, 8, 3}, {128, 128, 128, 8, 4}, {128, 128, 128, 8, 5}, {64, 256, 128, 8, 4}, {128, 64, 128, 4, 4},
};
// fp8 with precise accumulation (tl.dot's max_num_imprecise_acc = BLOCK_K: the engine never
// asks for fast accumulation) keeps a second fp32 accumulator for the MMA's partial sums:
// 128 accumulator registers per thread then spill (128x256x128 w8: 255 registers and 216
// bytes of spill stores, compiled for sm_90a), 64 do not (128x128x128 w8: 180 registers).
constexpr int kFp8MaxAccPerThread = 64;
// Split-k tile shapes (scaled like the tiled ones), for few output tiles and a long K.
constexpr Shape kSplitK[] = {{64, 64, 128, 4, 4}, {64, 128, 64, 4, 4}, {32, 128, 128, 4, 3}};
constexpr int kSplits[] = {16, 8, 4, 2};
constexpr int kSplitsPerShape = 2;  // the largest splits that keep the grid within 2 waves
constexpr int64_t kMinKPerSplit = 256;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
bool half_input(DType t) { return t == DType::bf16 || t == DType::fp16; }

// Blocks never larger than the problem's next power of two (at least 16 for M, N; 32 for K);
// small tiles keep 4 warps.
Config scaled(const Shape& s, const GemmProblem& p, KernelKind kind) {
  Config c;
  c.kind = kind;
  c.block_m = int(std::min<int64_t>(s.bm, std::max<int64_t>(16, next_pow2(p.m))));
  c.block_n = int(std::min<int64_t>(s.bn, std::max<int64_t>(16, next_pow2(p.n))));
  c.block_k = int(std::min<int64_t>(s.bk, std::max<int64_t>(32, next_pow2(p.k))));
  c.num_warps = c.block_m * c.block_n <= 64 * 64 ? std::min(s.warps, 4) : s.warps;
  c.num_stages = s.stages;
  return c;
}

// Stages past the number of k steps only repeat a config: cap them (at least 2).
Config with_split(Config c, int split, const GemmProblem& p) {
  c.split_k = split;
  int64_t k_steps = cdiv(p.k, int64_t(c.block_k) * split);
  c.num_stages = int(std::min<int64_t>(c.num_stages, std::max<int64_t>(2, k_steps)));
  return c;
}

Config unscaled(const Shape& s, KernelKind kind) {
  Config c;
  c.kind = kind;
  c.block_m = s.bm, c.block_n = s.bn, c.block_k = s.bk, c.num_warps = s.warps, c.num_stages = s.stages;
  return c;
}

int64_t tiles(const Config& c, const GemmProblem& p) { return cdiv(p.m, c.block_m) * cdiv(p.n, c.block_n); }

bool fp8_fits_registers(const Config& c, const GemmProblem& p) {
  return !is_fp8(p.a.dtype) || int64_t(c.block_m) * c.block_n / (32 * c.num_warps) <= kFp8MaxAccPerThread;
}

void add_unique(std::vector<Config>& out, const Config& c, const GemmProblem& p, int num_sms) {
  if (std::find(out.begin(), out.end(), c) == out.end() && fp8_fits_registers(c, p) && check(c, p, num_sms))
    out.push_back(c);
}

// min_block_k: shapes with a smaller BLOCK_K are skipped (before scaling to the problem).
template <size_t N>
void add_tiled(std::vector<Config>& out, const Shape (&shapes)[N], const GemmProblem& p, int num_sms,
               int min_block_k = 0) {
  for (const Shape& s : shapes)
    if (s.bk >= min_block_k) add_unique(out, with_split(scaled(s, p, KernelKind::tiled), 1, p), p, num_sms);
}

template <size_t N>
void add_persistent(std::vector<Config>& out, const Shape (&shapes)[N], const GemmProblem& p, int num_sms) {
  for (const Shape& s : shapes) {
    if (s.bm > std::max<int64_t>(16, next_pow2(p.m)) || s.bn > std::max<int64_t>(16, next_pow2(p.n))) continue;
    add_unique(out, with_split(unscaled(s, KernelKind::persistent), 1, p), p, num_sms);
  }
}

void add_split_k(std::vector<Config>& out, const GemmProblem& p, int num_sms) {
  if (p.k < 4 * kMinKPerSplit) return;
  for (const Shape& s : kSplitK) {
    Config base = scaled(s, p, KernelKind::tiled);
    int64_t t = tiles(base, p);
    if (t >= num_sms) continue;  // enough output tiles to fill the GPU
    int taken = 0;
    for (int split : kSplits) {
      if (taken == kSplitsPerShape) break;
      if (t * split > 2 * int64_t(num_sms) || p.k / split < std::max<int64_t>(kMinKPerSplit, 2 * base.block_k))
        continue;
      Config c = with_split(base, split, p);
      size_t before = out.size();
      add_unique(out, c, p, num_sms);
      taken += out.size() > before;
    }
  }
}

// Reads a decimal int at text[pos..] (no sign, no leading zero); advances pos.
bool read_int(std::string_view text, size_t& pos, int& value) {
  if (pos >= text.size() || text[pos] == '0') return false;
  auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), value);
  if (ec != std::errc()) return false;
  pos = size_t(end - text.data());
  return true;
}

bool expect(std::string_view text, size_t& pos, char ch) {
  if (pos >= text.size() || text[pos] != ch) return false;
  ++pos;
  return true;
}

}  // namespace

// ---- ids and names --------------------------------------------------------------------------

std::string Config::id() const {
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "%c%dx%dx%dw%ds%dg%d", kind == KernelKind::tiled ? 't' : 'p', block_m,
                        block_n, block_k, num_warps, num_stages, group_m);
  if (split_k > 1) std::snprintf(buf + n, sizeof buf - size_t(n), "k%d", split_k);
  return buf;
}

std::string Config::name() const {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, "%s %dx%dx%d w%d s%d", kind == KernelKind::tiled ? "tiled" : "persistent",
                        block_m, block_n, block_k, num_warps, num_stages);
  if (group_m != 8) n += std::snprintf(buf + n, sizeof buf - size_t(n), " g%d", group_m);
  if (split_k > 1) std::snprintf(buf + n, sizeof buf - size_t(n), " split-k %d", split_k);
  return buf;
}

Config Config::parse(std::string_view id) {
  Config c;
  size_t pos = 1;
  bool ok = !id.empty() && (id[0] == 't' || id[0] == 'p');
  if (ok) c.kind = id[0] == 't' ? KernelKind::tiled : KernelKind::persistent;
  ok = ok && read_int(id, pos, c.block_m) && expect(id, pos, 'x') && read_int(id, pos, c.block_n) &&
       expect(id, pos, 'x') && read_int(id, pos, c.block_k) && expect(id, pos, 'w') &&
       read_int(id, pos, c.num_warps) && expect(id, pos, 's') && read_int(id, pos, c.num_stages) &&
       expect(id, pos, 'g') && read_int(id, pos, c.group_m);
  if (ok && pos < id.size()) ok = expect(id, pos, 'k') && read_int(id, pos, c.split_k) && c.split_k > 1;
  ok = ok && pos == id.size();
  auto in = [](int v, int lo, int hi) { return v >= lo && v <= hi; };
  ok = ok && pow2(c.block_m) && in(c.block_m, 16, 256) && pow2(c.block_n) && in(c.block_n, 16, 256) &&
       pow2(c.block_k) && in(c.block_k, 16, 256) && pow2(c.num_warps) && in(c.num_warps, 1, 16) &&
       in(c.num_stages, 1, 8) && in(c.group_m, 1, 64) && in(c.split_k, 1, 64) &&
       (c.kind == KernelKind::tiled || c.split_k == 1);
  GT_CHECK(ok, "triton: '" + std::string(id) +
                   "' is not a Triton config id (e.g. t128x128x64w8s3g8, p128x256x64w8s3g8, t16x64x128w4s4g8k4)");
  return c;
}

// ---- rules ----------------------------------------------------------------------------------

bool large_problem(const GemmProblem& p, int num_sms) {
  return p.m >= kLargeMinDim && p.n >= kLargeMinDim &&
         cdiv(p.m, 128) * cdiv(p.n, 128) >= kLargeMinWaves * int64_t(std::max(num_sms, 1));
}

bool main_loop_fits_i32(const Config& c, const GemmProblem& p) {
  // The largest A / B offsets gemm_tiled forms in its index type (triton_gemm.py): the row
  // (column) pointers of a K-contiguous operand, the in-tile offsets of a K-strided one. The
  // k step itself is added in 64 bits.
  const int64_t bk = c.block_k;
  int64_t a = p.a.layout == Layout::row ? (p.m - 1) * p.lda() : (p.m - 1) + (bk - 1) * p.lda();
  int64_t b = p.b.layout == Layout::row ? (bk - 1) * p.ldb() + (p.n - 1) : (p.n - 1) * p.ldb();
  return std::max(a, b) <= INT32_MAX;
}

Verdict problem_verdict(const GemmProblem& p) {
  const std::pair<const char*, int64_t> dims[] = {{"m", p.m},        {"n", p.n},        {"k", p.k},
                                                  {"lda", p.lda()},  {"ldb", p.ldb()},  {"ldc", p.ldc()},
                                                  {"ldd", p.ldd()}};
  for (auto& [what, v] : dims)
    if (v > INT32_MAX)
      return Verdict::no(std::string(what) + " = " + std::to_string(v) +
                         " is past 32-bit indexing (the Triton kernels take i32 sizes and leading dimensions)");
  // gemm_tiled rounds K up to whole k tiles (up to 256) in i32.
  if (p.k > INT32_MAX - 1024)
    return Verdict::no("k = " + std::to_string(p.k) + " is too close to 2^31 (the Triton kernels round k up in i32)");
  if (is_fp8(p.d.dtype)) return Verdict::no("fp8 output is not offered by the Triton templates");
  return Verdict::yes();
}

int64_t shared_estimate(const Config& c, const GemmProblem& p) {
  int64_t stage = int64_t(c.block_m) * c.block_k * int64_t(size_of(p.a.dtype)) +
                  int64_t(c.block_k) * c.block_n * int64_t(size_of(p.b.dtype));
  int64_t bytes = stage * c.num_stages;
  if (c.kind == KernelKind::persistent) bytes += int64_t(c.block_m) * c.block_n * int64_t(size_of(p.d.dtype));
  return bytes;
}

Verdict check(const Config& c, const GemmProblem& p, int num_sms) {
  if (Verdict v = problem_verdict(p); !v) return v;
  // Block scales change every 128 of k: a k slice must not straddle two scale blocks.
  if (p.scale == ScaleMode::block && kScaleBlock % c.block_k != 0)
    return Verdict::no(c.name() + ": block scales need BLOCK_K to divide 128");
  if (int64_t(c.block_m) * c.block_n > 65536)
    return Verdict::no(c.name() + ": the fp32 accumulator exceeds the register file");
  if (int64_t s = shared_estimate(c, p); s > kMaxSharedBytes)
    return Verdict::no(c.name() + ": needs about " + std::to_string(s) + " bytes of shared memory (sm_90: " +
                       std::to_string(kMaxSharedBytes) + ")");
  if (c.kind == KernelKind::persistent) {
    if (num_sms < 1) return Verdict::no(c.name() + ": needs the device's SM count");
    if (p.lda() % 16 != 0 || p.ldb() % 16 != 0)
      return Verdict::no(c.name() + ": TMA reads A and B: their leading dimensions must be multiples of 16 elements");
    bool k_major = p.a.layout == Layout::row && p.b.layout == Layout::col;
    if (!half_input(p.a.dtype) && !k_major)
      return Verdict::no(c.name() + ": fp8 and fp32 inputs need A row-major and B column-major (wgmma reads them K-major)");
  }
  if (tiles(c, p) > INT32_MAX || (c.split_k > 1 && cdiv(p.m * p.n, kReduceBlock) > INT32_MAX))
    return Verdict::no(c.name() + ": the grid exceeds 2^31-1 programs");
  if (c.split_k > 1) {
    if (workspace_bytes(c, p) > kMaxWorkspaceBytes)
      return Verdict::no(c.name() + ": the split-k workspace would exceed " +
                         std::to_string(kMaxWorkspaceBytes >> 20) + " MiB");
    if (cdiv(p.k, c.block_k) < c.split_k)
      return Verdict::no(c.name() + ": k = " + std::to_string(p.k) + " leaves some of the splits without work");
  }
  return Verdict::yes();
}

std::vector<Config> configs_for(const GemmProblem& p, int num_sms) {
  std::vector<Config> out;
  if (!problem_verdict(p)) return out;
  const bool large = large_problem(p, num_sms);
  if (is_fp8(p.a.dtype)) {
    // Not large: the general tiled shapes with BLOCK_K >= 64 (an fp8 wgmma takes K = 32: a
    // 32-deep stage is one MMA; on the H200 they were the slowest) plus the fp8 shapes.
    if (!large) add_tiled(out, kTiled, p, num_sms, p.k >= 128 ? 64 : 0);
    add_tiled(out, kFp8Tiled, p, num_sms);
    add_persistent(out, kFp8Persistent, p, num_sms);
  } else if (large && half_input(p.a.dtype)) {
    add_tiled(out, kLargeTiled, p, num_sms);
    add_persistent(out, kLargePersistent, p, num_sms);
  } else {
    add_tiled(out, kTiled, p, num_sms);
    add_persistent(out, kPersistent, p, num_sms);
  }
  add_split_k(out, p, num_sms);  // none for large problems (enough tiles)
  return out;
}

// ---- parameters and grids ---------------------------------------------------------------------

json gemm_params(const Config& c, const GemmProblem& p, int num_sms) {
  const bool persistent = c.kind == KernelKind::persistent;
  return json{
      {"kernel", persistent ? "gemm_persistent" : "gemm_tiled"},
      {"a_dtype", to_string(p.a.dtype)},
      {"b_dtype", to_string(p.b.dtype)},
      {"out_dtype", to_string(p.d.dtype)},
      {"a_row", p.a.layout == Layout::row},
      {"b_row", p.b.layout == Layout::row},
      {"c_row", (p.uses_c() ? p.c.layout : p.d.layout) == Layout::row},
      {"d_row", p.d.layout == Layout::row},
      {"has_c", p.uses_c()},
      {"has_bias", p.bias},
      {"act", to_string(p.act)},
      {"scale", to_string(p.scale)},
      {"tf32", p.tf32},
      {"block_m", c.block_m},
      {"block_n", c.block_n},
      {"block_k", c.block_k},
      {"group_m", c.group_m},
      {"split_k", c.split_k},
      {"num_sms", persistent ? num_sms : 0},  // a constexpr of the persistent kernel only
      {"num_warps", c.num_warps},
      {"num_stages", c.num_stages},
      // gemm_tiled's main loop: no K mask when every k tile is whole; i32 A/B offsets when
      // they fit (persistent: false, unused).
      {"even_k", !persistent && p.k % c.block_k == 0},
      {"i32_offsets", !persistent && main_loop_fits_i32(c, p)},
      {"ld_div16",
       {{"a", p.lda() % 16 == 0}, {"b", p.ldb() % 16 == 0}, {"c", p.uses_c() && p.ldc() % 16 == 0},
        {"d", p.ldd() % 16 == 0}}},
      // Divisibility hints for the i32 sizes (gemmtune.triton_compile's optional field).
      {"dims_div16", {{"m", p.m % 16 == 0}, {"n", p.n % 16 == 0}, {"k", p.k % 16 == 0}}},
  };
}

json reduce_params(const Config& c, const GemmProblem& p) {
  return json{
      {"kernel", "splitk_reduce"},
      {"out_dtype", to_string(p.d.dtype)},
      {"c_row", (p.uses_c() ? p.c.layout : p.d.layout) == Layout::row},
      {"d_row", p.d.layout == Layout::row},
      {"has_c", p.uses_c()},
      {"has_bias", p.bias},
      {"act", to_string(p.act)},
      {"scale", to_string(p.scale)},
      {"split_k", c.split_k},
      {"block", kReduceBlock},
      {"num_warps", 4},
      {"num_stages", 1},
      {"ld_div16", {{"a", false}, {"b", false}, {"c", p.uses_c() && p.ldc() % 16 == 0}, {"d", p.ldd() % 16 == 0}}},
      {"dims_div16", {{"m", p.m % 16 == 0}, {"n", p.n % 16 == 0}, {"k", false}}},
  };
}

Grid gemm_grid(const Config& c, const GemmProblem& p, int num_sms) {
  int64_t t = tiles(c, p);
  if (c.kind == KernelKind::persistent) return {unsigned(std::min<int64_t>(num_sms, t)), 1, 1};
  return {unsigned(t), unsigned(c.split_k), 1};
}

Grid reduce_grid(const GemmProblem& p) { return {unsigned(cdiv(p.m * p.n, kReduceBlock)), 1, 1}; }

int64_t workspace_bytes(const Config& c, const GemmProblem& p) {
  return c.split_k > 1 ? int64_t(c.split_k) * p.m * p.n * int64_t(sizeof(float)) : 0;
}

}  // namespace gemmtune::triton
