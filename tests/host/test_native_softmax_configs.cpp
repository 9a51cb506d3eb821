// The native softmax backend's config space: every config can hold the row, one vector width
// (16 bytes where ld allows it, else 1) for the kinds that need aligned rows, 16 bytes always for
// pipe, tiny and wide (they align each row themselves), names are distinct, stable and parse
// back, clusters only for long rows, online always present, the pipe kind (the long-row kernel)
// wherever rows fit 16 CTAs (<= 8 for the suite's bf16 / fp16 rows), within registers and shared
// memory, tiny for rows of at most 1024 columns, wide for at most 64 rows of at least 8192;
// cannot_run() refuses what a config cannot run.
#include <gtest/gtest.h>

#include <numeric>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/native/softmax.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::native;

TEST(NativeSoftmaxConfigs, EveryConfigHoldsTheRow) {
  for (int64_t cols : {1, 31, 32, 33, 64, 1000, 1024, 1025, 4097, 32768, 32769, 65536, 262144, 262147})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32})
      for (int64_t pad : {0, 8}) {
        auto p = SoftmaxProblem::make(7, cols, in);
        p.ld = pad ? cols + pad : 0;
        const auto cfgs = native_softmax_configs(p);
        ASSERT_FALSE(cfgs.empty());
        std::set<std::string> names;
        int online = 0;
        for (const auto& c : cfgs) {
          names.insert(c.name());
          EXPECT_EQ(c.cannot_run(p), "") << c.name() << " for cols " << cols;
          EXPECT_TRUE(c.max_cols() < 0 || c.max_cols() >= cols) << c.name() << " for cols " << cols;
          EXPECT_EQ(c.threads % 32, 0);
          const int max_threads = c.kind == SoftmaxKind::pipe ? (c.elems > 32 ? 512 : 1024)
                                  : c.kind == SoftmaxKind::row ? (c.elems > 32 || c.stages == 2 ? 512 : 1024)
                                  : c.kind == SoftmaxKind::warp || c.elems >= 32 ? 512
                                                                                  : 1024;
          EXPECT_LE(c.threads, max_threads) << c.name();
          EXPECT_TRUE(c.vec == 1 || c.vec == int(16 / size_of(in))) << c.name();
          const bool own_alignment = c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row ||
                                     c.kind == SoftmaxKind::tiny || c.kind == SoftmaxKind::wide ||
                                     c.kind == SoftmaxKind::span || c.kind == SoftmaxKind::band;
          if (c.vec > 1 && !own_alignment) EXPECT_EQ(p.row_stride() % c.vec, 0) << c.name();
          if (own_alignment) EXPECT_EQ(c.vec * int(size_of(in)), 16) << c.name();
          if (c.kind != SoftmaxKind::tiny && c.kind != SoftmaxKind::span) EXPECT_EQ(c.group, 0) << c.name();
          if (c.kind != SoftmaxKind::span) EXPECT_EQ(c.chunk_kib, 0) << c.name();
          if (c.kind != SoftmaxKind::online && c.kind != SoftmaxKind::tiny && c.kind != SoftmaxKind::span)
            EXPECT_EQ(c.elems % c.vec, 0) << c.name();
          if (c.kind == SoftmaxKind::cluster) {
            EXPECT_GE(c.cluster, 2);
            EXPECT_LE(c.cluster, 16);
            EXPECT_LT(int64_t(c.cluster - 1) * c.threads * c.elems, cols) << c.name() << ": an idle CTA";
          } else if (c.kind == SoftmaxKind::smem) {
            EXPECT_EQ(c.vec * int(size_of(in)), 16) << c.name();
            const int64_t slice = ((cols + c.cluster - 1) / c.cluster + c.vec - 1) / c.vec * c.vec;
            EXPECT_LT(int64_t(c.cluster - 1) * slice, cols) << c.name() << ": an idle CTA";
            EXPECT_LE(slice * int64_t(size_of(in)), 96 * 1024) << c.name();
            EXPECT_GE(slice * int64_t(size_of(in)), 8 * 1024 - 16) << c.name();
          } else if (c.kind == SoftmaxKind::pipe) {
            EXPECT_EQ(c.vec * int(size_of(in)), 16) << c.name();
            ASSERT_GE(c.block_rows, 1) << c.name();
            EXPECT_EQ(c.threads / 32 % c.block_rows, 0) << c.name();
            if (c.block_rows > 1) EXPECT_EQ(c.cluster, 1) << c.name();
            const int64_t slice = int64_t(c.threads / c.block_rows) * c.elems;  // a row's columns in one CTA
            EXPECT_TRUE(c.cluster >= 1 && c.cluster <= 16) << c.name();
            // rows not starting on a pack: vec - 1 more (virtual) columns
            EXPECT_GE(slice * c.cluster, cols + (p.row_stride() % c.vec ? c.vec - 1 : 0)) << c.name();
            EXPECT_LT(int64_t(c.cluster - 1) * slice, cols) << c.name() << ": an idle CTA";
            if (c.cluster == 1) EXPECT_LT(slice, 2 * cols) << c.name() << ": most of the slice idle";
            if (c.cluster > 1) EXPECT_GT(cols * int64_t(size_of(in)), 16 * 1024) << c.name() << ": a cluster for a short row";
            EXPECT_TRUE(c.stages == 2 || c.stages == 3) << c.name();
            EXPECT_LE(c.stages * c.block_rows * slice * int64_t(size_of(in)), kNativeSmemDynamicOptIn) << c.name();
            EXPECT_TRUE(c.elems / c.vec == 1 || c.elems / c.vec == 2 || c.elems / c.vec == 4 || c.elems / c.vec == 8) << c.name();
          } else if (c.kind == SoftmaxKind::row) {
            ASSERT_GE(c.block_rows, 1) << c.name();
            EXPECT_EQ(c.threads % c.block_rows, 0) << c.name();
            const int tw = c.threads / c.block_rows;  // threads a row
            EXPECT_TRUE(tw % 32 == 0 || (tw < 32 && (tw & (tw - 1)) == 0)) << c.name();
            if (c.block_rows > 1) EXPECT_EQ(c.cluster, 1) << c.name();
            if (c.block_rows > 1) EXPECT_LT(tw, 128) << c.name();
            const int64_t span = cols + (p.row_stride() % c.vec ? c.vec - 1 : 0);
            const int64_t np = (span + c.vec - 1) / c.vec, q = (np + c.cluster - 1) / c.cluster;  // packs a row, a CTA
            const int64_t P = c.elems / c.vec;
            EXPECT_TRUE(P == 1 || P == 2 || P == 4 || P == 8) << c.name();
            EXPECT_GE(int64_t(tw) * P, q) << c.name();
            EXPECT_GT(2 * q, int64_t(tw) * P) << c.name() << ": most of a thread's packs idle";
            EXPECT_TRUE(c.cluster >= 1 && c.cluster <= 16) << c.name();
            EXPECT_LT(int64_t(c.cluster - 1) * q, np) << c.name() << ": an idle CTA";
            if (c.cluster > 1) EXPECT_GT(cols * int64_t(size_of(in)), 16 * 1024) << c.name() << ": a cluster for a short row";
            EXPECT_GT(cols, 1) << c.name();
          } else if (c.kind == SoftmaxKind::tiny) {
            EXPECT_LE(cols, 1024) << c.name();
            EXPECT_TRUE(c.group == 1 || c.group == 2 || c.group == 4 || c.group == 8 || c.group == 16 || c.group == 32) << c.name();
            EXPECT_TRUE(c.elems == 1 || c.elems == 2 || c.elems == 4 || c.elems == 8 ||
                        (c.group == 32 && (c.elems == 16 || c.elems == 32)))
                << c.name();
            EXPECT_GE(int64_t(c.group) * c.elems, cols) << c.name();
            if (c.group > 1) EXPECT_LT(int64_t(c.group) * c.elems, 2 * cols) << c.name() << ": most of a group idle";
            EXPECT_EQ(c.cluster, 1);
          } else if (c.kind == SoftmaxKind::span) {
            EXPECT_EQ(p.row_stride(), cols) << c.name() << ": packed rows only";
            EXPECT_TRUE(c.threads == 256 || c.threads == 512) << c.name();
            EXPECT_EQ(c.threads % c.group, 0) << c.name();
            if (c.elems > 0) {
              EXPECT_LE(cols, 256) << c.name();
              EXPECT_LE(c.group, 32) << c.name();
              EXPECT_GE(int64_t(c.group) * c.elems, cols) << c.name();
            } else {
              EXPECT_GT(cols, 256) << c.name();
            }
            // offered where the H200 measured it near or ahead of the other kinds
            EXPECT_TRUE(cols <= 16 || (cols > 256 && cols * int64_t(size_of(in)) <= 2048)) << c.name();
            EXPECT_TRUE(c.stages >= 3 && c.stages <= 4) << c.name();
            EXPECT_EQ(c.cluster, 1) << c.name();
          } else if (c.kind == SoftmaxKind::wide) {
            EXPECT_GE(cols, 8192) << c.name();
            EXPECT_LE(c.elems, 32) << c.name();
            EXPECT_LE(c.threads, 512) << c.name();
            EXPECT_EQ(c.cluster, 1);
            if (c.stages > 0) {  // the ring: rows of whole packs, 2 .. 16 slots, 512 compute threads
              EXPECT_EQ(p.row_stride() % c.vec, 0) << c.name();
              EXPECT_EQ(cols % c.vec, 0) << c.name();
              EXPECT_TRUE(c.stages >= 2 && c.stages <= 16) << c.name();
              EXPECT_EQ(c.threads, 512) << c.name();
              EXPECT_EQ(native_softmax_launch(c, p).threads, 576) << c.name();  // + the control and loader warps
            }
          } else if (c.kind == SoftmaxKind::band) {  // rows of whole packs whose chunks fit the slots on 132 SMs
            EXPECT_GE(cols, 8192) << c.name();
            EXPECT_EQ(p.row_stride() % c.vec, 0) << c.name();
            EXPECT_EQ(cols % c.vec, 0) << c.name();
            EXPECT_TRUE(c.stages >= 2 && c.stages <= 64) << c.name();
            const int64_t piece = int64_t(c.threads) * c.elems * int64_t(size_of(in));
            EXPECT_LE(c.stages * piece, 230400) << c.name();
            const int64_t np = ((cols / c.vec + 131) / 132 * 16 + piece - 1) / piece;
            EXPECT_LE(2 * np - std::min<int64_t>(4, np), c.stages) << c.name();  // two rows less 4 held pieces
            EXPECT_EQ(in, DType::fp32) << c.name();
            EXPECT_EQ(native_softmax_launch(c, p).threads, c.threads + 64) << c.name();  // + the loader and sync warps
            EXPECT_EQ(c.cluster, 1);
          } else {
            EXPECT_EQ(c.cluster, 1);
          }
          if (c.kind == SoftmaxKind::row) EXPECT_TRUE(c.stages == 1 || (c.stages == 2 && c.threads <= 512)) << c.name();
          else if (c.kind != SoftmaxKind::pipe && c.kind != SoftmaxKind::span && c.kind != SoftmaxKind::wide &&
                   c.kind != SoftmaxKind::band)
            EXPECT_EQ(c.stages, 0) << c.name();
          if (c.kind != SoftmaxKind::pipe && c.kind != SoftmaxKind::row) EXPECT_EQ(c.block_rows, 1) << c.name();
          EXPECT_EQ(NativeSoftmaxConfig::parse(c.name()), c) << c.name();
          online += c.kind == SoftmaxKind::online;
        }
        EXPECT_EQ(names.size(), cfgs.size()) << "duplicate names";
        EXPECT_EQ(online, cols > 1024 ? 3 : 0);  // tiny holds every row of <= 1024 columns in one pass
      }
}

TEST(NativeSoftmaxConfigs, KindsByRowLength) {
  auto kinds = [](int64_t cols, int64_t ld = 0) {
    auto p = SoftmaxProblem::make(1000, cols);
    p.ld = ld;
    std::set<SoftmaxKind> k;
    for (const auto& c : native_softmax_configs(p)) k.insert(c.kind);
    return k;
  };
  using K = SoftmaxKind;
  // online only past 1024 columns (tiny holds every shorter row)
  // span (bf16): packed rows of 2 .. 16 values and of 257 values to 2 KiB
  EXPECT_EQ(kinds(1), (std::set<K>{K::warp, K::tiny}));
  EXPECT_EQ(kinds(256), (std::set<K>{K::warp, K::block, K::pipe, K::row, K::tiny}));  // pipe: a warp a row, 4 rows a CTA
  EXPECT_EQ(kinds(128), (std::set<K>{K::warp, K::block, K::row, K::tiny}));  // pipe: a warp x 8 elems = 256 columns at least
  EXPECT_EQ(kinds(257), (std::set<K>{K::warp, K::block, K::pipe, K::row, K::tiny, K::span}));  // ld 257: pipe in virtual columns
  EXPECT_EQ(kinds(1024), (std::set<K>{K::warp, K::block, K::pipe, K::row, K::tiny, K::span}));
  EXPECT_EQ(kinds(4097), (std::set<K>{K::block, K::pipe, K::row, K::online}));  // ld 4097: pipe in virtual columns
  EXPECT_EQ(kinds(4097, 4104), (std::set<K>{K::block, K::smem, K::pipe, K::row, K::online}));  // strided: no span
  EXPECT_EQ(kinds(4096), (std::set<K>{K::block, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(16384), (std::set<K>{K::block, K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(16385), (std::set<K>{K::cluster, K::pipe, K::row, K::online}));  // ld 16385: pipe in virtual columns only
  EXPECT_EQ(kinds(16385, 16392), (std::set<K>{K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(65535, 65536), (std::set<K>{K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(50257), (std::set<K>{K::cluster, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(65536), (std::set<K>{K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(262144), (std::set<K>{K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(262143, 262144), (std::set<K>{K::cluster, K::smem, K::pipe, K::row, K::online}));
  EXPECT_EQ(kinds(262147), (std::set<K>{K::pipe, K::row, K::online}));  // pipe: 9 CTAs of 32768 (virtual columns)
  EXPECT_EQ(kinds(200000), (std::set<K>{K::smem, K::pipe, K::row, K::online}));  // pipe: 7 CTAs of 32768 columns
  EXPECT_EQ(kinds(262152), (std::set<K>{K::smem, K::pipe, K::row, K::online}));  // pipe: 9 CTAs of 32768 (non-portable)
  EXPECT_EQ(kinds(1048576), (std::set<K>{K::online}));  // smem: 16 slices of 128 KiB, past 96 KiB
}

// Every row of bench/suites/softmax.csv has a config that reads x once (not online).
TEST(NativeSoftmaxConfigs, SuiteRowsHaveAOnePassConfig) {
  for (int64_t cols : {1024, 4096, 16384, 32768, 65536, 131072, 262144})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32}) {
      auto p = SoftmaxProblem::make((int64_t(1) << 29) / cols, cols, in);
      int one_pass = 0;
      for (const auto& c : native_softmax_configs(p)) one_pass += c.kind != SoftmaxKind::online && c.vec > 1;
      EXPECT_GE(one_pass, 2) << p.str();
    }
}

// warp, block, cluster, smem, online: 16-byte packs where every row starts on one, else 1;
// pipe, row, tiny, wide, span: 16-byte packs always (each row's head and tail element-wise).
TEST(NativeSoftmaxConfigs, OneVectorWidthWhereLdAllows) {
  auto vecs = [](int64_t cols, int64_t ld, DType in, bool own) {
    auto p = SoftmaxProblem::make(4, cols, in);
    p.ld = ld;
    std::set<int> v;
    for (const auto& c : native_softmax_configs(p))
      if (own == (c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row || c.kind == SoftmaxKind::tiny ||
                  c.kind == SoftmaxKind::wide || c.kind == SoftmaxKind::span || c.kind == SoftmaxKind::flat ||
                  c.kind == SoftmaxKind::band))
        v.insert(c.vec);
    return v;
  };
  EXPECT_EQ(vecs(4096, 0, DType::bf16, false), (std::set<int>{8}));
  EXPECT_EQ(vecs(4096, 0, DType::fp32, false), (std::set<int>{4}));
  EXPECT_EQ(vecs(4097, 0, DType::bf16, false), (std::set<int>{1}));
  EXPECT_EQ(vecs(4097, 4104, DType::bf16, false), (std::set<int>{8}));
  EXPECT_EQ(vecs(4098, 4098, DType::fp32, false), (std::set<int>{1}));
  EXPECT_EQ(vecs(4097, 0, DType::bf16, true), (std::set<int>{8}));
  EXPECT_EQ(vecs(4098, 4098, DType::fp32, true), (std::set<int>{4}));
  EXPECT_EQ(vecs(50257, 0, DType::bf16, true), (std::set<int>{8}));
  EXPECT_EQ(vecs(7, 0, DType::fp16, true), (std::set<int>{8}));
}

// Odd packed widths (rows not starting on a 16-byte pack) keep one-pass 16-byte candidates:
// pipe at the vocabulary width 50257 (bf16: one CTA cannot hold it, 2-CTA clusters; fp32 4) and
// at 4097, tiny for short rows; and the pipe configs' rows hold vec - 1 more (virtual) columns.
TEST(NativeSoftmaxConfigs, UnalignedRowsKeepSixteenBytePacks) {
  auto names = [](int64_t rows, int64_t cols, DType in, SoftmaxKind k) {
    std::vector<std::string> out;
    for (const auto& c : native_softmax_configs(SoftmaxProblem::make(rows, cols, in)))
      if (c.kind == k) out.push_back(c.name());
    return out;
  };
  const auto bf = names(8192, 50257, DType::bf16, SoftmaxKind::pipe);
  int two = 0;
  for (const auto& n : bf) {
    const int c = NativeSoftmaxConfig::parse(n).cluster;
    EXPECT_TRUE(c == 2 || c == 4) << n;  // the fewest (2), at most twice that
    two += c == 2;
  }
  EXPECT_GE(two, 4);  // 1024 x 32 and 512 x 64, 2 and 3 stages
  EXPECT_FALSE(names(8192, 50257, DType::fp32, SoftmaxKind::pipe).empty());
  EXPECT_FALSE(names(1000, 4097, DType::bf16, SoftmaxKind::pipe).empty());
  EXPECT_EQ(names(1000, 7, DType::bf16, SoftmaxKind::tiny),
            (std::vector<std::string>{"tiny_v8_e8_t256_g1", "tiny_v8_e4_t256_g2", "tiny_v8_e2_t256_g4", "tiny_v8_e1_t256_g8"}));
  using C = NativeSoftmaxConfig;
  const auto pipe = SoftmaxKind::pipe;
  // 32768 columns: one 1024 x 32 CTA when rows start on a pack, not when they may start 7 in
  EXPECT_EQ(C({pipe, 8, 32, 1024, 1, 3}).cannot_run(SoftmaxProblem::make(4, 32768)), "");
  auto odd = SoftmaxProblem::make(4, 32768);
  odd.ld = 32769;
  EXPECT_NE(C({pipe, 8, 32, 1024, 1, 3}).cannot_run(odd), "");
  odd.cols = 32761;
  EXPECT_EQ(C({pipe, 8, 32, 1024, 1, 3}).cannot_run(odd), "");
}

// tiny: rows of 1-1024 columns, any ld; group lanes a row (the fewest elems, a power of two <= 8,
// <= 32 for a warp a row,
// that hold it; most of a group used); wide: at most 64 rows of at least 8192 columns, slices of
// threads x elems; both parse back, and refuse what they cannot run.
TEST(NativeSoftmaxConfigs, TinyAndWideConfigs) {
  auto names = [](int64_t rows, int64_t cols, DType in, SoftmaxKind k, int64_t ld = 0) {
    std::vector<std::string> out;
    auto p = SoftmaxProblem::make(rows, cols, in);
    p.ld = ld;
    for (const auto& c : native_softmax_configs(p))
      if (c.kind == k) out.push_back(c.name());
    return out;
  };
  using K = SoftmaxKind;
  EXPECT_EQ(names(100, 1, DType::bf16, K::tiny), (std::vector<std::string>{"tiny_v8_e1_t256_g1"}));
  EXPECT_EQ(names(100, 64, DType::fp32, K::tiny),
            (std::vector<std::string>{"tiny_v4_e8_t256_g8", "tiny_v4_e4_t256_g16", "tiny_v4_e2_t256_g32"}));
  EXPECT_EQ(names(100, 33, DType::bf16, K::tiny, 40),
            (std::vector<std::string>{"tiny_v8_e8_t256_g8", "tiny_v8_e4_t256_g16", "tiny_v8_e2_t256_g32"}));
  EXPECT_EQ(names(100, 256, DType::bf16, K::tiny), (std::vector<std::string>{"tiny_v8_e8_t256_g32"}));
  EXPECT_EQ(names(100, 257, DType::bf16, K::tiny), (std::vector<std::string>{"tiny_v8_e16_t256_g32"}));
  EXPECT_EQ(names(100, 1001, DType::fp32, K::tiny), (std::vector<std::string>{"tiny_v4_e32_t256_g32"}));
  EXPECT_TRUE(names(100, 1025, DType::bf16, K::tiny).empty());
  // two-pass, then the ring (512 threads, 4 or 8 packs a thread, at most 32 values; 2, 3 and as
  // many slots as fit)
  EXPECT_EQ(names(1, 1048576, DType::bf16, K::wide),
            (std::vector<std::string>{"wide_v8_e16_t256", "wide_v8_e32_t256", "wide_v8_e16_t512", "wide_v8_e32_t512",
                                      "wide_v8_e32_t512_s2", "wide_v8_e32_t512_s3", "wide_v8_e32_t512_s7"}));
  EXPECT_EQ(names(8, 4194304, DType::fp32, K::wide),
            (std::vector<std::string>{"wide_v4_e8_t256", "wide_v4_e16_t256", "wide_v4_e8_t512", "wide_v4_e16_t512",
                                      "wide_v4_e16_t512_s2", "wide_v4_e16_t512_s3", "wide_v4_e16_t512_s7", "wide_v4_e32_t512_s2",
                                      "wide_v4_e32_t512_s3"}));
  EXPECT_TRUE(names(2, 1048575, DType::bf16, K::wide).size() == 4);  // cols not whole packs: no ring
  EXPECT_FALSE(names(64, 8192, DType::bf16, K::wide).empty());
  EXPECT_TRUE(names(65, 1048576, DType::bf16, K::wide).empty());
  EXPECT_TRUE(names(1, 8191, DType::bf16, K::wide).empty());
  EXPECT_EQ(NativeSoftmaxConfig::parse("tiny_v8_e1_t256_g8").group, 8);
  EXPECT_EQ(NativeSoftmaxConfig::parse("wide_v8_e32_t512"), NativeSoftmaxConfig({SoftmaxKind::wide, 8, 32, 512, 1}));
  EXPECT_EQ(NativeSoftmaxConfig::parse("wide_v8_e32_t512_s7"), NativeSoftmaxConfig({SoftmaxKind::wide, 8, 32, 512, 1, 7}));
  EXPECT_EQ(NativeSoftmaxConfig::parse("flat_v8_e7_t256"), NativeSoftmaxConfig({SoftmaxKind::flat, 8, 7, 256, 1}));
  for (const char* bad : {"tiny_v8_e1_t256", "tiny_v8_e1_t256_g8_c1", "tiny_v8_t256_g8", "wide_v8_e32_t512_g1", "wide_v8_t512",
                          "wide_v8_e32_t512_c1", "wide_v8_e32_t512_s0", "wide_v8_e32_t512_s7_s7"})
    EXPECT_THROW(NativeSoftmaxConfig::parse(bad), Error) << bad;
  using C = NativeSoftmaxConfig;
  auto tiny = [](int v, int e, int t, int g) {
    C c{K::tiny, v, e, t, 1};
    c.group = g;
    return c;
  };
  const auto p7 = SoftmaxProblem::make(10, 7);
  EXPECT_EQ(tiny(8, 1, 256, 8).cannot_run(p7), "");
  EXPECT_NE(tiny(8, 1, 256, 4).cannot_run(p7), "");   // 4 lanes x 1 value: 4 columns
  EXPECT_NE(tiny(1, 1, 256, 8).cannot_run(p7), "");   // 16-byte packs only
  EXPECT_NE(tiny(8, 64, 256, 1).cannot_run(p7), "");  // elems <= 32
  EXPECT_NE(tiny(8, 1, 256, 64).cannot_run(p7), "");  // group <= 32 (one warp)
  EXPECT_NE(tiny(8, 1, 512, 8).cannot_run(p7), "");   // 256 threads at most (its launch bound)
  EXPECT_NE(C({K::warp, 8, 8, 256, 1}).cannot_run(p7), "");  // ld 7: no 16-byte packs for warp
  const auto big = SoftmaxProblem::make(2, 1 << 20);
  EXPECT_EQ(C({K::wide, 8, 32, 512, 1}).cannot_run(big), "");
  EXPECT_NE(C({K::wide, 8, 64, 256, 1}).cannot_run(big), "");   // at most 32 values a thread
  EXPECT_NE(C({K::wide, 8, 32, 1024, 1}).cannot_run(big), "");  // 512 threads at most
  EXPECT_NE(C({K::wide, 1, 32, 512, 1}).cannot_run(big), "");   // 16-byte packs only
  EXPECT_NE(C({K::wide, 8, 8, 512, 1}).cannot_run(big), "");    // 2 or 4 packs a thread
  EXPECT_NE(C({K::wide, 4, 32, 256, 1}).cannot_run(SoftmaxProblem::make(2, 1 << 20, DType::fp32)), "");  // 8: the ring only
  EXPECT_EQ(C({K::wide, 4, 32, 256, 1, 3}).cannot_run(SoftmaxProblem::make(2, 1 << 20, DType::fp32)), "");
  EXPECT_NE(C({K::wide, 4, 32, 256, 1, 8}).cannot_run(SoftmaxProblem::make(2, 1 << 20, DType::fp32)), "");  // 8 x 32 KiB: more than a CTA's shared memory
  EXPECT_NE(C({K::wide, 4, 16, 512, 1, 2}).cannot_run(SoftmaxProblem::make(65, 8192, DType::fp32)), "");    // 64 rows at most
  EXPECT_NE(C({K::wide, 8, 16, 32, 1}).cannot_run(SoftmaxProblem::make(1, int64_t(1) << 24)), "");  // 32768 slices
  C g = C({K::wide, 8, 32, 512, 1});
  g.group = 2;
  EXPECT_NE(g.cannot_run(big), "");  // group only for tiny
  EXPECT_EQ(C({K::wide, 8, 32, 512, 1, 2}).cannot_run(big), "");
  EXPECT_EQ(C({K::wide, 8, 32, 512, 1, 4}).cannot_run(big), "");
  EXPECT_NE(C({K::wide, 8, 32, 512, 1, 1}).cannot_run(big), "");  // 2 slots at least
  EXPECT_NE(C({K::wide, 8, 16, 512, 1, 17}).cannot_run(big), "");  // 16 at most
  EXPECT_NE(C({K::wide, 4, 32, 512, 1, 4}).cannot_run(SoftmaxProblem::make(2, 1 << 20, DType::fp32)), "");  // 4 x 64 KiB: more than a CTA's shared memory
  EXPECT_NE(C({K::wide, 8, 32, 512, 1, 7}).cannot_run(SoftmaxProblem::make(2, (1 << 20) - 1)), "");  // not whole packs
  // flat: packed rows of elems == cols = 2 .. 8 values, y of x's dtype
  EXPECT_EQ(names(19173961, 7, DType::bf16, K::flat), (std::vector<std::string>{"flat_v8_e7_t128", "flat_v8_e7_t256", "flat_v8_e7_t512"}));
  EXPECT_EQ(names(5003, 2, DType::fp32, K::flat), (std::vector<std::string>{"flat_v4_e2_t128", "flat_v4_e2_t256", "flat_v4_e2_t512"}));
  EXPECT_TRUE(names(100, 9, DType::bf16, K::flat).empty());
  EXPECT_TRUE(names(100, 1, DType::bf16, K::flat).empty());
  EXPECT_TRUE(names(100, 7, DType::bf16, K::flat, 8).empty());  // strided
  const auto x7 = SoftmaxProblem::make(1000, 7);
  EXPECT_EQ(C({K::flat, 8, 7, 256, 1}).cannot_run(x7), "");
  EXPECT_NE(C({K::flat, 8, 6, 256, 1}).cannot_run(x7), "");   // elems != cols
  EXPECT_NE(C({K::flat, 1, 7, 256, 1}).cannot_run(x7), "");   // 16-byte packs only
  EXPECT_NE(C({K::flat, 8, 7, 1024, 1}).cannot_run(x7), "");  // 512 threads at most
  auto mixed = x7;
  mixed.out = DType::fp32;
  EXPECT_NE(C({K::flat, 8, 7, 256, 1}).cannot_run(mixed), "");  // y of x's dtype
}

// row: per P packs a thread the fewest threads a row that hold a CTA's even share of the row's
// packs (lanes of a warp or whole warps), for the fewest CTAs a row within the launch bound and
// the fewest with CTAs of at most 256 and 128 threads (clusters only past 16 KiB rows), more
// than half of the packs used, several rows a CTA below 128 threads a row; not for rows of one
// value; parses back; refuses what it cannot run.
// Every row config comes with one (s1) or two (s2: the next block's loads in flight, 512 threads at
// most) blocks of rows in flight.
TEST(NativeSoftmaxConfigs, RowConfigs) {
  auto names = [](int64_t rows, int64_t cols, DType in, int64_t ld = 0) {
    std::vector<std::string> out;
    auto p = SoftmaxProblem::make(rows, cols, in);
    p.ld = ld;
    for (const auto& c : native_softmax_configs(p))
      if (c.kind == SoftmaxKind::row) out.push_back(c.name());
    return out;
  };
  EXPECT_EQ(names(4096, 50257, DType::bf16),
            (std::vector<std::string>{"row_v8_e8_t928_r1_c7_s1", "row_v8_e16_t800_r1_c4_s1", "row_v8_e16_t256_r1_c13_s1", "row_v8_e16_t256_r1_c13_s2",
                                      "row_v8_e32_t800_r1_c2_s1", "row_v8_e32_t256_r1_c7_s1", "row_v8_e32_t256_r1_c7_s2", "row_v8_e32_t128_r1_c13_s1", "row_v8_e32_t128_r1_c13_s2",
                                      "row_v8_e64_t416_r1_c2_s1", "row_v8_e64_t416_r1_c2_s2", "row_v8_e64_t224_r1_c4_s1", "row_v8_e64_t224_r1_c4_s2", "row_v8_e64_t128_r1_c7_s1", "row_v8_e64_t128_r1_c7_s2"}));
  EXPECT_EQ(names(32768, 4097, DType::bf16),
            (std::vector<std::string>{"row_v8_e8_t544_r1_c1_s1", "row_v8_e16_t288_r1_c1_s1", "row_v8_e16_t288_r1_c1_s2", "row_v8_e32_t160_r1_c1_s1", "row_v8_e32_t160_r1_c1_s2",
                                      "row_v8_e64_t96_r1_c1_s1", "row_v8_e64_t96_r1_c1_s2", "row_v8_e64_t192_r2_c1_s1", "row_v8_e64_t192_r2_c1_s2"}));
  EXPECT_EQ(names(1000, 7, DType::bf16), (std::vector<std::string>{"row_v8_e8_t128_r64_c1_s1", "row_v8_e8_t128_r64_c1_s2", "row_v8_e8_t256_r128_c1_s1", "row_v8_e8_t256_r128_c1_s2",
                                                                   "row_v8_e16_t128_r128_c1_s1", "row_v8_e16_t128_r128_c1_s2", "row_v8_e16_t256_r256_c1_s1", "row_v8_e16_t256_r256_c1_s2"}));
  EXPECT_TRUE(names(1000, 1, DType::bf16).empty());
  EXPECT_TRUE(names(1000, 1, DType::fp32, 3).empty());
  for (const auto& n : names(8192, 16385, DType::bf16)) EXPECT_LE(NativeSoftmaxConfig::parse(n).cluster, 9) << n;
  for (const auto& n : names(100, 4097, DType::bf16, 4100)) EXPECT_EQ(NativeSoftmaxConfig::parse(n).cluster, 1) << n;
  using C = NativeSoftmaxConfig;
  const auto row = SoftmaxKind::row;
  EXPECT_EQ(C::parse("row_v8_e32_t160_r1_c1_s1"), C({row, 8, 32, 160, 1, 1, 1}));
  EXPECT_EQ(C::parse("row_v8_e16_t256_r256_c1_s2"), C({row, 8, 16, 256, 1, 2, 256}));
  for (const char* bad : {"row_v8_e32_t160_r1", "row_v8_e32_t160_c1_s1", "row_v8_e32_t160_r1_c1", "row_v8_t160_r1_c1_s1",
                          "row_v8_e32_t160_r1_s1_c1"})
    EXPECT_THROW(C::parse(bad), Error) << bad;
  const auto p = SoftmaxProblem::make(64, 50257);  // bf16, rows start anywhere in a pack
  EXPECT_EQ(C({row, 8, 64, 416, 2, 1, 1}).cannot_run(p), "");
  EXPECT_NE(C({row, 8, 64, 384, 2, 1, 1}).cannot_run(p), "");   // 2 x 384 x 64 = 49152 columns
  EXPECT_NE(C({row, 8, 64, 1024, 1, 1, 1}).cannot_run(p), "");  // E = 64: 512 threads at most
  EXPECT_NE(C({row, 1, 64, 416, 2, 1, 1}).cannot_run(p), "");   // 16-byte packs only
  EXPECT_NE(C({row, 8, 48, 416, 2, 1, 1}).cannot_run(p), "");   // vec x 1, 2, 4 or 8
  EXPECT_NE(C({row, 8, 64, 416, 17, 1, 1}).cannot_run(p), "");  // 16 CTAs at most
  EXPECT_NE(C({row, 8, 8, 128, 16, 1, 1}).cannot_run(SoftmaxProblem::make(4, 100)), "");  // idle CTAs
  const auto q = SoftmaxProblem::make(64, 7);
  EXPECT_EQ(C({row, 8, 16, 256, 1, 1, 256}).cannot_run(q), "");
  EXPECT_NE(C({row, 8, 16, 256, 1, 1, 3}).cannot_run(q), "");    // 3 does not divide 256
  EXPECT_NE(C({row, 8, 16, 192, 1, 1, 64}).cannot_run(q), "");   // 3 lanes a row
  EXPECT_NE(C({row, 8, 16, 256, 2, 1, 128}).cannot_run(q), "");  // several rows a CTA: no cluster
  EXPECT_NE(C({row, 8, 16, 256, 1, 3, 256}).cannot_run(q), "");  // 1 or 2 blocks in flight
  EXPECT_NE(C({row, 8, 16, 1024, 1, 2, 1024}).cannot_run(q), "");  // 2 blocks: 512 threads at most
  EXPECT_EQ(C({row, 8, 16, 512, 1, 2, 512}).cannot_run(q), "");
}

TEST(NativeSoftmaxConfigs, PinnedListForOneProblem) {
  auto p = SoftmaxProblem::make(1000, 1024);
  std::vector<std::string> names;
  for (const auto& c : native_softmax_configs(p)) names.push_back(c.name());
  const std::vector<std::string> want = {
      "warp_v8_e32_t128",         "warp_v8_e32_t256",         "warp_v8_e32_t512",         "block_v8_e8_t128",
      "block_v8_e8_t256",         "block_v8_e8_t512",         "block_v8_e8_t1024",        "pipe_v8_e16_t64_r1_c1_s2",
      "pipe_v8_e16_t64_r1_c1_s3", "pipe_v8_e8_t128_r1_c1_s2", "pipe_v8_e8_t128_r1_c1_s3", "pipe_v8_e32_t128_r4_c1_s2",
      "pipe_v8_e32_t128_r4_c1_s3", "pipe_v8_e32_t256_r8_c1_s2", "pipe_v8_e32_t256_r8_c1_s3", "pipe_v8_e16_t256_r4_c1_s2",
      "pipe_v8_e16_t256_r4_c1_s3", "pipe_v8_e8_t256_r2_c1_s2",  "pipe_v8_e8_t256_r2_c1_s3",  "row_v8_e8_t128_r1_c1_s1", "row_v8_e8_t128_r1_c1_s2",
      "row_v8_e16_t128_r2_c1_s1", "row_v8_e16_t128_r2_c1_s2",     "row_v8_e16_t256_r4_c1_s1", "row_v8_e16_t256_r4_c1_s2",     "row_v8_e32_t128_r4_c1_s1", "row_v8_e32_t128_r4_c1_s2",     "row_v8_e32_t256_r8_c1_s1", "row_v8_e32_t256_r8_c1_s2",
      "row_v8_e64_t128_r8_c1_s1", "row_v8_e64_t128_r8_c1_s2",     "row_v8_e64_t256_r16_c1_s1", "row_v8_e64_t256_r16_c1_s2",    "tiny_v8_e32_t256_g32",
      "span_v8_e0_t512_g32_k48_s4", "span_v8_e0_t256_g32_k24_s4", "span_v8_e0_t512_g64_k48_s4", "span_v8_e0_t256_g64_k24_s4"};
  EXPECT_EQ(names, want);
}

TEST(NativeSoftmaxConfigs, ParseRefusesMalformedNames) {
  for (const char* bad : {"", "warp", "warp_v8", "warp_v8_e32", "warp_v8_e32_t", "ring_v8_e32_t128", "warp_v8_e32_t128_c2",
                          "cluster_v8_e32_t512", "online_v8_e8_t256", "warp_v08_e32_t128", "warp_v8_e32_t128x"})
    EXPECT_THROW(NativeSoftmaxConfig::parse(bad), Error) << bad;
  EXPECT_EQ(NativeSoftmaxConfig::parse("cluster_v8_e32_t512_c16").cluster, 16);
  EXPECT_EQ(NativeSoftmaxConfig::parse("smem_v8_t512_c4"), NativeSoftmaxConfig({SoftmaxKind::smem, 8, 0, 512, 4}));
  EXPECT_THROW(NativeSoftmaxConfig::parse("smem_v8_e8_t512_c4"), Error);
  EXPECT_EQ(NativeSoftmaxConfig::parse("pipe_v8_e32_t1024_r1_c8_s3"), NativeSoftmaxConfig({SoftmaxKind::pipe, 8, 32, 1024, 8, 3}));
  EXPECT_EQ(NativeSoftmaxConfig::parse("pipe_v8_e32_t256_r8_c1_s2"),
            NativeSoftmaxConfig({SoftmaxKind::pipe, 8, 32, 256, 1, 2, 8}));
  for (const char* bad : {"pipe_v8_e32_t1024_r1_c8", "pipe_v8_e32_t1024_r1_s3", "pipe_v8_t1024_r1_c8_s3", "pipe_v8_e32_t1024_r1_c8_s3_x",
                          "pipe_v8_e32_t1024_c8_s3", "pipe_v8_e32_t1024_c8_r1_s3", "cluster_v8_e32_t512_c8_s3",
                          "smem_v8_t512_c4_s2", "block_v8_e8_t128_r1"})
    EXPECT_THROW(NativeSoftmaxConfig::parse(bad), Error) << bad;
}

// The coop kind (removed: 40-50% of copy bandwidth, never won a race) is no longer a kind: a
// tuning cache entry naming one of its ids fails to load with the parser's ordinary error.
TEST(NativeSoftmaxConfigs, ParseRefusesRemovedCoopIds) {
  for (const char* id : {"coop_v8_e32_t512_c16_s6", "coop_v8_e32_t256_c32_s8", "coop_v8_e16_t512_c32_s4"}) {
    try {
      (void)NativeSoftmaxConfig::parse(id);
      ADD_FAILURE() << id << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("unknown kind 'coop'"), std::string::npos) << e.message();
    }
  }
}

TEST(NativeSoftmaxConfigs, CannotRunSaysWhy) {
  auto p = SoftmaxProblem::make(4, 2048);
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::warp, 8, 32, 128, 1}).cannot_run(p), "");      // 1024 columns at most
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::block, 8, 32, 1024, 1}).cannot_run(p), "");    // E = 32: 512 threads
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::cluster, 8, 8, 256, 2}).cannot_run(p), "");    // an idle CTA
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::cluster, 8, 8, 128, 32}).cannot_run(p), "");   // cluster > 16
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::online, 4, 0, 256, 1}).cannot_run(p), "");     // vec 4 for bf16
  EXPECT_EQ(NativeSoftmaxConfig({SoftmaxKind::cluster, 8, 8, 128, 2}).cannot_run(p), "");
  EXPECT_EQ(NativeSoftmaxConfig({SoftmaxKind::smem, 8, 0, 256, 1}).cannot_run(p), "");
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::smem, 1, 0, 256, 1}).cannot_run(p), "");       // 16-byte packs only
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::smem, 8, 0, 256, 1}).cannot_run(SoftmaxProblem::make(2, 1 << 17)), "");  // 256 KiB
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::smem, 8, 0, 256, 4}).cannot_run(SoftmaxProblem::make(2, 24)), "");  // idle CTAs
  p.ld = 2049;
  EXPECT_NE(NativeSoftmaxConfig({SoftmaxKind::online, 8, 0, 256, 1}).cannot_run(p), "");     // ld % vec
}

TEST(NativeSoftmaxConfigs, PipeCannotRunSaysWhy) {
  const auto p = SoftmaxProblem::make(4, 262144);
  using C = NativeSoftmaxConfig;
  const auto pipe = SoftmaxKind::pipe;
  EXPECT_EQ(C({pipe, 8, 32, 1024, 8, 3}).cannot_run(p), "");
  EXPECT_EQ(C({pipe, 8, 64, 512, 8, 3}).cannot_run(p), "");
  EXPECT_EQ(C({pipe, 8, 32, 512, 16, 2}).cannot_run(p), "");
  EXPECT_NE(C({pipe, 1, 32, 1024, 8, 3}).cannot_run(p), "");   // 16-byte packs only
  EXPECT_NE(C({pipe, 8, 24, 1024, 8, 3}).cannot_run(p), "");   // elems vec x 3
  EXPECT_NE(C({pipe, 8, 128, 256, 8, 2}).cannot_run(p), "");   // elems vec x 16
  EXPECT_NE(C({pipe, 8, 64, 1024, 4, 3}).cannot_run(p), "");   // 64 fp32 values: 512 threads at most
  EXPECT_NE(C({pipe, 8, 32, 1024, 4, 3}).cannot_run(p), "");   // 4 CTAs hold 131072 columns
  EXPECT_NE(C({pipe, 8, 32, 1024, 16, 3}).cannot_run(p), "");  // idle CTAs
  EXPECT_NE(C({pipe, 8, 32, 1024, 8, 1}).cannot_run(p), "");   // stages 2 .. 4
  EXPECT_NE(C({pipe, 8, 32, 1024, 8, 5}).cannot_run(p), "");
  EXPECT_NE(C({pipe, 8, 32, 1024, 8, 4}).cannot_run(p), "");   // 4 x 64 KiB of shared memory
  EXPECT_NE(C({pipe, 8, 32, 1024, 12, 3}).cannot_run(p), "");  // cluster 12: idle CTAs
  EXPECT_NE(C({pipe, 8, 32, 1024, 17, 3}).cannot_run(p), "");  // 16 CTAs at most
  EXPECT_EQ(C({pipe, 8, 32, 512, 10, 3}).cannot_run(SoftmaxProblem::make(4, 151936)), "");  // 9-16: non-portable
  EXPECT_EQ(C({pipe, 8, 32, 1024, 7, 3}).cannot_run(SoftmaxProblem::make(4, 200000)), "");  // any count up to 8
  EXPECT_NE(C({pipe, 8, 32, 1024, 8, 0}).cannot_run(p), "");
  EXPECT_NE(C({SoftmaxKind::cluster, 8, 32, 512, 16, 2}).cannot_run(p), "");  // stages only for pipe
  EXPECT_NE(C({SoftmaxKind::block, 8, 32, 512, 1, 0, 2}).cannot_run(SoftmaxProblem::make(4, 16384)), "");  // block_rows only for pipe
  const auto shortp = SoftmaxProblem::make(4, 1024);
  EXPECT_EQ(C({pipe, 8, 32, 256, 1, 3, 8}).cannot_run(shortp), "");    // a warp a row, 8 rows a CTA
  EXPECT_EQ(C({pipe, 8, 16, 256, 1, 3, 4}).cannot_run(shortp), "");    // 2 warps a row
  EXPECT_NE(C({pipe, 8, 16, 256, 1, 3, 8}).cannot_run(shortp), "");    // a warp x 16 elems: 512 columns
  EXPECT_NE(C({pipe, 8, 32, 256, 1, 3, 3}).cannot_run(shortp), "");    // 3 does not divide 8 warps
  EXPECT_NE(C({pipe, 8, 32, 256, 2, 3, 4}).cannot_run(SoftmaxProblem::make(4, 2048)), "");  // rows a CTA need cluster 1
  auto f = SoftmaxProblem::make(4, 262144, DType::fp32);
  EXPECT_NE(C({pipe, 4, 32, 1024, 8, 2}).cannot_run(f), "");   // 2 x 128 KiB
  EXPECT_EQ(C({pipe, 4, 16, 1024, 16, 3}).cannot_run(f), "");
  auto odd = SoftmaxProblem::make(4, 262143);
  EXPECT_NE(C({pipe, 8, 32, 1024, 8, 3}).cannot_run(odd), "");  // ld 262143: row starts not 16-byte aligned
  odd.ld = 262144;
  EXPECT_EQ(C({pipe, 8, 32, 1024, 8, 3}).cannot_run(odd), "");
}

// The pipe configs of the suite's rows (bench/suites/softmax.csv): present for every dtype, at
// most 8 CTAs a cluster for bf16 / fp16 (16 for fp32's 1 MiB rows of 262144), 2 or 3 stages, and
// the shapes picked for the long rows.
TEST(NativeSoftmaxConfigs, PipeConfigsOfTheSuite) {
  auto pipes = [](int64_t cols, DType in) {
    std::vector<std::string> names;
    for (const auto& c : native_softmax_configs(SoftmaxProblem::make((int64_t(1) << 29) / cols, cols, in)))
      if (c.kind == SoftmaxKind::pipe) names.push_back(c.name());
    return names;
  };
  for (int64_t cols : {1024, 4096, 16384, 32768, 65536, 131072, 262144})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32}) {
      const auto names = pipes(cols, in);
      EXPECT_GE(names.size(), 2u) << cols << " " << to_string(in);
      int portable = 0;
      for (const auto& n : names) portable += NativeSoftmaxConfig::parse(n).cluster <= 8;
      if (in != DType::fp32 || cols < 262144) EXPECT_GE(portable, 2) << cols << " " << to_string(in);
    }
  EXPECT_EQ(pipes(262144, DType::bf16),
            (std::vector<std::string>{"pipe_v8_e64_t256_r1_c16_s2", "pipe_v8_e64_t256_r1_c16_s3", "pipe_v8_e32_t512_r1_c16_s2",
                                      "pipe_v8_e32_t512_r1_c16_s3", "pipe_v8_e64_t512_r1_c8_s2", "pipe_v8_e64_t512_r1_c8_s3",
                                      "pipe_v8_e16_t1024_r1_c16_s2", "pipe_v8_e16_t1024_r1_c16_s3", "pipe_v8_e32_t1024_r1_c8_s2",
                                      "pipe_v8_e32_t1024_r1_c8_s3"}));
  EXPECT_EQ(pipes(32768, DType::bf16),
            (std::vector<std::string>{"pipe_v8_e64_t256_r1_c2_s2", "pipe_v8_e64_t256_r1_c2_s3", "pipe_v8_e32_t512_r1_c2_s2",
                                      "pipe_v8_e32_t512_r1_c2_s3", "pipe_v8_e64_t512_r1_c1_s2", "pipe_v8_e64_t512_r1_c1_s3",
                                      "pipe_v8_e16_t1024_r1_c2_s2", "pipe_v8_e16_t1024_r1_c2_s3", "pipe_v8_e32_t1024_r1_c1_s2",
                                      "pipe_v8_e32_t1024_r1_c1_s3"}));
}

TEST(NativeSoftmaxConfigs, InvalidProblemThrowsNamingTheField) {
  auto p = SoftmaxProblem::make(4, 0);
  try {
    native_softmax_configs(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message().rfind("softmax.cols:", 0), 0u) << e.message();
  }
}

// ---- launch parameters (what the H200 run caught: the smem kernel opted in to 227 KiB of
// dynamic shared memory, which with its static shared memory exceeds the 227 KiB per block:
// cudaErrorInvalidValue) ----

TEST(NativeSoftmaxLaunch, SharedMemoryOptInLeavesRoomForStaticSharedMemory) {
  EXPECT_EQ(kSm90SmemPerBlockOptin, 232448);  // cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200
  EXPECT_LE(kNativeSmemDynamicOptIn + kNativeStaticSmemBound, kSm90SmemPerBlockOptin);
  EXPECT_GE(kNativeStaticSmemBound, 1088);  // the largest static scratch (pipe: mbarriers, exchange slots); ptxas -v: 144-1088 B
  // The largest slice the smem kind accepts fits what it opts in to.
  auto p = SoftmaxProblem::make(2, kNativeSmemDynamicOptIn / 2, DType::bf16);
  const NativeSoftmaxConfig c{SoftmaxKind::smem, 8, 0, 256, 1};
  ASSERT_EQ(c.cannot_run(p), "");
  EXPECT_LE(native_softmax_launch(c, p).dynamic_smem, kNativeSmemDynamicOptIn);
  p.cols += 8;
  EXPECT_NE(c.cannot_run(p), "");
}

// Every offered config, for many shapes (the three that failed on the H200, the suite's, small
// and odd ones), launches within sm_90's limits: threads, the kernel's launch bounds, registers
// (at most 64K / launch bound a thread, what ptxas must fit), grid, cluster size and divisibility,
// static (bound) + dynamic shared memory per block.
TEST(NativeSoftmaxLaunch, EveryOfferedConfigFitsSm90Limits) {
  struct Shape {
    int64_t rows, cols;
    DType in;
  };
  std::vector<Shape> shapes = {{40, 4096, DType::fp16}, {24, 16384, DType::fp32}, {16, 65536, DType::bf16}};
  for (int64_t cols : {1024, 4096, 16384, 32768, 65536, 131072, 262144})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32}) shapes.push_back({(int64_t(1) << 29) / cols, cols, in});
  for (int64_t cols : {1, 7, 31, 33, 64, 255, 1000, 1025, 4097, 12288, 49152, 50257, 98304, 114688, 262147, 1048576, 4194304})
    for (DType in : {DType::bf16, DType::fp32}) shapes.push_back({7, cols, in});
  shapes.push_back({19173961, 7, DType::bf16});
  shapes.push_back({134217728, 1, DType::fp32});
  const NativeSoftmaxDeviceLimits sm90;
  int n = 0;
  for (const Shape& sh : shapes)
    for (int64_t pad : {0, 8}) {
      auto p = SoftmaxProblem::make(sh.rows, sh.cols, sh.in);
      p.ld = pad ? sh.cols + pad : 0;
      for (const auto& c : native_softmax_configs(p)) {
        const NativeSoftmaxLaunch l = native_softmax_launch(c, p);
        ++n;
        ASSERT_GT(l.launch_bound, 0) << c.name();
        EXPECT_EQ(native_softmax_launch_violation(l, sm90, kNativeStaticSmemBound, int(sm90.regs_per_block / l.launch_bound)), "")
            << p.str() << " " << c.name();
        EXPECT_EQ(l.threads, c.threads + ((c.kind == SoftmaxKind::wide && c.stages > 0) || c.kind == SoftmaxKind::band ? 64 : 0))
            << c.name();  // the ring's and the band kind's two warps
        const bool clustered =
            c.kind == SoftmaxKind::cluster ||
            ((c.kind == SoftmaxKind::smem || c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row) && c.cluster > 1);
        EXPECT_EQ(l.cluster > 1, clustered) << c.name();
        const bool ones = c.kind == SoftmaxKind::tiny && p.cols == 1 && p.row_stride() == 1;  // tiny's element-wise path
        EXPECT_EQ(l.dynamic_smem > 0, c.kind == SoftmaxKind::smem || c.kind == SoftmaxKind::pipe ||
                                          c.kind == SoftmaxKind::span || (c.kind == SoftmaxKind::tiny && !ones) ||
                                          (c.kind == SoftmaxKind::wide && c.stages > 0) || c.kind == SoftmaxKind::flat ||
                                          c.kind == SoftmaxKind::band)
            << c.name();
        EXPECT_EQ(l.persistent, c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row || c.kind == SoftmaxKind::wide ||
                                    (c.kind == SoftmaxKind::tiny && !ones) || c.kind == SoftmaxKind::span ||
                                    c.kind == SoftmaxKind::band)
            << c.name();
        EXPECT_EQ(l.cooperative, c.kind == SoftmaxKind::wide || c.kind == SoftmaxKind::band) << c.name();
        if (ones) {  // packed rows of one value: 4 16-byte packs of x a thread
          EXPECT_EQ(l.grid, (p.rows + c.threads * 4 * c.vec - 1) / (c.threads * 4 * c.vec)) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::tiny) {  // chunks of ~24 KiB of x and y, two x buffers (48 KiB without opt-in)
          EXPECT_LE(l.dynamic_smem, 48 * 1024) << c.name();
          const int64_t rows_per_cta = std::max<int64_t>(1, 24576 / (p.cols * int64_t(size_of(p.in) + size_of(p.out))));
          EXPECT_EQ(l.grid, (p.rows + rows_per_cta - 1) / rows_per_cta) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::span) {  // an upper bound: every chunk of rows (a multiple of the CTA's groups) on its own CTA
          const int64_t ng = c.threads / c.group, rb = p.cols * int64_t(size_of(p.in));
          const int64_t R = int64_t(c.chunk_kib) * 1024 / (ng * rb) * ng;
          ASSERT_GE(R, ng) << c.name();
          EXPECT_EQ(l.grid, (p.rows + R - 1) / R) << c.name();
          EXPECT_EQ(l.dynamic_smem, c.stages * ((R * rb + 32 + 127) / 128 * 128)) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::flat) {  // a warp a tile of 32 lanes x P rows (whole 16-byte packs)
          const int64_t rb = p.cols * int64_t(size_of(p.in)), P = 16 / std::gcd<int64_t>(rb, 16), w = c.threads / 32;
          EXPECT_EQ(P * rb % 16, 0) << c.name();
          EXPECT_EQ(l.grid, (p.rows + 32 * P * w - 1) / (32 * P * w)) << c.name();
          EXPECT_EQ(l.dynamic_smem, w * 32 * P * rb) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::band) {  // an upper bound: a CTA a pack of a row; the slots
          EXPECT_EQ(l.grid, p.cols / c.vec) << c.name();
          EXPECT_EQ(l.dynamic_smem, int64_t(c.stages) * c.threads * c.elems * int64_t(size_of(p.in))) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::wide) {  // an upper bound: every slice of every row on its own CTA
          const int64_t span = p.cols + (p.row_stride() % c.vec ? c.vec - 1 : 0), S = int64_t(c.threads) * c.elems;
          EXPECT_EQ(l.grid, p.rows * ((span + S - 1) / S)) << c.name();
          // the ring's slots and their warps' pairs (16 a slot)
          EXPECT_EQ(l.dynamic_smem, int64_t(c.stages) * (S * int64_t(size_of(p.in)) + 128)) << c.name();
          continue;
        }
        if (c.kind == SoftmaxKind::pipe)  // the stages: whole slices of x
          EXPECT_EQ(l.dynamic_smem, int64_t(c.stages) * c.threads * c.elems * int64_t(size_of(p.in))) << c.name();
        const int64_t rows_per_block = c.kind == SoftmaxKind::warp                                 ? c.threads / 32
                                       : c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row ? c.block_rows
                                                                                                   : 1;
        EXPECT_EQ(l.grid, (p.rows + rows_per_block - 1) / rows_per_block * l.cluster) << c.name();
        if (c.kind == SoftmaxKind::smem)  // the slice, 16-byte packs, is what is staged
          EXPECT_EQ(l.dynamic_smem, ((p.cols + c.cluster - 1) / c.cluster + c.vec - 1) / c.vec * c.vec * int64_t(size_of(p.in)));
        // 32 fp32 values a thread need the 128 registers of a 512-thread bound (pipe: 64 a
        // 1024-thread bound hold 32 values, ptxas -v: 63-64 registers; more need 512).
        if (c.kind == SoftmaxKind::pipe) EXPECT_EQ(l.launch_bound, c.elems > 32 ? 512 : 1024) << c.name();
        else if (c.kind == SoftmaxKind::row) EXPECT_EQ(l.launch_bound, c.elems > 32 || c.stages == 2 ? 512 : 1024) << c.name();
        else if (c.kind != SoftmaxKind::smem && c.kind != SoftmaxKind::online && c.elems >= 32) EXPECT_LE(l.launch_bound, 512);
      }
    }
  EXPECT_GT(n, 500);
}

TEST(NativeSoftmaxLaunch, ViolationNamesTheLimit) {
  const NativeSoftmaxDeviceLimits sm90;
  NativeSoftmaxLaunch ok;
  ok.grid = 64, ok.threads = 256, ok.dynamic_smem = 0, ok.cluster = 1, ok.launch_bound = 1024;
  EXPECT_EQ(native_softmax_launch_violation(ok, sm90, 144, 40), "");
  auto why = [&](NativeSoftmaxLaunch l, int64_t static_smem = 144, int regs = 40) {
    return native_softmax_launch_violation(l, sm90, static_smem, regs);
  };
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  NativeSoftmaxLaunch l = ok;
  l.threads = 1056, l.launch_bound = 2048;
  EXPECT_TRUE(has(why(l), "per block")) << why(l);
  l = ok, l.threads = 100;
  EXPECT_TRUE(has(why(l), "multiple of 32")) << why(l);
  l = ok, l.threads = 1024, l.launch_bound = 512;
  EXPECT_TRUE(has(why(l), "__launch_bounds__")) << why(l);
  l = ok, l.threads = 1024;
  EXPECT_TRUE(has(why(l, 144, 72), "registers")) << why(l, 144, 72);  // 72 x 1024 > 64K
  EXPECT_EQ(why(l, 144, 64), "");
  l = ok, l.grid = 0;
  EXPECT_TRUE(has(why(l), "grid")) << why(l);
  l = ok, l.grid = int64_t(1) << 31;
  EXPECT_TRUE(has(why(l), "grid")) << why(l);
  l = ok, l.cluster = 32, l.grid = 64;
  EXPECT_TRUE(has(why(l), "cluster")) << why(l);
  l = ok, l.cluster = 16, l.grid = 40;
  EXPECT_TRUE(has(why(l), "multiple of the cluster")) << why(l);
  l = ok, l.cluster = 16, l.grid = 48;
  EXPECT_EQ(why(l), "");
  // The H200 failure: 227 KiB dynamic + static scratch is more than a block gets.
  l = ok, l.dynamic_smem = kSm90SmemPerBlockOptin;
  EXPECT_TRUE(has(why(l), "static")) << why(l);
  l.dynamic_smem = kNativeSmemDynamicOptIn;
  EXPECT_EQ(why(l, 144), "");
  EXPECT_TRUE(has(why(l, 4096), "static")) << why(l, 4096);
  l.dynamic_smem = kNativeSmemDynamicOptIn + 16;
  EXPECT_TRUE(has(why(l, 0), "opt in")) << why(l, 0);
}

TEST(NativeSoftmaxLaunch, RefusesWhatAConfigCannotRun) {
  auto p = SoftmaxProblem::make(4, 2048);
  EXPECT_THROW(native_softmax_launch({SoftmaxKind::warp, 8, 32, 128, 1}, p), Error);  // 1024 columns at most
  EXPECT_THROW(native_softmax_launch({SoftmaxKind::smem, 8, 0, 256, 1}, SoftmaxProblem::make(2, 1 << 17)), Error);
  const NativeSoftmaxLaunch l = native_softmax_launch({SoftmaxKind::cluster, 8, 8, 128, 2}, p);
  EXPECT_EQ(l.grid, 8);
  EXPECT_EQ(l.cluster, 2);
  EXPECT_EQ(l.str(), "grid 8 x 128 threads, 0 B dynamic smem, cluster 2");
  const NativeSoftmaxLaunch q = native_softmax_launch({SoftmaxKind::pipe, 8, 32, 1024, 8, 3}, SoftmaxProblem::make(2048, 262144));
  EXPECT_EQ(q.grid, 2048 * 8);  // an upper bound: the launcher clamps a persistent grid to what is resident
  EXPECT_EQ(q.cluster, 8);
  EXPECT_EQ(q.dynamic_smem, 3 * 32768 * 2);
  EXPECT_TRUE(q.persistent);
  EXPECT_EQ(q.str(), "grid 16384 x 1024 threads, 196608 B dynamic smem, cluster 8, persistent");
}

// span (packed rows as one flat span, chunks staged by the copy engine): the pinned lists of the
// odd widths and short rows of bench/suites/softmax-shapes.csv, the chunk's rows a multiple of the
// CTA's groups within its KiB and the stages within shared memory; refusals.
TEST(NativeSoftmaxConfigs, SpanConfigs) {
  auto names = [](int64_t rows, int64_t cols, DType in) {
    std::vector<std::string> out;
    for (const auto& c : native_softmax_configs(SoftmaxProblem::make(rows, cols, in)))
      if (c.kind == SoftmaxKind::span) out.push_back(c.name());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(19173961, 7, DType::bf16),
            (V{"span_v8_e8_t512_g1_k48_s4", "span_v8_e8_t256_g1_k24_s4", "span_v8_e4_t512_g2_k48_s4", "span_v8_e4_t256_g2_k24_s4"}));
  EXPECT_TRUE(names(134217728, 1, DType::bf16).empty());  // rows of one value: tiny's element-wise path
  EXPECT_EQ(names(131072, 1001, DType::bf16),
            (V{"span_v8_e0_t512_g16_k72_s3", "span_v8_e0_t256_g16_k36_s3", "span_v8_e0_t512_g32_k48_s4", "span_v8_e0_t256_g32_k24_s4"}));
  // rows of 2 KiB (the longest offered); 17 .. 256 values and rows past 2 KiB: none (the H200
  // measured span behind Triton's rows kernel there, and behind warp, row and pipe)
  EXPECT_EQ(names(1000, 1024, DType::bf16),
            (V{"span_v8_e0_t512_g32_k48_s4", "span_v8_e0_t256_g32_k24_s4", "span_v8_e0_t512_g64_k48_s4", "span_v8_e0_t256_g64_k24_s4"}));
  EXPECT_EQ(names(1000, 512, DType::fp32),
            (V{"span_v4_e0_t512_g32_k48_s4", "span_v4_e0_t256_g32_k24_s4", "span_v4_e0_t512_g64_k48_s4", "span_v4_e0_t256_g64_k24_s4"}));
  EXPECT_EQ(names(5003, 2, DType::fp32), (V{"span_v4_e2_t512_g1_k48_s4", "span_v4_e2_t256_g1_k24_s4", "span_v4_e1_t512_g2_k48_s4", "span_v4_e1_t256_g2_k24_s4"}));
  EXPECT_TRUE(names(32768, 4097, DType::bf16).empty());
  EXPECT_TRUE(names(1000, 513, DType::fp32).empty());
  EXPECT_TRUE(names(131072, 1001, DType::fp32).empty());
  EXPECT_TRUE(names(1000, 4096, DType::bf16).empty());
  EXPECT_TRUE(names(4194304, 32, DType::bf16).empty());
  EXPECT_TRUE(names(1000, 17, DType::bf16).empty());
  EXPECT_TRUE(names(1000, 256, DType::bf16).empty());
  EXPECT_TRUE(names(4096, 50257, DType::bf16).empty());
  EXPECT_TRUE(names(1, 1048576, DType::bf16).empty());
  for (const auto& [rows, cols, in] : {std::tuple{19173961, 7, DType::bf16}, {19173961, 7, DType::fp32}, {5003, 2, DType::fp16},
                                       {131072, 1001, DType::bf16}, {1000, 1024, DType::fp16}, {1000, 512, DType::fp32},
                                       {700, 257, DType::bf16}}) {
    const auto p = SoftmaxProblem::make(rows, cols, in);
    int offered = 0;
    for (const auto& c : native_softmax_configs(p)) {
      if (c.kind != SoftmaxKind::span) continue;
      ++offered;
      const NativeSoftmaxLaunch l = native_softmax_launch(c, p);
      EXPECT_TRUE(l.persistent) << c.name();
      EXPECT_LE(l.dynamic_smem, kNativeSmemDynamicOptIn) << c.name();
      const int64_t rb = cols * int64_t(size_of(in));
      EXPECT_GE(l.dynamic_smem, c.stages * (rb * (c.threads / c.group) + 32)) << c.name();
      EXPECT_EQ(l.cluster, 1) << c.name();
      EXPECT_EQ(native_softmax_launch_violation(l, NativeSoftmaxDeviceLimits{}, 2048, 64), "") << c.name();
    }
    EXPECT_GE(offered, 2) << p.str();
  }
  using C = NativeSoftmaxConfig;
  const auto span = SoftmaxKind::span;
  const C ok{span, 8, 8, 512, 1, 4, 1, 1, 48};
  EXPECT_EQ(ok.name(), "span_v8_e8_t512_g1_k48_s4");
  EXPECT_EQ(C::parse("span_v8_e0_t512_g64_k48_s4"), (C{span, 8, 0, 512, 1, 4, 1, 64, 48}));
  const auto p7 = SoftmaxProblem::make(1000, 7);
  EXPECT_EQ(ok.cannot_run(p7), "");
  auto mixed = p7;
  mixed.out = DType::fp32;
  EXPECT_NE(ok.cannot_run(mixed), "");  // y over x in shared memory: one dtype
  auto strided = p7;
  strided.ld = 8;
  EXPECT_NE(ok.cannot_run(strided), "");  // packed rows only
  EXPECT_NE((C{span, 8, 4, 512, 1, 4, 1, 1, 48}).cannot_run(p7), "");    // 1 lane x 4 values < 7
  EXPECT_NE((C{span, 8, 8, 512, 1, 7, 1, 1, 48}).cannot_run(p7), "");    // stages 2 .. 6
  EXPECT_NE((C{span, 8, 8, 512, 1, 4, 1, 64, 48}).cannot_run(p7), "");   // elems > 0: a group within a warp
  EXPECT_NE((C{span, 8, 0, 512, 1, 4, 1, 1, 48}).cannot_run(p7), "");    // packs: 2 lanes at least
  EXPECT_NE((C{span, 8, 0, 1024, 1, 4, 1, 64, 48}).cannot_run(p7), "");  // 16 groups of warps: 15 named barriers
  EXPECT_NE((C{span, 8, 0, 512, 1, 4, 1, 48, 48}).cannot_run(p7), "");   // 48 lanes: not whole warps
  EXPECT_NE((C{span, 4, 8, 512, 1, 4, 1, 1, 48}).cannot_run(p7), "");    // 16-byte packs
  EXPECT_NE((C{span, 8, 0, 512, 1, 4, 1, 512, 48}).cannot_run(SoftmaxProblem::make(10, 50257)), "");  // a row past 48 KiB
  EXPECT_NE((C{span, 8, 0, 512, 1, 3, 1, 512, 110}).cannot_run(SoftmaxProblem::make(10, 50257)), "");  // 3 x 98 KiB
  EXPECT_NE((C{span, 8, 0, 512, 3, 4, 1, 512, 48}).cannot_run(SoftmaxProblem::make(10, 50257)), "");   // no cluster
  EXPECT_NE((C{span, 8, 8, 512, 2, 4, 1, 1, 48}).cannot_run(p7), "");                                 // no cluster
  EXPECT_THROW(C::parse("span_v8_e0_t512_g64_k48"), Error);
  EXPECT_THROW(C::parse("span_v8_e0_t512_g64_c1_k48_s4"), Error);  // no cluster field (before 2026-12-03: _c1)
}

// band: fp32 x, at most 64 rows of at least 8192 columns of whole 16-byte packs, offered where two
// rows' chunks less the 4 held pieces fit a CTA's 8 slots on 132 SMs (one CTA each); names parse
// back; refusals name why.
TEST(NativeSoftmaxConfigs, BandConfigs) {
  auto names = [](int64_t rows, int64_t cols, DType in, int64_t ld = 0, int sms = 0) {
    std::vector<std::string> out;
    auto p = SoftmaxProblem::make(rows, cols, in);
    p.ld = ld;
    for (const auto& c : native_softmax_configs(p, sms))
      if (c.kind == SoftmaxKind::band) out.push_back(c.name());
    return out;
  };
  const std::vector<std::string> one{"band_v4_e16_t448_s8"};
  EXPECT_EQ(names(8, 4194304, DType::fp32), one);  // 127 KiB of a row a CTA: 5 pieces of 28 KiB, 2 x 5 - 4 <= 8
  EXPECT_EQ(names(1, 8192, DType::fp32, 8196), one);
  EXPECT_EQ(names(64, 1048576, DType::fp32), one);
  EXPECT_TRUE(names(8, 4194304, DType::fp32, 0, 80).empty());  // 8 pieces a CTA on 80 SMs: 2 x 8 - 4 > 8
  EXPECT_TRUE(names(8, 4194304, DType::bf16).empty());          // 16-bit x: the ring
  EXPECT_TRUE(names(2, 1048575, DType::fp32).empty());          // not whole packs
  EXPECT_TRUE(names(2, 1048576, DType::fp32, 1048577).empty());
  EXPECT_TRUE(names(65, 1048576, DType::fp32).empty());
  EXPECT_TRUE(names(1, 8188, DType::fp32).empty());
  using C = NativeSoftmaxConfig;
  const C c8{SoftmaxKind::band, 4, 16, 448, 1, 8};
  EXPECT_EQ(C::parse("band_v4_e16_t448_s8"), c8);
  EXPECT_EQ(C::parse("band_v8_e32_t448_s8"), C({SoftmaxKind::band, 8, 32, 448, 1, 8}));  // runs 16-bit x too
  for (const char* bad : {"band_v4_e16_t448", "band_v4_e16_t448_c1_s8", "band_v4_t448_s8", "band_v4_e16_t448_s8_s8"})
    EXPECT_THROW(C::parse(bad), Error) << bad;
  const auto p = SoftmaxProblem::make(8, 4194304, DType::fp32);
  EXPECT_EQ(c8.cannot_run(p), "");
  EXPECT_NE(C({SoftmaxKind::band, 4, 16, 448, 1, 9}).cannot_run(p).find("shared memory"), std::string::npos);  // 9 x 28 KiB
  EXPECT_NE(C({SoftmaxKind::band, 4, 16, 448, 1, 1}).cannot_run(p).find("stages"), std::string::npos);
  EXPECT_NE(C({SoftmaxKind::band, 4, 8, 448, 1, 8}).cannot_run(p).find("elems"), std::string::npos);
  EXPECT_NE(C({SoftmaxKind::band, 4, 16, 512, 1, 7}).cannot_run(p).find("threads"), std::string::npos);
  EXPECT_NE(C({SoftmaxKind::band, 1, 4, 448, 1, 8}).cannot_run(p).find("16-byte"), std::string::npos);
  auto odd = SoftmaxProblem::make(8, 4194303, DType::fp32);
  EXPECT_NE(c8.cannot_run(odd).find("whole 16-byte packs"), std::string::npos);
  const NativeSoftmaxLaunch l = native_softmax_launch(c8, p);
  EXPECT_EQ(l.threads, 512);  // + the loader and sync warps
  EXPECT_EQ(l.dynamic_smem, 8 * 28672);
  EXPECT_TRUE(l.persistent && l.cooperative);
}
