// The CuTe DSL backend's config space and pruning (see configs.hpp).
#include "backends/cutedsl/configs.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>

#include "core/config_util.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cutedsl {
namespace {

template <class T>
bool one_of(T v, std::initializer_list<T> ok) {
  return std::find(ok.begin(), ok.end(), v) != ok.end();
}

// Kernel-term extents: with swap-AB the kernel computes D^T[n, m].
int64_t kernel_m(const Config& c, const GemmProblem& p) { return c.swap_ab ? p.n : p.m; }
int64_t kernel_n(const Config& c, const GemmProblem& p) { return c.swap_ab ? p.m : p.n; }

// Swap-AB is worth a candidate when m is small next to n (decode-like shapes): the kernel's N
// (wgmma N, down to 32 here) then carries the small extent instead of its M (64 at least).
bool swap_worthwhile(const GemmProblem& p) { return p.m <= 128 && p.n >= 2 * p.m; }

}  // namespace

// ---- Config -----------------------------------------------------------------------------------

std::string Config::id() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%dx%dc%dx%d", tile_m, tile_n, cluster_m, cluster_n);
  std::string s = buf;
  if (stages) std::snprintf(buf, sizeof buf, "p%d", stages), s += buf;
  if (swap_ab) s += 's';
  return s;
}

std::string Config::name() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%dx%d cluster %dx%d", tile_m, tile_n, cluster_m, cluster_n);
  std::string s = buf;
  if (stages) std::snprintf(buf, sizeof buf, " %d stages", stages), s += buf;
  if (swap_ab) s += " swap-AB";
  return s;
}

Config Config::parse(std::string_view id) {
  auto bad = [&](const char* why) -> Config {
    GT_THROW("cutedsl: config id '" + std::string(id) + "' is not valid (" + why +
             "; expected e.g. 128x128c1x1, 64x64c2x1s or 128x256c1x1p3)");
  };
  Config c;
  size_t pos = 0;
  if (!take_int(id, pos, c.tile_m) || !take_char(id, pos, 'x') || !take_int(id, pos, c.tile_n) ||
      !take_char(id, pos, 'c') || !take_int(id, pos, c.cluster_m) || !take_char(id, pos, 'x') ||
      !take_int(id, pos, c.cluster_n))
    return bad("malformed");
  if (pos < id.size() && id[pos] == 'p') {
    ++pos;
    if (!take_int(id, pos, c.stages)) return bad("malformed stages");
  }
  if (pos < id.size() && id[pos] == 's') c.swap_ab = true, ++pos;
  if (pos != id.size()) return bad("trailing characters");
  if (!one_of(c.tile_m, {64, 128}) || !one_of(c.tile_n, {32, 64, 128, 192, 256}) || !one_of(c.cluster_m, {1, 2}) ||
      !one_of(c.cluster_n, {1, 2}) || c.cluster_m * c.cluster_n > 2 || (c.stages != 0 && (c.stages < 2 || c.stages > 16)))
    return bad("value out of range");
  if (c.id() != id) return bad("not canonical");
  return c;
}

// ---- resources --------------------------------------------------------------------------------

int tile_k(const GemmProblem& p) { return 128 / int(size_of(p.a.dtype)); }

int64_t stage_bytes(const Config& c, const GemmProblem& p) {
  return int64_t(c.tile_m + c.tile_n) * tile_k(p) * int64_t(size_of(p.a.dtype));
}

int64_t scale_ring_bytes(const Config& c, const GemmProblem& p) {
  if (p.scale != ScaleMode::block) return 0;
  // gemm_sm90.py scale_ring_bytes at its smallest chunk (4 k blocks), which sets the stage count:
  // 2 stages of the tile's 1x128 scales (one per row along them: the kernel's N with swap-AB)
  // x 4, plus 32 fp32 for B's block scales (a 128-byte aligned box).
  const int vary = c.swap_ab ? c.tile_n : c.tile_m;
  return 2 * 4 * (int64_t(vary) * 4 + 32);
}

int64_t epilogue_bytes(const Config& c, const GemmProblem& p) {
  return int64_t(kEpiStages) * std::min(c.tile_m, 128) * std::min(32, c.tile_n) * int64_t(size_of(p.d.dtype));
}

int max_stages(const Config& c, const GemmProblem& p) {
  return int((kMaxSharedBytes - kSharedReserve - epilogue_bytes(c, p) - scale_ring_bytes(c, p)) / stage_bytes(c, p));
}

int accumulator_registers(const Config& c, const GemmProblem& p) {
  const int regs = 64 * c.tile_n / 128;  // a warpgroup's 64 x tile_n fp32 over its 128 threads
  if (!is_fp8(p.a.dtype)) return regs;
  // fp8: + two tiles of partial sums (overlapped promotion) up to tile N 128, one above.
  return c.tile_n <= 128 ? 3 * regs : 2 * regs;
}

// ---- rules ------------------------------------------------------------------------------------

Verdict problem_verdict(const GemmProblem& p) {
  const bool fp8 = is_fp8(p.a.dtype) && is_fp8(p.b.dtype);
  if (!fp8 && !(is_16bit(p.a.dtype) && p.a.dtype == p.b.dtype))
    return Verdict::no(std::string("inputs ") + to_string(p.a.dtype) + "/" + to_string(p.b.dtype) +
                       ": only bf16, fp16 and fp8 (e4m3/e5m2) inputs have a CuTe DSL kernel here");
  if (fp8 && p.a.dtype == DType::e5m2 && p.b.dtype == DType::e5m2)
    return Verdict::no("e5m2 x e5m2: wgmma has no such pairing");
  if (!is_16bit(p.d.dtype))
    return Verdict::no(std::string("output ") + to_string(p.d.dtype) + ": only bf16 and fp16 outputs are supported");
  if (fp8 && !(p.a.layout == Layout::row && p.b.layout == Layout::col))
    return Verdict::no("fp8 needs A row-major and B column-major (wgmma reads fp8 K-major only)");
  if (p.scale != ScaleMode::none && !fp8) return Verdict::no("scales apply to fp8 inputs only");
  if (p.tf32) return Verdict::no("tf32 applies to fp32 inputs, which this backend leaves to cuBLASLt");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (p.m > kMax || p.n > kMax || p.k > kMax) return Verdict::no("m, n and k must fit in int32");
  // Block scales are indexed with int32 in the kernel.
  if (p.scale == ScaleMode::block && (p.scale_a_elems() > kMax || p.scale_b_elems() > kMax))
    return Verdict::no("block scales: m * ceil(k/128) and ceil(n/128) * round_up(ceil(k/128), 4) must fit in int32");
  // Block scales are loaded by TMA: each k block's m scales of A must start on 16 bytes.
  if (p.scale == ScaleMode::block && p.m % 4 != 0)
    return Verdict::no("block scales need m a multiple of 4 (A's scales are loaded by TMA: each k block's m scales "
                       "must start on 16 bytes)");
  // TMA (A, B loads and D stores): every non-unit stride a multiple of 16 bytes. C is read
  // element by element, any leading dimension works.
  std::string why;
  if (!tma_ld_ok("a", p.a.dtype, p.lda(), why) || !tma_ld_ok("b", p.b.dtype, p.ldb(), why) ||
      !tma_ld_ok("d", p.d.dtype, p.ldd(), why))
    return Verdict::no(why);
  return Verdict::yes();
}

Verdict check(const Config& c, const GemmProblem& p) {
  auto no = [&](const std::string& why) { return Verdict::no(c.id() + ": " + why); };
  if (!one_of(c.tile_m, {64, 128})) return no("tile M must be 64 or 128 (one or two consumer warpgroups)");
  if (!one_of(c.tile_n, {32, 64, 128, 192, 256})) return no("tile N must be 32, 64, 128, 192 or 256");
  if (!one_of(c.cluster_m, {1, 2}) || !one_of(c.cluster_n, {1, 2}) || c.cluster_m * c.cluster_n > 2)
    return no("cluster must be 1x1, 2x1 or 1x2");
  // 128 accumulators per thread at most; fp8's register tiles (accumulators + partial sums:
  // three up to N 128, two above) at most 192: N <= 192.
  if (int r = accumulator_registers(c, p), limit = is_fp8(p.a.dtype) ? 192 : 128; r > limit)
    return no("accumulators need " + std::to_string(r) + " registers per thread (at most " + std::to_string(limit) +
              (is_fp8(p.a.dtype) ? ", fp8 keeps its partial sums in registers too" : "") + ")");
  // Block scales: the k tile (128 fp8) is the scales' k block. Every tile here works: tile N 192
  // straddles two of B's 128x128 blocks, so the kernel cuts it into 64-column bands with one B scale
  // each (scale_bands in gemm_sm90.py; tile N 160 or 224 would need more bands and is not offered).
  const int fit = max_stages(c, p);
  if (fit < kMinStages)
    return no("shared memory: " + std::to_string(fit) + " mainloop stages fit (need " + std::to_string(kMinStages) + ")");
  if (c.stages != 0 && (c.stages < kMinStages || c.stages > fit))
    return no(std::to_string(c.stages) + " stages do not fit (" + std::to_string(kMinStages) + ".." +
              std::to_string(fit) + ")");
  return Verdict::yes();
}

// ---- enumeration and ranking ------------------------------------------------------------------

std::vector<Config> valid_configs(const GemmProblem& p) {
  std::vector<Config> out;
  const std::pair<int, int> clusters[] = {{1, 1}, {2, 1}, {1, 2}};
  for (bool swap : {false, true})
    for (int tm : {64, 128})
      for (int tn : {32, 64, 128, 192, 256})
        for (auto [cm, cn] : clusters) {
          // 192: fp8's widest tile (two register tiles of 256 would not fit); 16-bit has 256.
          if (tn == 192 && !is_fp8(p.a.dtype)) continue;
          Config c{tm, tn, cm, cn, 0, swap};
          if (check(c, p)) out.push_back(c);
        }
  return out;
}

double cost_estimate(const Config& c, const GemmProblem& p, int sm_count) {
  // One consumer warpgroup (tile M 64) issues half the wgmma of two: 0.9 of the efficiency.
  return persistent_cost(c, kernel_m(c, p), kernel_n(c, p), p.k, sm_count, c.tile_m == 64 ? 0.9 : 1.0);
}

std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs,
                                const std::function<bool(const Config&)>& admit) {
  if (!problem_verdict(p)) return {};
  std::vector<Config> keep;
  for (const Config& c : valid_configs(p)) {
    if (c.swap_ab && !swap_worthwhile(p)) continue;
    const int64_t M = kernel_m(c, p), N = kernel_n(c, p);
    // A tile far larger than its extent only multiplies padding: at most the extent's next power
    // of two (at least the smallest tile); tile N 32 only where N itself is that small.
    if (c.tile_m > std::max<int64_t>(64, next_pow2(M)) || c.tile_n > std::max<int64_t>(32, next_pow2(N))) continue;
    if (c.tile_n == 32 && N > 32) continue;
    // A cluster along a dimension with a single tile only idles its partner.
    if ((c.cluster_m > 1 && ceil_div(M, c.tile_m) < 2) || (c.cluster_n > 1 && ceil_div(N, c.tile_n) < 2)) continue;
    if (admit && !admit(c)) continue;
    keep.push_back(c);
  }
  auto by_cost = [&](const Config& x, const Config& y) {
    return cost_estimate(x, p, sm_count) < cost_estimate(y, p, sm_count);
  };
  std::stable_sort(keep.begin(), keep.end(), by_cost);
  if (max_configs <= 0 || int(keep.size()) <= max_configs) return keep;
  // The best max_configs, with the best of each (swap-AB, clustered) class kept in.
  std::vector<Config> out = best_with_each_class(keep, max_configs, [](const Config& c) {
    return std::pair<bool, bool>(c.swap_ab, c.cluster_m * c.cluster_n > 1);
  });
  std::stable_sort(out.begin(), out.end(), by_cost);
  return out;
}

nlohmann::json params(const Config& c, const GemmProblem& p) {
  const bool d_row = p.d.layout == Layout::row;
  return nlohmann::json{
      {"a_dtype", to_string(p.a.dtype)},
      {"b_dtype", to_string(p.b.dtype)},
      {"d_dtype", to_string(p.d.dtype)},
      {"a_row", p.a.layout == Layout::row},
      {"b_row", p.b.layout == Layout::row},
      {"c_row", p.uses_c() ? p.c.layout == Layout::row : d_row},
      {"d_row", d_row},
      {"has_c", p.uses_c()},
      {"bias", p.bias},
      {"act", to_string(p.act)},
      {"scale", to_string(p.scale)},
      {"tile_m", c.tile_m},
      {"tile_n", c.tile_n},
      {"cluster_m", c.cluster_m},
      {"cluster_n", c.cluster_n},
      {"stages", c.stages},
      {"swap_ab", c.swap_ab},
  };
}

}  // namespace gemmtune::cutedsl
