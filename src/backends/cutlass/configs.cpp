// The CUTLASS backend's config space and pruning (see configs.hpp).
#include "backends/cutlass/configs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/config_util.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cutlass_backend {
namespace {

// Kernel-term extents: with swap-AB the kernel computes D^T[n, m].
int64_t kernel_m(const Config& c, const GemmProblem& p) { return c.swap_ab ? p.n : p.m; }
int64_t kernel_n(const Config& c, const GemmProblem& p) { return c.swap_ab ? p.m : p.n; }

// Swap-AB is worth a candidate when m is small next to n (decode-like shapes).
bool swap_worthwhile(const GemmProblem& p) { return p.m <= 128 && p.n >= 2 * p.m; }

const char* dtype_enum(DType t) {
  switch (t) {
    case DType::bf16: return "Dt::bf16";
    case DType::fp16: return "Dt::fp16";
    case DType::e4m3: return "Dt::e4m3";
    case DType::e5m2: return "Dt::e5m2";
    case DType::fp32: break;
  }
  GT_THROW(std::string("cutlass: no kernel dtype for ") + to_string(t));
}

const char* act_enum(Activation a) {
  switch (a) {
    case Activation::none: return "Act::none";
    case Activation::relu: return "Act::relu";
    case Activation::gelu_tanh: return "Act::gelu_tanh";
    case Activation::silu: return "Act::silu";
  }
  return "Act::none";
}

const char* scale_enum(ScaleMode s) {
  switch (s) {
    case ScaleMode::none: return "Scale::none";
    case ScaleMode::tensorwise: return "Scale::tensorwise";
    case ScaleMode::rowwise: return "Scale::rowwise";
    case ScaleMode::block: return "Scale::block";
  }
  return "Scale::none";
}

}  // namespace

// ---- Config -----------------------------------------------------------------------------------

Config Config::compiled() const {
  Config c = *this;
  c.raster = Raster::heuristic, c.swizzle = 1;
  return c;
}

std::string Config::id() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%dx%dx%dc%dx%d%s", schedule == Schedule::cooperative ? "co" : "pp", tile_m,
                tile_n, tile_k, cluster_m, cluster_n, swap_ab ? "s" : "");
  std::string id = buf;
  if (raster != Raster::heuristic) id += (raster == Raster::along_m ? "rm" : "rn") + std::to_string(swizzle);
  return id;
}

std::string Config::name() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s %dx%dx%d cluster %dx%d%s",
                schedule == Schedule::cooperative ? "cooperative" : "pingpong", tile_m, tile_n, tile_k, cluster_m,
                cluster_n, swap_ab ? " swap-AB" : "");
  std::string name = buf;
  if (raster != Raster::heuristic)
    name += std::string(", tiles in bands of ") + std::to_string(swizzle) + (raster == Raster::along_m ? " along M" : " along N");
  return name;
}

Config Config::parse(std::string_view id) {
  auto bad = [&](const char* why) -> Config {
    GT_THROW("cutlass: config id '" + std::string(id) + "' is not valid (" + why +
             "; expected e.g. co128x128x64c1x1 or pp64x128x64c2x1s)");
  };
  Config c;
  if (id.substr(0, 2) == "co") c.schedule = Schedule::cooperative;
  else if (id.substr(0, 2) == "pp") c.schedule = Schedule::pingpong;
  else return bad("schedule prefix must be co or pp");
  size_t pos = 2;
  if (!take_int(id, pos, c.tile_m) || !take_char(id, pos, 'x') || !take_int(id, pos, c.tile_n) ||
      !take_char(id, pos, 'x') || !take_int(id, pos, c.tile_k) || !take_char(id, pos, 'c') ||
      !take_int(id, pos, c.cluster_m) || !take_char(id, pos, 'x') || !take_int(id, pos, c.cluster_n))
    return bad("malformed");
  if (pos < id.size() && id[pos] == 's') c.swap_ab = true, ++pos;
  if (pos + 1 < id.size() && id[pos] == 'r' && (id[pos + 1] == 'm' || id[pos + 1] == 'n')) {
    c.raster = id[pos + 1] == 'm' ? Raster::along_m : Raster::along_n;
    pos += 2;
    if (!take_int(id, pos, c.swizzle)) return bad("malformed tile order");
  }
  if (pos != id.size()) return bad("trailing characters");
  auto in = [](int v, std::initializer_list<int> ok) { return std::find(ok.begin(), ok.end(), v) != ok.end(); };
  if (!in(c.tile_m, {64, 128, 256}) || !in(c.tile_n, {64, 128, 192, 256}) || !in(c.tile_k, {64, 128}) ||
      !in(c.cluster_m, {1, 2}) || !in(c.cluster_n, {1, 2}) || c.cluster_m * c.cluster_n > 2 ||
      !in(c.swizzle, {1, 2, 4, 8}))
    return bad("value out of range");
  if (c.id() != id) return bad("not canonical");
  return c;
}

// ---- rules ------------------------------------------------------------------------------------

Verdict problem_verdict(const GemmProblem& p) {
  const bool fp8 = is_fp8(p.a.dtype) && is_fp8(p.b.dtype);
  if (!fp8 && !(is_16bit(p.a.dtype) && p.a.dtype == p.b.dtype))
    return Verdict::no(std::string("inputs ") + to_string(p.a.dtype) + "/" + to_string(p.b.dtype) +
                       ": only bf16, fp16 and fp8 (e4m3/e5m2) inputs have a CUTLASS kernel here (fp32 is cuBLASLt's)");
  if (!is_16bit(p.d.dtype))
    return Verdict::no(std::string("output ") + to_string(p.d.dtype) + ": only bf16 and fp16 outputs are supported");
  if (!fp8 && p.d.dtype != p.a.dtype) return Verdict::no("16-bit inputs need D of the same dtype");
  if (fp8 && !(p.a.layout == Layout::row && p.b.layout == Layout::col))
    return Verdict::no("fp8 needs A row-major and B column-major (wgmma reads fp8 K-major only)");
  // Block scales: A's are loaded by TMA, each k block's m scales from b * m, 16-byte aligned only
  // when m is a multiple of 4.
  if (p.scale == ScaleMode::block && p.m % 4 != 0)
    return Verdict::no("block scales need m a multiple of 4 (A's scales are loaded by TMA: each k block's m scales "
                       "must start on 16 bytes)");
  // The template has one layout for C and D (LayoutD serves both, and InstanceSpec records only
  // d_row): a C of the other layout would be read transposed. Refuse rather than read it wrong.
  if (p.uses_c() && p.c.layout != p.d.layout)
    return Verdict::no(std::string("C is ") + to_string(p.c.layout) + "-major but D is " + to_string(p.d.layout) +
                       "-major: this kernel reads C in D's layout");
  if (p.tf32) return Verdict::no("tf32 applies to fp32 inputs, which this backend leaves to cuBLASLt");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (p.m > kMax || p.n > kMax || p.k > kMax) return Verdict::no("m, n and k must fit in int32");
  // TMA: the stride of every non-contiguous dimension must be a multiple of 16 bytes.
  std::string why;
  if (!tma_ld_ok("a", p.a.dtype, p.lda(), why) || !tma_ld_ok("b", p.b.dtype, p.ldb(), why) ||
      !tma_ld_ok("d", p.d.dtype, p.ldd(), why) || (p.uses_c() && !tma_ld_ok("c", p.c.dtype, p.ldc(), why)))
    return Verdict::no(why);
  return Verdict::yes();
}

int64_t stage_bytes(const Config& c, const GemmProblem& p) {
  // Block scales ride in each stage: tile M of A's (fp32) and B's one, padded.
  const int64_t scales = p.scale == ScaleMode::block ? int64_t(c.tile_m) * 4 + 16 : 0;
  return int64_t(c.tile_m) * c.tile_k * int64_t(size_of(c.swap_ab ? p.b.dtype : p.a.dtype)) +
         int64_t(c.tile_n) * c.tile_k * int64_t(size_of(c.swap_ab ? p.a.dtype : p.b.dtype)) + scales;
}

int64_t epilogue_bytes(const Config& c, const GemmProblem& p) {
  // CUTLASS's auto epilogue tile is (64 or 128) x 32 per subtile: D staged twice, C (when read)
  // four times, plus a row-broadcast vector of tile N for bias or rowwise scales, plus the
  // pipelines' barriers. An over-estimate by design: a config that fits here fits there.
  const int64_t epi_m = std::min(c.tile_m, c.schedule == Schedule::cooperative ? 128 : 64);
  const int64_t sub = epi_m * 32 * int64_t(size_of(p.d.dtype));
  int64_t bytes = 2 * sub + (p.uses_c() ? 4 * sub : 0);
  if (p.bias || p.scale == ScaleMode::rowwise) bytes += 2 * int64_t(std::max(c.tile_m, c.tile_n)) * 4;
  return bytes + 1024;
}

int stages(const Config& c, const GemmProblem& p) {
  return int((kMaxSharedBytes - epilogue_bytes(c, p)) / stage_bytes(c, p));
}

Verdict check(const Config& c, const GemmProblem& p) {
  auto no = [&](const std::string& why) { return Verdict::no(c.id() + ": " + why); };
  const int in_bytes = int(size_of(p.a.dtype));
  if (c.tile_k * in_bytes != 128) return no("tile K must span 128 bytes (64 for 16-bit inputs, 128 for fp8)");
  if (c.schedule == Schedule::cooperative && c.tile_m < 128)
    return no("cooperative splits tile M over two warp groups: tile M >= 128");
  if (c.schedule == Schedule::pingpong && c.tile_m > 128) return no("ping-pong: tile M <= 128");
  // fp32 accumulators per consumer thread. fp8 mainloops keep partial sums in one more register
  // tile (promotion, kernel/sm90_gemm.cuh): past 96 accumulators they spill (measured: 128x256
  // cooperative and 128x128 ping-pong fp8 ran 2-3x slower than 128x128 cooperative).
  const int threads = c.schedule == Schedule::cooperative ? 256 : 128;
  const int acc = c.tile_m * c.tile_n / threads;
  if (acc > 128) return no("accumulators exceed 128 registers per thread");
  if (is_fp8(p.a.dtype) && acc > 96)
    return no("fp8 accumulators and their promotion tile exceed 2 x 96 registers per thread");
  if (p.scale == ScaleMode::block) {
    // One B scale block per tile and k tile, and the block promotion's three accumulator tiles
    // (kernel/sm90_gemm.cuh, Fp8BlockOverlapMainloop).
    if (c.swap_ab) return no("block scales: no swap-AB kernel (A's 1x128 scales are per kernel row)");
    if (c.tile_n != 128) return no("block scales: tile N must be 128, one block of B's scales");
    if (acc > 64) return no("block scales: the overlapped promotion keeps 3 x the accumulators, at most 64 per thread");
  }
  if (c.cluster_m * c.cluster_n > 2) return no("cluster must be 1x1, 2x1 or 1x2");
  if (Verdict v = tile_order_verdict(c); !v) return no(v.reason);
  if (int s = stages(c, p); s < kMinStages)
    return no("shared memory: " + std::to_string(s) + " mainloop stages fit (need " + std::to_string(kMinStages) + ")");
  return Verdict::yes();
}

// ---- enumeration and ranking ------------------------------------------------------------------

std::vector<Config> valid_configs(const GemmProblem& p) {
  std::vector<Config> out;
  const int tile_k = 128 / int(size_of(p.a.dtype));
  const std::pair<int, int> clusters[] = {{1, 1}, {2, 1}, {1, 2}};
  for (bool swap : {false, true})
    for (Schedule s : {Schedule::cooperative, Schedule::pingpong})
      for (int tm : {64, 128, 256})
        for (int tn : {64, 128, 192, 256})
          for (auto [cm, cn] : clusters) {
            Config c{tm, tn, tile_k, cm, cn, s, swap};
            if (check(c, p)) out.push_back(c);
          }
  return out;
}

double cost_estimate(const Config& c, const GemmProblem& p, int sm_count) {
  double cost = persistent_cost(c, kernel_m(c, p), kernel_n(c, p), p.k, sm_count);
  // Ping-pong overlaps one warp group's epilogue with the other's MMA: better for short K.
  if (c.schedule == Schedule::pingpong && p.k <= 2048) cost *= 0.98;
  return cost;
}

std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs) {
  return configs_for(p, sm_count, max_configs, {});
}

std::vector<Config> configs_for(const GemmProblem& p, int sm_count, int max_configs,
                                const std::function<bool(const Config&)>& admit) {
  if (!problem_verdict(p)) return {};
  std::vector<Config> keep;
  for (const Config& c : valid_configs(p)) {
    if (c.swap_ab && !swap_worthwhile(p)) continue;
    // A tile far larger than its extent only multiplies padding: allow up to the extent's next
    // power of two (at least 64, the smallest tile).
    const int64_t M = kernel_m(c, p), N = kernel_n(c, p);
    if (c.tile_m > std::max<int64_t>(64, next_pow2(M)) || c.tile_n > std::max<int64_t>(64, next_pow2(N))) continue;
    // A cluster along a dimension with a single tile only idles its partner.
    if ((c.cluster_m > 1 && ceil_div(M, c.tile_m) < 2) || (c.cluster_n > 1 && ceil_div(N, c.tile_n) < 2)) continue;
    if (admit && !admit(c)) continue;
    keep.push_back(c);
  }
  std::stable_sort(keep.begin(), keep.end(), [&](const Config& x, const Config& y) {
    return cost_estimate(x, p, sm_count) < cost_estimate(y, p, sm_count);
  });
  if (max_configs <= 0 || int(keep.size()) <= max_configs) return keep;

  // The best `max_configs`, with the best of each (schedule, swap) class kept in.
  std::vector<Config> out = best_with_each_class(
      keep, max_configs, [](const Config& c) { return std::pair<int, bool>(int(c.schedule), c.swap_ab); });
  // In `keep`'s (cost) order, so that ties are ordered as in the uncapped list: the result is
  // then a function of the chosen set alone (what `admit` relies on).
  std::vector<Config> ranked;
  for (const Config& c : keep)
    if (std::find(out.begin(), out.end(), c) != out.end()) ranked.push_back(c);
  return ranked;
}

Verdict tile_order_verdict(const Config& c) {
  if (c.swizzle != 1 && c.swizzle != 2 && c.swizzle != 4 && c.swizzle != 8)
    return Verdict::no("swizzle must be 1, 2, 4 or 8");
  if (c.raster == Raster::heuristic && c.swizzle != 1) return Verdict::no("the heuristic tile order takes no swizzle");
  return Verdict::yes();
}

std::array<Config, 2> banded_tile_orders(const Config& c) {
  std::array<Config, 2> out{c, c};
  out[0].raster = Raster::along_m, out[1].raster = Raster::along_n;
  out[0].swizzle = out[1].swizzle = 8;
  return out;
}

std::vector<Config> with_tile_orders(std::vector<Config> ranked, const GemmProblem& p) {
  const int64_t operands = (p.m + p.n) * p.k * int64_t(size_of(p.a.dtype));
  const size_t n = std::min<size_t>(ranked.size(), kOrderedConfigs);
  for (size_t i = 0; i < n; ++i) {
    const Config c = ranked[i];
    if (operands < kLargeOperandBytes || ceil_div(kernel_m(c, p), c.tile_m) < 8 || ceil_div(kernel_n(c, p), c.tile_n) < 8)
      continue;
    for (const Config& v : banded_tile_orders(c)) ranked.push_back(v);
  }
  return ranked;
}

// ---- instances --------------------------------------------------------------------------------

InstanceSpec InstanceSpec::of(const Config& c, const GemmProblem& p) {
  InstanceSpec s;
  s.a = p.a.dtype, s.b = p.b.dtype, s.d = p.d.dtype;
  s.a_row = p.a.layout == Layout::row, s.b_row = p.b.layout == Layout::row, s.d_row = p.d.layout == Layout::row;
  s.has_c = p.uses_c(), s.bias = p.bias, s.act = p.act, s.scale = p.scale;
  s.config = c.compiled();
  return s;
}

std::string InstanceSpec::text() const {
  std::string t = std::string("a=") + to_string(a) + " b=" + to_string(b) + " d=" + to_string(d) + " layout=" +
                  (a_row ? "r" : "c") + (b_row ? "r" : "c") + (d_row ? "r" : "c") + " c=" + (has_c ? "1" : "0") +
                  " bias=" + (bias ? "1" : "0") + " act=" + to_string(act) + " scale=" + to_string(scale) +
                  " cfg=" + config.id();
  return t;
}

std::string InstanceSpec::source() const {
  const Config& c = config;
  auto b = [](bool v) { return v ? "true" : "false"; };
  char buf[2048];
  const int n = std::snprintf(buf, sizeof buf,
                "// Generated by gemmtune (src/backends/cutlass/configs.cpp): one CUTLASS instance, in\n"
                "// namespace GT_CUTLASS_MEMBER (src/compile/nvcc.cpp defines it).\n"
                "// %s\n"
                "#include \"sm90_gemm.cuh\"\n"
                "namespace GT_CUTLASS_MEMBER {\n"
                "namespace gk = gemmtune::cutlass_kernel;\n"
                "using Instance = gk::Sm90Gemm<gk::%s, gk::%s, gk::%s, %s, %s, %s,\n"
                "                              %d, %d, %d, %d, %d, gk::Sched::%s,\n"
                "                              %s, %s, gk::%s, gk::%s, %s>;\n"
                "GT_CUTLASS_DEFINE_ENTRY_POINTS(Instance, \"%s\")\n"
                "}  // namespace GT_CUTLASS_MEMBER\n",
                text().c_str(), dtype_enum(a), dtype_enum(this->b), dtype_enum(d), b(a_row), b(b_row), b(d_row),
                c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,
                c.schedule == Schedule::cooperative ? "cooperative" : "pingpong", b(has_c), b(bias), act_enum(act),
                scale_enum(scale), b(c.swap_ab), text().c_str());
  GT_CHECK(n > 0 && size_t(n) < sizeof buf, "cutlass: the generated source of " + text() + " does not fit its buffer");
  return buf;
}

}  // namespace gemmtune::cutlass_backend
