// Small helpers shared by the backends' config spaces (backends/*/configs.cpp): config-id
// parsing, the integer arithmetic of their pruning rules, and the ranking the two Hopper
// persistent GEMM spaces (cutlass, cutedsl) share. Header-only.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gemmtune/problem.hpp"

namespace gemmtune {

// ---- config-id parsing ------------------------------------------------------------------------

// Parses a decimal int at `pos` in `s`, advancing pos; false (pos unchanged) when there is none.
inline bool take_int(std::string_view s, size_t& pos, int& out) {
  auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), out);
  if (ec != std::errc() || ptr == s.data() + pos) return false;
  pos = size_t(ptr - s.data());
  return true;
}

// Consumes the character `c` at `pos` in `s`, advancing pos; false (pos unchanged) when another is there.
inline bool take_char(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

// ---- arithmetic and dtypes --------------------------------------------------------------------

// a / b rounded up, for a >= 0 and b > 0.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The least power of two >= x (1 for x <= 1).
inline int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

inline bool is_16bit(DType t) { return t == DType::bf16 || t == DType::fp16; }

// Whether `ld` elements of `t` span a multiple of 16 bytes, TMA's rule for every non-unit stride;
// when not, sets `why` ("TMA needs 16-byte-aligned rows: lda = ..."), `name` naming the operand.
inline bool tma_ld_ok(const char* name, DType t, int64_t ld, std::string& why) {
  if ((ld * int64_t(size_of(t))) % 16 == 0) return true;
  why = std::string("TMA needs 16-byte-aligned rows: ld") + name + " = " + std::to_string(ld) + " " + to_string(t) +
        " elements is " + std::to_string(ld * int64_t(size_of(t))) + " bytes";
  return false;
}

// ---- ranking the persistent GEMM configs (cutlass, cutedsl) -----------------------------------

// The cost (lower is better) of config `c` (tile_m x tile_n tiles in cluster_m x cluster_n
// clusters) on an m x n x k GEMM (kernel terms) over `sm_count` SMs. The persistent grid runs
// min(clusters, SMs / cluster size) clusters, each taking its share of cluster tiles in turn
// (partial clusters still run), so the time goes with the most tiles any cluster gets (the
// waves). One tile ~ its (padded) MMA work over an efficiency that grows with the tile's
// arithmetic intensity: 1 / (1 + 64/tm + 64/tn) (rewards larger tiles and square-ish ones),
// times `efficiency_scale`. Multicast (clusters of 2+) halves one operand's L2 -> SM traffic: a
// small bonus when there is a wave to share it.
template <class Config>
double persistent_cost(const Config& c, int64_t m, int64_t n, int64_t k, int sm_count, double efficiency_scale = 1.0) {
  const int64_t tiles_m = ceil_div(m, c.tile_m), tiles_n = ceil_div(n, c.tile_n);
  const int64_t clusters = ceil_div(tiles_m, c.cluster_m) * ceil_div(tiles_n, c.cluster_n);
  const int64_t per_wave = std::max<int64_t>(1, sm_count / (c.cluster_m * c.cluster_n));
  const double waves = double(ceil_div(clusters, per_wave));
  const double tile_work = double(c.tile_m) * c.tile_n * double(k);
  double efficiency = 1.0 / (1.0 + 64.0 / c.tile_m + 64.0 / c.tile_n);
  efficiency *= efficiency_scale;
  double cost = waves * double(c.cluster_m * c.cluster_n) * tile_work / efficiency;
  if (c.cluster_m * c.cluster_n > 1 && clusters >= per_wave / 2) cost *= 0.97;
  return cost;
}

// At most `max_configs` of `ranked` (best first; more than max_configs of them): the best of each
// class (`class_of(c)`, a key ordered by <) kept in even when ranked lower (the cost models are
// crude and the race is the judge), then the rest in rank order. Returned in that selection
// order, which callers re-rank.
template <class Config, class ClassOf>
std::vector<Config> best_with_each_class(const std::vector<Config>& ranked, int max_configs, ClassOf class_of) {
  std::vector<Config> out;
  std::set<decltype(class_of(ranked.front()))> classes;
  for (const Config& c : ranked)
    if (int(out.size()) < max_configs && classes.insert(class_of(c)).second) out.push_back(c);
  for (const Config& c : ranked) {
    if (int(out.size()) >= max_configs) break;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

}  // namespace gemmtune
