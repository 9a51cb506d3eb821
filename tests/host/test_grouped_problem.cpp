// GroupedGemmProblem: validation names the field, the key holds the rows bucket (not the exact
// rows, the skew or alpha), JSON round trips, "GxNxK" parsing; the Triton grouped configs and
// compile params; the tuning splits.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "backends/triton/triton_grouped.hpp"
#include "core/problem_json.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/grouped.hpp"
#include "host/problems.hpp"
#include "tune/grouped_check.hpp"

using namespace gemmtune;

using host_test::why;

TEST(GroupedProblem, MakeIsValid) {
  auto p = GroupedGemmProblem::make(8, 14336, 4096, 512);
  EXPECT_EQ(why(p), "");
  EXPECT_EQ(p.a, DType::bf16);
  EXPECT_EQ(p.d, DType::bf16);
  EXPECT_EQ(p.scale, ScaleMode::none);
  EXPECT_EQ(p.layout, GroupedLayout::contiguous);
  auto f = GroupedGemmProblem::make(32, 4096, 7168, 64, DType::e4m3);
  EXPECT_EQ(why(f), "");
  EXPECT_EQ(f.d, DType::bf16);
  EXPECT_EQ(f.scale, ScaleMode::rowwise);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 8 * 512 * 14336 * 4096);
  EXPECT_DOUBLE_EQ(p.min_bytes(), 8.0 * 512 * 4096 * 2 + 8.0 * 14336 * 4096 * 2 + 8.0 * 512 * 14336 * 2);
}

TEST(GroupedProblem, EachBadFieldIsNamed) {
  const auto base = GroupedGemmProblem::make(8, 256, 512, 64);
  struct Case {
    std::function<void(GroupedGemmProblem&)> edit;
    std::string field;
  } cases[] = {
      {[](auto& p) { p.groups = 0; }, "grouped.groups"},
      {[](auto& p) { p.groups = 1025; }, "grouped.groups"},
      {[](auto& p) { p.n = 0; }, "grouped.n"},
      {[](auto& p) { p.k = -1; }, "grouped.k"},
      {[](auto& p) { p.k = int64_t(1) << 31; }, "grouped.k"},
      {[](auto& p) { p.rows_per_group = 0; }, "grouped.rows_per_group"},
      {[](auto& p) { p.a = DType::fp32; }, "grouped.dtype"},
      {[](auto& p) { p.a = DType::e5m2, p.scale = ScaleMode::rowwise; }, "grouped.dtype"},
      {[](auto& p) { p.d = DType::e4m3; }, "grouped.out_dtype"},
      {[](auto& p) { p.scale = ScaleMode::tensorwise; }, "grouped.scale"},
      {[](auto& p) { p.a = DType::e4m3, p.scale = ScaleMode::none; }, "grouped.scale"},
      {[](auto& p) { p.scale = ScaleMode::block; }, "grouped.scale"},
      {[](auto& p) { p.alpha = NAN; }, "grouped.alpha"},
      {[](auto& p) { p.skew = -1; }, "grouped.skew"},
      {[](auto& p) { p.skew = INFINITY; }, "grouped.skew"},
      {[](auto& p) { p.groups = 1024, p.n = p.k = int64_t(1) << 30, p.rows_per_group = int64_t(1) << 30; },
       "grouped.rows_per_group"},
  };
  for (auto& c : cases) {
    GroupedGemmProblem p = base;
    c.edit(p);
    const std::string msg = why(p);
    EXPECT_EQ(msg.rfind(c.field + ":", 0), 0u) << "expected an error naming " << c.field << ", got '" << msg << "'";
  }
  EXPECT_EQ(why(GroupedGemmProblem::make(0, 1, 1, 1)), "grouped.groups: must be in [1, 1024] (got 0)");
  // fp8 takes every scale mode; each keys apart.
  std::set<std::string> keys;
  for (ScaleMode m : {ScaleMode::tensorwise, ScaleMode::rowwise, ScaleMode::block}) {
    auto p = GroupedGemmProblem::make(8, 256, 512, 64, DType::e4m3);
    p.scale = m;
    EXPECT_EQ(why(p), "") << to_string(m);
    EXPECT_TRUE(keys.insert(p.key()).second) << to_string(m);
  }
}

TEST(GroupedProblem, KeyHoldsTheRowsBucketOnly) {
  auto p = GroupedGemmProblem::make(8, 14336, 4096, 512);
  EXPECT_EQ(p.rows_bucket(), 512);
  EXPECT_EQ(p.canonical(),
            "grouped1;g=8;n=14336;k=4096;rows=512;layout=contiguous;a=bf16;d=bf16;scale=none;act=none;bias=0");
  // Rows in one bucket, the tuning skew and alpha share the key; the split never reaches it.
  auto q = p;
  q.rows_per_group = 257, q.skew = 2.0, q.alpha = 0.5f;
  EXPECT_EQ(q.rows_bucket(), 512);
  EXPECT_EQ(q.key(), p.key());
  EXPECT_EQ(q.at_bucket().rows_per_group, 512);
  for (int64_t rows : {1, 2, 3, 64, 65, 4096, 4097}) {
    auto r = p;
    r.rows_per_group = rows;
    EXPECT_GE(r.rows_bucket(), rows);
    EXPECT_LT(r.rows_bucket(), 2 * rows + 1);
    EXPECT_EQ(r.rows_bucket() & (r.rows_bucket() - 1), 0) << rows;
  }
  // Everything else that can change the pick or the result keys it.
  std::set<std::string> keys{p.key()};
  std::vector<std::function<void(GroupedGemmProblem&)>> edits = {
      [](auto& x) { x.groups = 16; },
      [](auto& x) { x.n = 4096; },
      [](auto& x) { x.k = 8192; },
      [](auto& x) { x.rows_per_group = 513; },
      [](auto& x) { x.layout = GroupedLayout::masked; },
      [](auto& x) { x.a = DType::fp16; },
      [](auto& x) { x.d = DType::fp32; },
      [](auto& x) { x.a = DType::e4m3, x.scale = ScaleMode::rowwise; },
      [](auto& x) { x.a = DType::e4m3, x.scale = ScaleMode::tensorwise; },
      [](auto& x) { x.act = Activation::silu; },
      [](auto& x) { x.bias = true; },
  };
  for (auto& e : edits) {
    auto x = p;
    e(x);
    EXPECT_EQ(why(x), "");
    EXPECT_TRUE(keys.insert(x.key()).second) << x.canonical();
  }
}

TEST(GroupedProblem, StrAndParse) {
  auto p = GroupedGemmProblem::make(8, 4096, 14336, 64);
  p.layout = GroupedLayout::masked;
  EXPECT_EQ(p.skew, 1.0);  // the default skewed timing split, not shown
  EXPECT_EQ(p.str(), "grouped 8x4096x14336 rows/group~64 masked bf16->bf16");
  p.skew = 1.5;
  EXPECT_EQ(p.str(), "grouped 8x4096x14336 rows/group~64 masked bf16->bf16 skew=1.5");
  int64_t g = 0, n = 0, k = 0;
  parse_groups_n_k("32x7168x2048", g, n, k);
  EXPECT_EQ(g, 32);
  EXPECT_EQ(n, 7168);
  EXPECT_EQ(k, 2048);
  for (const char* bad : {"", "8x4096", "8x4096x", "8x4096x14336x1", "ax1x1", "8 x1x1", "8x-x1"}) {
    try {
      parse_groups_n_k(bad, g, n, k, "grouped shape");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.message()).rfind("grouped shape: '", 0), 0u) << e.message();
    }
  }
  EXPECT_EQ(parse_grouped_layout("masked"), GroupedLayout::masked);
  EXPECT_THROW(parse_grouped_layout("ragged"), Error);
}

TEST(GroupedProblem, JsonRoundTripAndNamedErrors) {
  auto p = GroupedGemmProblem::make(32, 4096, 7168, 300, DType::e4m3);
  p.layout = GroupedLayout::masked, p.scale = ScaleMode::tensorwise, p.act = Activation::gelu_tanh, p.bias = true;
  p.alpha = 0.25f, p.skew = 1.0;
  const GroupedGemmProblem q = grouped_problem_from_json(grouped_problem_to_json(p));
  EXPECT_EQ(q.canonical(), p.canonical());
  EXPECT_EQ(q.str(), p.str());
  EXPECT_EQ(q.rows_per_group, 300);
  // No "skew": the default (balanced and Zipf(1) timing splits); 0: balanced only.
  nlohmann::json j = nlohmann::json::parse(grouped_problem_to_json(p));
  j.erase("skew");
  EXPECT_EQ(grouped_problem_from_json(j.dump()).skew, 1.0);
  j["skew"] = 0;
  EXPECT_EQ(grouped_problem_from_json(j.dump()).skew, 0.0);
  auto err = [](const std::string& text) {
    try {
      grouped_problem_from_json(text);
    } catch (const Error& e) {
      return std::string(e.message());
    }
    return std::string();
  };
  EXPECT_EQ(err(R"({"groups": 8, "n": 64, "k": 64})"), "grouped.rows_per_group: missing");
  EXPECT_EQ(err(R"({"groups": 8, "n": 64, "k": 64, "rows_per_group": 1.5})"),
            "grouped.rows_per_group: expected an integer");
  EXPECT_EQ(err(R"({"groups": 8, "n": 64, "k": 64, "rows_per_group": 4, "layout": "x"})"),
            "grouped.layout: 'x' is not a layout (contiguous, masked)");
  EXPECT_NE(err(R"({"groups": 8, "n": 64, "k": 64, "rows_per_group": 4, "m": 4})").find("unknown field 'm'"),
            std::string::npos);
  EXPECT_EQ(err(R"({"groups": 0, "n": 64, "k": 64, "rows_per_group": 4})").rfind("grouped.groups:", 0), 0u);
  // fp8 defaults to rowwise scales and a bf16 output.
  const auto f = grouped_problem_from_json(R"({"groups": 8, "n": 64, "k": 64, "rows_per_group": 4, "dtype": "e4m3"})");
  EXPECT_EQ(f.scale, ScaleMode::rowwise);
  EXPECT_EQ(f.d, DType::bf16);
}

TEST(GroupedSplit, BalancedSkewedAndRagged) {
  EXPECT_EQ(grouped_split(4, 16, 0.0, 1), (std::vector<int64_t>{16, 16, 16, 16}));
  for (double skew : {0.5, 1.0, 2.0}) {
    const auto c = grouped_split(32, 512, skew, 7);
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t(0)), 32 * 512);
    EXPECT_GT(*std::max_element(c.begin(), c.end()), 2 * 512) << skew;  // a hot expert
    EXPECT_LT(*std::min_element(c.begin(), c.end()), 512) << skew;
    EXPECT_EQ(grouped_split(32, 512, skew, 7), c);                       // deterministic
  }
  EXPECT_NE(grouped_split(32, 512, 1.0, 7), grouped_split(32, 512, 1.0, 8));  // the order is drawn
  const auto r = grouped_ragged_split(32, 64, 3);
  EXPECT_EQ(std::count(r.begin(), r.end(), int64_t(0)), 1);
  std::set<int64_t> residues;
  for (int64_t c : r) residues.insert(c % 16);
  EXPECT_GE(residues.size(), 12u);
  const auto one = grouped_ragged_split(1, 100, 3);
  EXPECT_EQ(one.size(), 1u);
  EXPECT_GE(one[0], 100);
}

TEST(TritonGrouped, ConfigsIdsAndParams) {
  auto p = GroupedGemmProblem::make(8, 14336, 4096, 512);
  const auto configs = triton::grouped_configs(p);
  ASSERT_FALSE(configs.empty());
  std::set<std::string> ids;
  for (const auto& c : configs) {
    EXPECT_EQ(c.cannot_run(p), "");
    EXPECT_TRUE(ids.insert(c.id()).second) << c.id();
    EXPECT_EQ(triton::GroupedConfig::parse(c.id()), c);
  }
  EXPECT_EQ(configs[0].id(), "g128x256x64_w8_s4_gm8");
  // The two-slice config only where groups are short (the key's bucket <= 128 rows), 16-bit only.
  auto has_sliced = [](const GroupedGemmProblem& q) {
    for (const auto& c : triton::grouped_configs(q))
      if (c.chunks > 1) return true;
    return false;
  };
  EXPECT_FALSE(has_sliced(p));
  EXPECT_FALSE(has_sliced(GroupedGemmProblem::make(8, 14336, 4096, 129)));
  EXPECT_TRUE(has_sliced(GroupedGemmProblem::make(8, 14336, 4096, 128)));
  EXPECT_TRUE(has_sliced(GroupedGemmProblem::make(32, 4096, 7168, 64)));
  EXPECT_FALSE(has_sliced(GroupedGemmProblem::make(32, 4096, 7168, 64, DType::e4m3)));
  for (const char* bad : {"", "g128x256x64_w8_s4", "g128x256x64_w8_s4_gm8x", "g0128x256x64_w8_s4_gm8",
                          "g64x256x64_w8_s4_gm8_c1", "g64x256x64_w8_s4_gm8_c2x", "g64x256x64_w8_s4_gm8_c02"})
    EXPECT_THROW(triton::GroupedConfig::parse(bad), Error) << bad;
  // Row slices sharing B's tiles: "_c<chunks>", their accumulators within 128 registers a thread.
  const triton::GroupedConfig two{64, 256, 64, 8, 4, 8, 2};
  EXPECT_EQ(two.id(), "g64x256x64_w8_s4_gm8_c2");
  EXPECT_EQ(triton::GroupedConfig::parse(two.id()), two);
  EXPECT_EQ(two.cannot_run(p), "");
  EXPECT_EQ(triton::grouped_params(two, p, 132, "abc").at("chunks"), 2);
  EXPECT_NE((triton::GroupedConfig{64, 256, 64, 4, 4, 8, 2}.cannot_run(p)), "");  // 256 registers
  EXPECT_NE((triton::GroupedConfig{64, 128, 64, 8, 4, 8, 5}.cannot_run(p)), "");
  // An fp32 D needs shared memory for the epilogue: the 128x256 tiles do not fit.
  auto f32 = p;
  f32.d = DType::fp32;
  for (const auto& c : triton::grouped_configs(f32)) EXPECT_LT(c.block_m * c.block_n, 128 * 256) << c.id();
  EXPECT_NE(configs[0].cannot_run(f32), "");
  triton::GroupedConfig odd = configs[0];
  odd.block_n = 96;
  EXPECT_NE(odd.cannot_run(p), "");

  auto j = triton::grouped_params(configs[0], p, 132, "abc");
  EXPECT_EQ(j.at("kernel"), "grouped_gemm");
  EXPECT_EQ(j.at("max_g"), 16);
  EXPECT_EQ(j.at("masked"), false);
  EXPECT_EQ(j.at("num_sms"), 132);
  EXPECT_EQ(j.at("k_div16"), true);
  p.groups = 33, p.layout = GroupedLayout::masked;
  EXPECT_EQ(triton::grouped_max_g(p), 64);
  EXPECT_EQ(triton::grouped_params(configs[0], p, 132, "abc").at("masked"), true);

  auto f = GroupedGemmProblem::make(32, 4096, 7168, 64, DType::e4m3);
  for (const auto& c : triton::grouped_configs(f)) EXPECT_GE(c.block_k, 64) << c.id();
  EXPECT_EQ(triton::grouped_params(triton::grouped_configs(f)[0], f, 132, "x").at("scale"), "rowwise");
  // Block scales: k tiles of 128 and at most 128 columns (one scale block each way).
  f.scale = ScaleMode::block;
  const auto block = triton::grouped_configs(f);
  EXPECT_FALSE(block.empty());
  for (const auto& c : block) EXPECT_TRUE(c.block_k == 128 && c.block_n <= 128) << c.id();
  EXPECT_NE((triton::GroupedConfig{128, 256, 128, 8, 3, 8}.cannot_run(f)), "");
  EXPECT_NE((triton::GroupedConfig{64, 128, 128, 8, 3, 8, 2}.cannot_run(f)), "");  // one slice a tile
  EXPECT_EQ(triton::grouped_params(block[0], f, 132, "x").at("scale"), "block");
  // TMA: rows of A and B in multiples of 16 bytes.
  EXPECT_TRUE(triton::grouped_verdict(p));
  auto odd_k = GroupedGemmProblem::make(8, 256, 100, 64);
  EXPECT_FALSE(triton::grouped_verdict(odd_k));
  odd_k.k = 104;
  EXPECT_TRUE(triton::grouped_verdict(odd_k));  // 208 bytes
  auto odd_fp8 = GroupedGemmProblem::make(8, 256, 104, 64, DType::e4m3);
  EXPECT_FALSE(triton::grouped_verdict(odd_fp8));  // 104 bytes
}
