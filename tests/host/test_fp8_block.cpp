// Block-scaled FP8 on the host: the scale mode's names, grid and buffer sizes, validation, keys
// (existing problems keep theirs), problem JSON, the CLI flag, the float64 host reference, and
// each backend's answer (Triton: configs with BLOCK_K | 128; cuBLASLt: sm_90, k % 128 == 0,
// row-major D; CuTe DSL: tiles inside one 128x128 scale block; CUTLASS, native: refused with a
// reason).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cublaslt/lt.hpp"
#include "backends/cutedsl/configs.hpp"
#include "backends/cutlass/configs.hpp"
#include "backends/native/decode_gemm.hpp"
#include "backends/triton/configs.hpp"
#include "core/problem_json.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"
#include "support/host_reference.hpp"

using namespace gemmtune;

namespace {

GemmProblem block(int64_t m, int64_t n, int64_t k) {
  GemmProblem p = GemmProblem::linear(m, n, k, DType::e4m3);
  p.scale = ScaleMode::block;
  return p;
}

DeviceInfo device(int major, int minor) {
  DeviceInfo d;
  d.index = 0, d.cc_major = major, d.cc_minor = minor, d.sm_count = 132, d.name = "test";
  return d;
}

}  // namespace

TEST(Fp8BlockProblem, NamesAndParsing) {
  EXPECT_STREQ(to_string(ScaleMode::block), "block");
  EXPECT_EQ(parse_scale_mode("block"), ScaleMode::block);
  try {
    parse_scale_mode("blockwise", "--scale");
    ADD_FAILURE() << "accepted 'blockwise'";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("block"), std::string::npos) << e.message();  // listed among the accepted
  }
}

TEST(Fp8BlockProblem, ScaleGridAndSizes) {
  // k = 1000: 8 k blocks (the last partial), sb's leading dim 8; n = 300: 3 n blocks.
  GemmProblem p = block(7, 300, 1000);
  EXPECT_EQ(p.scale_k_blocks(), 8);
  EXPECT_EQ(p.scale_n_blocks(), 3);
  EXPECT_EQ(p.scale_b_ld(), 8);
  EXPECT_EQ(p.scale_a_elems(), 7 * 8);
  EXPECT_EQ(p.scale_b_elems(), 3 * 8);
  // ceil(640 / 128) = 5 k blocks: sb rows padded to 8 (16 bytes).
  p = block(128, 128, 640);
  EXPECT_EQ(p.scale_b_ld(), 8);
  EXPECT_EQ(p.scale_b_elems(), 8);
  p = block(1, 1, 1);
  EXPECT_EQ(p.scale_a_elems(), 1);
  EXPECT_EQ(p.scale_b_elems(), 4);
  // Other modes unchanged.
  p.scale = ScaleMode::rowwise;
  EXPECT_EQ(p.scale_a_elems(), 1);
  EXPECT_EQ(p.scale_b_elems(), 1);
}

TEST(Fp8BlockProblem, ValidationAndPrinting) {
  GemmProblem p = block(16, 256, 1000);  // any k: backends refuse what they cannot do
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.str(), "16x256x1000 e4m3 A:row B:col D:bf16/row scale=block");
  GemmProblem bf = GemmProblem::linear(16, 256, 1024);
  bf.scale = ScaleMode::block;
  try {
    bf.validate();
    ADD_FAILURE() << "block scales on bf16 inputs accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.message().rfind("problem.scale: block scales apply to fp8 inputs only", 0), 0u) << e.message();
  }
}

TEST(Fp8BlockProblem, KeysOfExistingProblemsUnchanged) {
  // Pinned before block scales existed: the canonical text and key of an fp8 tensorwise problem.
  GemmProblem t = GemmProblem::linear(2048, 8192, 28672, DType::e4m3);
  EXPECT_EQ(t.canonical(),
            "gemm1;m=2048;n=8192;k=28672;a=e4m3/row/28672;b=e4m3/col/28672;d=bf16/row/8192;bias=0;act=none;"
            "scale=tensorwise;tf32=0");
  EXPECT_EQ(t.key(), stable_hash(t.canonical()));
  GemmProblem b = t;
  b.scale = ScaleMode::block;
  EXPECT_EQ(b.canonical(),
            "gemm1;m=2048;n=8192;k=28672;a=e4m3/row/28672;b=e4m3/col/28672;d=bf16/row/8192;bias=0;act=none;"
            "scale=block;tf32=0");
  EXPECT_NE(b.key(), t.key());
  GemmProblem r = t;
  r.scale = ScaleMode::rowwise;
  EXPECT_NE(b.key(), r.key());
}

TEST(Fp8BlockProblem, JsonRoundTrip) {
  GemmProblem p = problem_from_json(R"({"m": 64, "n": 256, "k": 512, "dtype": "e4m3", "scale": "block"})");
  EXPECT_EQ(p.scale, ScaleMode::block);
  EXPECT_EQ(problem_from_json(problem_to_json(p)).key(), p.key());
  try {
    problem_from_json(R"({"m": 64, "n": 256, "k": 512, "dtype": "bf16", "scale": "block"})");
    ADD_FAILURE() << "bf16 with block scales accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("problem.scale"), std::string::npos) << e.message();
  }
}

TEST(Fp8BlockProblem, HostReferenceAppliesEachBlocksScales) {
  // m = 2, n = 130 (2 n blocks), k = 200 (2 k blocks, the second partial); A and B all ones:
  // D[i, c] = sum over k blocks j of (k in block j) * sa[j, i] * sb[c / 128, j].
  GemmProblem p = block(2, 130, 200);
  p.d.dtype = DType::fp32;
  host::Operands o;
  o.a.assign(size_t(p.elems_a()), 0x38);  // e4m3 1.0
  o.b.assign(size_t(p.elems_b()), 0x38);
  o.sa = {1, 2, 3, 4};                    // sa[j * m + i]: (i0, j0) 1, (i1, j0) 2, (i0, j1) 3, (i1, j1) 4
  o.sb = {0.5f, 0.25f, -1, -1, 2, 4, -1, -1};  // [nb = 2][ld 4]; -1: padding, never read
  const auto d = host::host_gemm(p, o);
  EXPECT_DOUBLE_EQ(d[0], 128 * 1 * 0.5 + 72 * 3 * 0.25);         // row 0, col 0
  EXPECT_DOUBLE_EQ(d[129], 128 * 1 * 2 + 72 * 3 * 4);            // row 0, col 129 (n block 1)
  EXPECT_DOUBLE_EQ(d[130 + 5], 128 * 2 * 0.5 + 72 * 4 * 0.25);   // row 1, col 5
}

TEST(Fp8BlockBackends, TritonOffersOnlyBlockKDividing128) {
  for (GemmProblem p : {block(2048, 8192, 8192), block(200, 328, 1000), block(16, 1024, 2048)}) {
    SCOPED_TRACE(p.str());
    auto cfgs = triton::configs_for(p, 132);
    ASSERT_FALSE(cfgs.empty());
    for (auto& c : cfgs) {
      EXPECT_EQ(128 % c.block_k, 0) << c.id();
      EXPECT_TRUE(triton::check(c, p, 132)) << c.id();
      EXPECT_EQ(triton::gemm_params(c, p, 132)["scale"], "block");
    }
    triton::Config big = cfgs[0];
    big.block_k = 256;
    EXPECT_FALSE(triton::check(big, p, 132));
  }
}

TEST(Fp8BlockBackends, CublasLtRules) {
  const DeviceInfo h100 = device(9, 0), b200 = device(10, 0);
  EXPECT_TRUE(lt::static_verdict(block(2048, 8192, 8192), h100));
  Verdict v = lt::static_verdict(block(2048, 8192, 8192), b200);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("sm_90"), std::string::npos) << v.reason;
  v = lt::static_verdict(block(256, 256, 1040), h100);  // rows of 16-byte multiples, k % 128 = 16
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("multiple of 128"), std::string::npos) << v.reason;
  GemmProblem col = block(256, 256, 512);
  col.d.layout = Layout::col, col.c.layout = Layout::col;
  v = lt::static_verdict(col, h100);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("row-major D"), std::string::npos) << v.reason;
}

TEST(Fp8BlockBackends, CutedslOffersTilesInBandsOfOneScaleBlock) {
  // Every offered config cuts its tile into bands that lie in one of B's 128x128 blocks wherever
  // the tile starts: tile N (tile M with swap-AB) divides 128, or is 192 (three 64-column bands,
  // the kernel's scale_bands). k need not be a multiple of 128 (the k tile is the scale block).
  bool wide = false;
  for (GemmProblem p : {block(2048, 8192, 8192), block(200, 328, 1040), block(16, 1024, 2048), block(64, 136, 96)}) {
    SCOPED_TRACE(p.str());
    ASSERT_TRUE(cutedsl::problem_verdict(p)) << cutedsl::problem_verdict(p).reason;
    auto cfgs = cutedsl::configs_for(p, 132);
    ASSERT_FALSE(cfgs.empty());
    for (auto& c : cfgs) {
      const int along = c.swap_ab ? c.tile_m : c.tile_n;
      EXPECT_TRUE(128 % along == 0 || (along == 192 && !c.swap_ab)) << c.id();
      wide = wide || along == 192;
      EXPECT_EQ(cutedsl::params(c, p)["scale"], "block");
    }
  }
  EXPECT_TRUE(wide);  // the 192-wide tile is offered (2048x8192x8192)
  const auto decode = cutedsl::configs_for(block(16, 1024, 2048), 132);  // swap-AB configs too
  EXPECT_TRUE(std::any_of(decode.begin(), decode.end(), [](const cutedsl::Config& c) { return c.swap_ab; }));
  // The kernel's rules (A row, B column-major, 16-bit out, TMA's 16-byte rows) still apply.
  GemmProblem f32 = block(256, 256, 512);
  f32.d.dtype = f32.c.dtype = DType::fp32;
  EXPECT_FALSE(cutedsl::problem_verdict(f32));
  Verdict v = cutedsl::problem_verdict(block(72, 136, 1000));  // rows of 1000 bytes
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("16"), std::string::npos) << v.reason;
}

TEST(Fp8BlockBackends, OthersRefuseWithAReason) {
  // CUTLASS takes block scales where m is a multiple of 4 (CutlassConfigs.BlockScalesTakeTheirOwnConfigs).
  EXPECT_TRUE(cutlass_backend::problem_verdict(block(2048, 8192, 8192)));
  Verdict v = cutlass_backend::problem_verdict(block(2050, 8192, 8192));
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("block"), std::string::npos) << v.reason;
  const std::string why = native::decode_unsupported(block(8, 4096, 4096));
  EXPECT_NE(why.find("block"), std::string::npos) << why;
}
