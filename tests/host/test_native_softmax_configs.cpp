// The native softmax backend's config space: every config can hold the row, vectors only
// where ld allows them, names are distinct and stable, online always present.
#include <gtest/gtest.h>

#include <set>

#include "backends/native/softmax.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::native;

TEST(NativeSoftmaxConfigs, EveryConfigHoldsTheRow) {
  for (int64_t cols : {1, 31, 32, 33, 64, 1000, 1024, 1025, 4097, 32768, 32769, 65536, 262147})
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
          EXPECT_TRUE(c.max_cols() < 0 || c.max_cols() >= cols) << c.name() << " for cols " << cols;
          EXPECT_EQ(c.threads % 32, 0);
          EXPECT_LE(c.threads, c.kind == SoftmaxKind::warp || c.elems >= 32 ? 512 : 1024) << c.name();
          EXPECT_TRUE(c.vec == 1 || c.vec == int(16 / size_of(in))) << c.name();
          if (c.vec > 1) EXPECT_EQ(p.row_stride() % c.vec, 0) << c.name();
          if (c.kind != SoftmaxKind::online) EXPECT_EQ(c.elems % c.vec, 0) << c.name();
          online += c.kind == SoftmaxKind::online;
        }
        EXPECT_EQ(names.size(), cfgs.size()) << "duplicate names";
        EXPECT_GE(online, 3);
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
  EXPECT_EQ(kinds(1), (std::set<SoftmaxKind>{SoftmaxKind::warp, SoftmaxKind::online}));
  EXPECT_EQ(kinds(1024), (std::set<SoftmaxKind>{SoftmaxKind::warp, SoftmaxKind::block, SoftmaxKind::online}));
  EXPECT_EQ(kinds(4097), (std::set<SoftmaxKind>{SoftmaxKind::block, SoftmaxKind::online}));
  EXPECT_EQ(kinds(16384), (std::set<SoftmaxKind>{SoftmaxKind::block, SoftmaxKind::online}));
  EXPECT_EQ(kinds(16385), (std::set<SoftmaxKind>{SoftmaxKind::online}));
  EXPECT_EQ(kinds(262147), (std::set<SoftmaxKind>{SoftmaxKind::online}));
}

TEST(NativeSoftmaxConfigs, VectorsOnlyWhenLdAllows) {
  auto vecs = [](int64_t cols, int64_t ld, DType in) {
    auto p = SoftmaxProblem::make(4, cols, in);
    p.ld = ld;
    std::set<int> v;
    for (const auto& c : native_softmax_configs(p)) v.insert(c.vec);
    return v;
  };
  EXPECT_EQ(vecs(4096, 0, DType::bf16), (std::set<int>{1, 8}));
  EXPECT_EQ(vecs(4096, 0, DType::fp32), (std::set<int>{1, 4}));
  EXPECT_EQ(vecs(4097, 0, DType::bf16), (std::set<int>{1}));
  EXPECT_EQ(vecs(4097, 4104, DType::bf16), (std::set<int>{1, 8}));
  EXPECT_EQ(vecs(4098, 4098, DType::fp32), (std::set<int>{1}));
}

TEST(NativeSoftmaxConfigs, PinnedListForOneProblem) {
  auto p = SoftmaxProblem::make(1000, 1024);
  std::vector<std::string> names;
  for (const auto& c : native_softmax_configs(p)) names.push_back(c.name());
  const std::vector<std::string> want = {
      "warp_v1_e32_t128", "warp_v1_e32_t256", "warp_v1_e32_t512",  "warp_v8_e32_t128",  "warp_v8_e32_t256",
      "warp_v8_e32_t512", "block_v1_e8_t128", "block_v8_e8_t128",  "block_v1_e4_t256",  "block_v8_e8_t256",
      "block_v1_e4_t512", "block_v8_e8_t512", "block_v1_e4_t1024", "block_v8_e8_t1024", "online_v1_t256",
      "online_v1_t512",   "online_v1_t1024",  "online_v8_t256",    "online_v8_t512",    "online_v8_t1024"};
  EXPECT_EQ(names, want);
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
