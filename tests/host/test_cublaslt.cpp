// The cublaslt backend's host-side rules: algo ids, names, supports() verdicts, and the
// roofline helper. Runs without a GPU (where a GPU is present, supports() also probes
// cuBLASLt's heuristic; the verdicts below hold on an H200 either way).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cublaslt/lt.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune {
namespace {

cublasLtMatmulAlgo_t patterned_algo() {
  cublasLtMatmulAlgo_t algo;
  unsigned char bytes[sizeof algo];
  for (size_t i = 0; i < sizeof algo; ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 5);
  std::memcpy(&algo, bytes, sizeof algo);
  return algo;
}

TEST(CublasLtId, HexRoundTrip) {
  cublasLtMatmulAlgo_t algo = patterned_algo();
  std::string id = lt::algo_to_hex(algo);
  ASSERT_EQ(id.size(), 128u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(id.substr(0, 6), "052a4f");  // bytes 0x05, 0x2a, 0x4f
  cublasLtMatmulAlgo_t back = lt::algo_from_hex(id);
  EXPECT_EQ(std::memcmp(&algo, &back, sizeof algo), 0);
  // Upper case parses to the same bytes.
  std::string upper = id;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  back = lt::algo_from_hex(upper);
  EXPECT_EQ(std::memcmp(&algo, &back, sizeof algo), 0);
}

TEST(CublasLtId, MalformedIdsThrowNamingTheId) {
  std::string good = lt::algo_to_hex(patterned_algo());
  const std::string bads[] = {"", good.substr(1), good + "0", good.substr(0, 127) + "g", std::string(128, ' ')};
  for (const std::string& bad : bads) {
    try {
      lt::algo_from_hex(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("'" + bad + "'"), std::string::npos) << e.message();
    }
  }
}

TEST(CublasLtNames, EnumTables) {
  EXPECT_EQ(lt::tile_text(CUBLASLT_MATMUL_TILE_128x256), "128x256");
  EXPECT_EQ(lt::tile_text(CUBLASLT_MATMUL_TILE_8x8), "8x8");
  EXPECT_EQ(lt::tile_text(CUBLASLT_MATMUL_TILE_UNDEFINED), "auto");
  EXPECT_EQ(lt::tile_text(60000), "tile#60000");
  EXPECT_EQ(lt::cluster_text(CUBLASLT_CLUSTER_SHAPE_2x1x1), "2x1x1");
  EXPECT_EQ(lt::cluster_text(CUBLASLT_CLUSTER_SHAPE_AUTO), "auto");
  int k = -1, count = -1;
  ASSERT_TRUE(lt::stages_dims(CUBLASLT_MATMUL_STAGES_64x4, k, count));
  EXPECT_EQ(k, 64);
  EXPECT_EQ(count, 4);
  ASSERT_TRUE(lt::stages_dims(CUBLASLT_MATMUL_STAGES_128xAUTO, k, count));
  EXPECT_EQ(k, 128);
  EXPECT_EQ(count, 0);
  EXPECT_FALSE(lt::stages_dims(29, k, count));  // a hole in the enum
}

TEST(CublasLtNames, DescribeReadsTheAlgoConfig) {
  cublasLtMatmulAlgo_t algo{};
  auto set = [&](cublasLtMatmulAlgoConfigAttributes_t attr, const auto& v) {
    return cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof v);
  };
  // Setting config fields on a blank algo is host-only bookkeeping; skip if this cuBLASLt refuses.
  if (set(CUBLASLT_ALGO_CONFIG_TILE_ID, uint32_t(CUBLASLT_MATMUL_TILE_128x256)) != CUBLAS_STATUS_SUCCESS)
    GTEST_SKIP() << "cuBLASLt does not set config fields on a blank algo";
  set(CUBLASLT_ALGO_CONFIG_STAGES_ID, uint32_t(CUBLASLT_MATMUL_STAGES_64x4));
  set(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t(1));
  set(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t(1));
  set(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t(CUBLASLT_CLUSTER_SHAPE_2x1x1));
  std::string name = lt::describe_algo(algo);
  EXPECT_NE(name.find("tile=128x256x64"), std::string::npos) << name;
  EXPECT_NE(name.find("stages=4"), std::string::npos) << name;
  EXPECT_NE(name.find("splitk=1"), std::string::npos) << name;
  EXPECT_NE(name.find("swz=1"), std::string::npos) << name;
  EXPECT_NE(name.find("cluster=2x1x1"), std::string::npos) << name;
}

// ---- the problem -> cuBLASLt mapping ----------------------------------------------------

struct LayoutDims {
  uint64_t rows, cols;
  int64_t ld;
  int32_t type;
};
LayoutDims dims(const lt::MatrixLayout& l) {
  LayoutDims d{};
  size_t w = 0;
  cublasLtMatrixLayoutGetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_ROWS, &d.rows, sizeof d.rows, &w);
  cublasLtMatrixLayoutGetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_COLS, &d.cols, sizeof d.cols, &w);
  cublasLtMatrixLayoutGetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_LD, &d.ld, sizeof d.ld, &w);
  cublasLtMatrixLayoutGetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_TYPE, &d.type, sizeof d.type, &w);
  return d;
}
template <class T>
T desc_attr(const lt::Plan& plan, cublasLtMatmulDescAttributes_t attr) {
  T v{};
  size_t w = 0;
  cublasLtMatmulDescGetAttribute(plan.desc.get(), attr, &v, sizeof v, &w);
  return v;
}
void expect_dims(const LayoutDims& d, uint64_t rows, uint64_t cols, int64_t ld) {
  EXPECT_EQ(d.rows, rows);
  EXPECT_EQ(d.cols, cols);
  EXPECT_EQ(d.ld, ld);
}

TEST(CublasLtPlan, LinearIsTnOnTransposedD) {
  // D[m, n] row-major = A[m, k] row @ W[n, k]^T: cuBLAS computes D^T[n, m] = W A^T, "TN".
  GemmProblem p = GemmProblem::linear(100, 300, 64, DType::e4m3);
  p.bias = true;
  p.act = Activation::gelu_tanh;
  p.scale = ScaleMode::rowwise;
  lt::Plan plan(p);
  EXPECT_TRUE(plan.swapped());
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_T);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_N);
  expect_dims(dims(*plan.a), 64, 300, 64);  // W stored col-major [k, n]
  expect_dims(dims(*plan.b), 64, 100, 64);  // A stored col-major [k, m]
  expect_dims(dims(*plan.d), 300, 100, 300);
  EXPECT_EQ(dims(*plan.a).type, CUDA_R_8F_E4M3);
  EXPECT_EQ(dims(*plan.d).type, CUDA_R_16BF);
  EXPECT_EQ(desc_attr<uint32_t>(plan, CUBLASLT_MATMUL_DESC_EPILOGUE), uint32_t(CUBLASLT_EPILOGUE_GELU_BIAS));
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), CUDA_R_16BF);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_A_SCALE_MODE), CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  EXPECT_EQ(desc_attr<int8_t>(plan, CUBLASLT_MATMUL_DESC_FAST_ACCUM), 0);

  // Per-call pointers: cuBLAS A is our B, so it takes B's scales and B's data.
  float sa = 0, sb = 0;
  int x = 0, y = 0;
  GemmArgs g;
  g.a = &x, g.b = &y, g.scale_a = &sa, g.scale_b = &sb, g.bias = &x;
  plan.bind(g);
  EXPECT_EQ(plan.lt_a(g), &y);
  EXPECT_EQ(plan.lt_b(g), &x);
  EXPECT_EQ(desc_attr<const void*>(plan, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER), &sb);
  EXPECT_EQ(desc_attr<const void*>(plan, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER), &sa);
  EXPECT_EQ(desc_attr<const void*>(plan, CUBLASLT_MATMUL_DESC_BIAS_POINTER), &x);
}

TEST(CublasLtPlan, ColumnMajorDIsComputedDirectly) {
  GemmProblem p = GemmProblem::linear(100, 300, 64, DType::fp32, DType::fp32);
  p.a.layout = Layout::col, p.a.ld = 128;  // A[m, k] col-major, ld >= m
  p.b.layout = Layout::row;                // B[k, n] row-major
  p.d.layout = p.c.layout = Layout::col;
  p.beta = 1.0f;
  p.c.ld = 104;
  p.tf32 = true;
  p.act = Activation::silu;  // bias-free: plain epilogue, then the silu pass
  lt::Plan plan(p);
  EXPECT_FALSE(plan.swapped());
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_N);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_T);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), CUBLAS_COMPUTE_32F_FAST_TF32);
  EXPECT_EQ(desc_attr<uint32_t>(plan, CUBLASLT_MATMUL_DESC_EPILOGUE), uint32_t(CUBLASLT_EPILOGUE_DEFAULT));
  expect_dims(dims(*plan.a), 100, 64, 128);
  expect_dims(dims(*plan.b), 300, 64, 300);  // B^T stored col-major [n, k]
  expect_dims(dims(*plan.c), 100, 300, 104);
  expect_dims(dims(*plan.d), 100, 300, 100);
}

// ---- torch's configuration: the baseline candidate --------------------------------------

TEST(CublasLtTorch, WhichTorchCallAProblemIs) {
  EXPECT_EQ(lt::torch_path(GemmProblem::linear(64, 4096, 4096, DType::e4m3)), lt::TorchPath::scaled_gemm);
  GemmProblem fp8_bias = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  fp8_bias.bias = true;
  EXPECT_EQ(lt::torch_path(fp8_bias), lt::TorchPath::scaled_gemm);  // _scaled_mm's bias
  EXPECT_EQ(lt::torch_path(GemmProblem::linear(64, 4096, 4096)), lt::TorchPath::gemm_ex);  // torch.mm
  GemmProblem bias = GemmProblem::linear(64, 4096, 4096, DType::fp16);
  bias.bias = true;
  EXPECT_EQ(lt::torch_path(bias), lt::TorchPath::gemm_and_bias);  // addmm / F.linear with bias
  bias.act = Activation::gelu_tanh;
  EXPECT_EQ(lt::torch_path(bias), lt::TorchPath::gemm_and_bias);  // _addmm_activation
  GemmProblem m1 = bias;
  m1.m = 1;
  EXPECT_EQ(lt::torch_path(m1), lt::TorchPath::gemm_ex);  // addmm takes Lt only for dimensions > 1
  GemmProblem with_c = bias;
  with_c.beta = 1;
  EXPECT_EQ(lt::torch_path(with_c), lt::TorchPath::gemm_ex);  // a 2-D C: cublasGemmEx
  EXPECT_STREQ(lt::torch_path_text(lt::TorchPath::gemm_and_bias), "gemm_and_bias");
}

TEST(CublasLtTorch, WorkspaceSizesAsTorchReadsThem) {
  // Unset: torch's defaults.
  EXPECT_EQ(lt::torch_lt_workspace(), size_t(1) << 20);  // 1024 KiB
  EXPECT_EQ(lt::torch_cublas_workspace(9), size_t(32) << 20);   // Hopper
  EXPECT_EQ(lt::torch_cublas_workspace(10), size_t(32) << 20);  // Blackwell
  EXPECT_EQ(lt::torch_cublas_workspace(8), size_t(4096 * 1024 * 2 + 16 * 1024 * 8));
  // CUBLASLT_WORKSPACE_SIZE (KiB).
  EXPECT_EQ(lt::torch_lt_workspace("4096"), size_t(4) << 20);
  EXPECT_EQ(lt::torch_lt_workspace("1000000"), lt::kMaxWorkspace);  // capped at the backend's 32 MiB
  EXPECT_EQ(lt::torch_lt_workspace("lots"), size_t(1) << 20);       // torch warns, keeps its default
  // CUBLAS_WORKSPACE_CONFIG.
  EXPECT_EQ(lt::torch_cublas_workspace(9, ":4096:2:16:8"), size_t(4096 * 1024 * 2 + 16 * 1024 * 8));
  EXPECT_EQ(lt::torch_cublas_workspace(9, ":1024:1"), size_t(1) << 20);
  EXPECT_EQ(lt::torch_cublas_workspace(9, "garbage"), size_t(32) << 20);
  EXPECT_EQ(lt::torch_cublas_workspace(9, ":4096:x"), size_t(32) << 20);
}

template <class T>
T pref_attr(const lt::Preference& pref, cublasLtMatmulPreferenceAttributes_t attr) {
  T v{};
  size_t w = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref.get(), attr, &v, sizeof v, &w), CUBLAS_STATUS_SUCCESS);
  return v;
}
struct PrefValues {
  uint64_t ws;
  uint32_t a, b, c, d;
};
PrefValues read_back(const lt::Prefs& prefs) {
  lt::Preference pref(prefs);
  return {pref_attr<uint64_t>(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES),
          pref_attr<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES),
          pref_attr<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES),
          pref_attr<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES),
          pref_attr<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)};
}
void expect_prefs(const PrefValues& v, uint64_t ws, uint32_t align) {
  EXPECT_EQ(v.ws, ws);
  EXPECT_EQ(v.a, align);
  EXPECT_EQ(v.b, align);
  EXPECT_EQ(v.c, align);
  EXPECT_EQ(v.d, align);
}

TEST(CublasLtTorch, HeuristicPreferences) {
  // gemmtune's own enumeration: 32 MiB, 16 bytes, 64 results.
  lt::Prefs ours = lt::gemmtune_prefs();
  EXPECT_EQ(ours.count, lt::kHeuristicCount);
  expect_prefs(read_back(ours), lt::kMaxWorkspace, 16);

  // _scaled_mm: 1 MiB, alignments left unset (cuBLASLt's default reads back as 256), 1 result.
  GemmProblem fp8 = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  lt::Prefs t = lt::torch_prefs(fp8, 9);
  EXPECT_EQ(t.count, 1);
  EXPECT_EQ(t.align_a, 0u);
  EXPECT_EQ(t.align_d, 0u);
  expect_prefs(read_back(t), 1u << 20, 256);
  // ... and the same call for pointers aligned to 16 bytes only (the fallback).
  expect_prefs(read_back(lt::torch_prefs(fp8, 9, 16)), 1u << 20, 16);

  // addmm with bias: 1 MiB, the pointers' alignment (256 from torch's allocator), 1 result.
  GemmProblem bias = GemmProblem::linear(64, 4096, 4096);
  bias.bias = true;
  t = lt::torch_prefs(bias, 9);
  EXPECT_EQ(t.count, 1);
  expect_prefs(read_back(t), 1u << 20, 256);
  expect_prefs(read_back(lt::torch_prefs(bias, 9, 16)), 1u << 20, 16);

  // torch.mm (cublasGemmEx): the cuBLAS handle's workspace, 256 bytes, 1 result.
  t = lt::torch_prefs(GemmProblem::linear(64, 4096, 4096), 9);
  EXPECT_EQ(t.count, 1);
  expect_prefs(read_back(t), 32u << 20, 256);
  expect_prefs(read_back(lt::torch_prefs(GemmProblem::linear(64, 4096, 4096), 8)), 4096 * 1024 * 2 + 16 * 1024 * 8,
               256);
}

TEST(CublasLtTorch, PlanCarriesTorchsScaledMmAttributes) {
  // torch's scaled_gemm for D = A @ W^T (row-major, bf16 out, tensorwise): TRANSA = T, TRANSB = N
  // with W as cuBLAS's A; compute 32F, scale type 32F; FAST_ACCUM 0 (use_fast_accum=False); scale
  // modes SCALAR_32F (= 0, what an unset mode means); A scale pointer = W's scale; host pointer
  // mode (torch: unset = host); no epilogue without bias; C typed as D (bias_dtype = out dtype).
  GemmProblem p = GemmProblem::linear(64, 4096, 14336, DType::e4m3);
  lt::Plan plan(p);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_T);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_N);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE), CUBLAS_COMPUTE_32F);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_SCALE_TYPE), CUDA_R_32F);
  EXPECT_EQ(desc_attr<int8_t>(plan, CUBLASLT_MATMUL_DESC_FAST_ACCUM), 0);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_A_SCALE_MODE), CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_B_SCALE_MODE), CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_POINTER_MODE), CUBLASLT_POINTER_MODE_HOST);
  EXPECT_EQ(desc_attr<uint32_t>(plan, CUBLASLT_MATMUL_DESC_EPILOGUE), uint32_t(CUBLASLT_EPILOGUE_DEFAULT));
  EXPECT_EQ(desc_attr<int32_t>(plan, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), 0);  // torch: only with an SM carveout
  expect_dims(dims(*plan.a), 14336, 4096, 14336);  // W [n, k] row-major = col-major [k, n]: torch's mat1
  expect_dims(dims(*plan.b), 14336, 64, 14336);
  expect_dims(dims(*plan.c), 4096, 64, 4096);
  EXPECT_EQ(dims(*plan.c).type, CUDA_R_16BF);
  EXPECT_EQ(dims(*plan.d).type, CUDA_R_16BF);
  float sa = 0, sb = 0;
  GemmArgs g;
  g.scale_a = &sa, g.scale_b = &sb;
  plan.bind(g);
  EXPECT_EQ(desc_attr<const void*>(plan, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER), &sb);
}

TEST(CublasLtTorch, PlaceholdersCarryTheAlignmentTheHeuristicMayAssume) {
  GemmProblem p = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  p.bias = true;
  lt::Plan ours(p), torchs(p, lt::kTorchAlignment);
  for (auto attr : {CUBLASLT_MATMUL_DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(desc_attr<const void*>(ours, attr)), 16u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(desc_attr<const void*>(torchs, attr)), 256u);
  }
  // bind() replaces them with the call's pointers.
  float sa = 0, sb = 0;
  int bias = 0;
  GemmArgs g;
  g.scale_a = &sa, g.scale_b = &sb, g.bias = &bias;
  torchs.bind(g);
  EXPECT_EQ(desc_attr<const void*>(torchs, CUBLASLT_MATMUL_DESC_BIAS_POINTER), &bias);
  EXPECT_EQ(desc_attr<const void*>(torchs, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER), &sb);
}

cublasLtMatmulAlgo_t algo_with(unsigned char first) {
  cublasLtMatmulAlgo_t algo = patterned_algo();
  std::memcpy(&algo, &first, 1);
  return algo;
}

TEST(CublasLtTorch, BaselineIdRoundTrip) {
  cublasLtMatmulAlgo_t main = algo_with(1), fallback = algo_with(2), m2, f2;
  std::string id = lt::torch_id(main, fallback);
  EXPECT_TRUE(lt::is_torch_id(id));
  EXPECT_FALSE(lt::is_torch_id(lt::algo_to_hex(main)));
  EXPECT_EQ(id.size(), 6u + 128 + 1 + 128);
  lt::parse_torch_id(id, m2, f2);
  EXPECT_TRUE(lt::same_algo(main, m2));
  EXPECT_TRUE(lt::same_algo(fallback, f2));
  EXPECT_FALSE(lt::same_algo(main, fallback));
  const std::string bads[] = {"torch-", id.substr(0, id.size() - 1), "torch-" + lt::algo_to_hex(main),
                              id.substr(0, 134) + "+" + id.substr(135), id.substr(0, 140) + "z" + id.substr(141)};
  for (const std::string& bad : bads) {
    try {
      lt::parse_torch_id(bad, m2, f2);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("'"), std::string::npos) << e.message();
    }
  }
}

TEST(CublasLtTorch, SameAlgoIsOneCandidate) {
  const cublasLtMatmulAlgo_t a = algo_with(1), b = algo_with(2), c = algo_with(3), d = algo_with(4);
  std::vector<cublasLtMatmulAlgo_t> results = {a, b, a, c};
  // No baseline: each algo once, in the heuristic's order.
  EXPECT_EQ(lt::plain_candidates(results, nullptr), (std::vector<size_t>{0, 1, 3}));
  // The baseline's algo is among the results: it is listed once, as the baseline.
  EXPECT_EQ(lt::plain_candidates(results, &b), (std::vector<size_t>{0, 3}));
  EXPECT_EQ(lt::plain_candidates(results, &a), (std::vector<size_t>{1, 3}));
  // A baseline the 16-byte enumeration does not have: every result stays.
  EXPECT_EQ(lt::plain_candidates(results, &d), (std::vector<size_t>{0, 1, 3}));
  EXPECT_TRUE(lt::plain_candidates({}, &d).empty());
}

// ---- supports() -------------------------------------------------------------------------

struct CublasLtSupports : ::testing::Test {
  static BackendContext context(int cc_major, int cc_minor) {
    BackendContext ctx;
    ctx.device.cc_major = cc_major;
    ctx.device.cc_minor = cc_minor;
    return ctx;
  }
  std::unique_ptr<Backend> hopper = make_cublaslt_backend(context(9, 0));
  std::unique_ptr<Backend> blackwell = make_cublaslt_backend(context(10, 0));

  // The verdict, after checking that p is valid (supports() is only asked about valid problems).
  static Verdict ask(Backend& b, const GemmProblem& p) {
    p.validate();
    return b.supports(p);
  }
  static void expect_no(Backend& b, const GemmProblem& p, const std::string& words) {
    Verdict v = ask(b, p);
    EXPECT_FALSE(v.ok) << p.str();
    EXPECT_NE(v.reason.find(words), std::string::npos) << p.str() << ": " << v.reason;
  }
};

// gt_kernel_describe's "torch_baseline": the backend says which of its ids is torch's call (its
// torch- ids only; without a GPU too); other backends reproduce none.
TEST_F(CublasLtSupports, ReproducesTorchOnlyForItsBaselineIds) {
  cublasLtMatmulAlgo_t main = algo_with(1), fallback = algo_with(2);
  EXPECT_TRUE(hopper->reproduces_torch(lt::torch_id(main, fallback)));
  EXPECT_FALSE(hopper->reproduces_torch(lt::algo_to_hex(main)));
  EXPECT_FALSE(hopper->reproduces_torch(""));
  std::unique_ptr<Backend> native = make_native_gemm_backend(context(9, 0));
  EXPECT_FALSE(native->reproduces_torch(lt::torch_id(main, fallback)));
}

TEST_F(CublasLtSupports, NameVersionAvailability) {
  EXPECT_EQ(hopper->name(), "cublaslt");
  EXPECT_EQ(hopper->version().rfind("cublasLt ", 0), 0u) << hopper->version();
  EXPECT_GT(hopper->version().size(), std::string("cublasLt ").size());
  std::string why;
  if (!cuda_device_present(&why)) {
    Verdict v = hopper->available();
    EXPECT_FALSE(v.ok);
    EXPECT_FALSE(v.reason.empty());
    // Without a GPU, candidates() and load() refuse with the reason, and nothing crashes.
    EXPECT_THROW(hopper->candidates(GemmProblem::linear(64, 64, 64)), Error);
    EXPECT_THROW(hopper->load(GemmProblem::linear(64, 64, 64), std::string(128, '0')), Error);
  }
}

TEST_F(CublasLtSupports, AcceptsTheCommonCases) {
  for (DType in : {DType::bf16, DType::fp16}) {
    EXPECT_TRUE(ask(*hopper, GemmProblem::linear(4096, 4096, 4096, in)).ok);
    EXPECT_TRUE(ask(*hopper, GemmProblem::linear(128, 4096, 1024, in, DType::fp32)).ok);
  }
  GemmProblem p = GemmProblem::linear(1000, 3000, 520);  // odd sizes, packed
  p.bias = true;
  for (Activation act : {Activation::none, Activation::relu, Activation::gelu_tanh, Activation::silu}) {
    p.act = act;
    EXPECT_TRUE(ask(*hopper, p).ok) << p.str() << ": " << ask(*hopper, p).reason;
  }
  // Every A/B layout with row-major D, and column-major D without bias.
  for (Layout la : {Layout::row, Layout::col})
    for (Layout lb : {Layout::row, Layout::col})
      for (Layout ld : {Layout::row, Layout::col}) {
        GemmProblem q = GemmProblem::linear(256, 512, 128);
        q.a.layout = la, q.b.layout = lb, q.d.layout = ld, q.c.layout = ld;
        q.beta = 0.5f;
        EXPECT_TRUE(ask(*hopper, q).ok) << q.str() << ": " << ask(*hopper, q).reason;
      }
  GemmProblem f32 = GemmProblem::linear(512, 512, 512, DType::fp32, DType::fp32);
  EXPECT_TRUE(ask(*hopper, f32).ok);
  f32.tf32 = true;
  EXPECT_TRUE(ask(*hopper, f32).ok);
}

TEST_F(CublasLtSupports, ColumnMajorDWithBiasIsPerColumn) {
  GemmProblem p = GemmProblem::linear(256, 256, 256);
  p.d.layout = Layout::col;
  p.bias = true;
  expect_no(*hopper, p, "per-column bias");
}

TEST_F(CublasLtSupports, CMustHaveDsLayout) {
  GemmProblem p = GemmProblem::linear(256, 256, 256);
  p.beta = 1.0f;
  p.c.layout = Layout::col;
  expect_no(*hopper, p, "C must have D's layout");
  p.beta = 0.0f;  // C not read: its layout does not matter
  EXPECT_TRUE(ask(*hopper, p).ok);
}

TEST_F(CublasLtSupports, Fp8Rules) {
  GemmProblem p = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  EXPECT_TRUE(ask(*hopper, p).ok) << ask(*hopper, p).reason;
  p.scale = ScaleMode::tensorwise;
  EXPECT_TRUE(ask(*hopper, p).ok);
  p.b.dtype = DType::e5m2;  // mixed fp8 is fine
  EXPECT_TRUE(ask(*hopper, p).ok);
  for (DType out : {DType::fp16, DType::fp32}) {
    GemmProblem q = GemmProblem::linear(256, 256, 256, DType::e4m3, out);
    EXPECT_TRUE(ask(*hopper, q).ok) << q.str() << ": " << ask(*hopper, q).reason;
  }

  GemmProblem nn = GemmProblem::linear(256, 256, 256, DType::e4m3);
  nn.b.layout = Layout::row;
  expect_no(*hopper, nn, "TN");
  GemmProblem ta = GemmProblem::linear(256, 256, 256, DType::e4m3);
  ta.a.layout = Layout::col;
  expect_no(*hopper, ta, "TN");

  GemmProblem ld = GemmProblem::linear(256, 256, 256, DType::e4m3);
  ld.a.ld = 264;  // 264 bytes between rows of A
  expect_no(*hopper, ld, "multiple of 16 bytes");

  GemmProblem bias32 = GemmProblem::linear(256, 256, 256, DType::e4m3, DType::fp32);
  bias32.bias = true;
  expect_no(*hopper, bias32, "bf16 bias");
  bias32.d.dtype = bias32.c.dtype = DType::bf16;
  EXPECT_TRUE(ask(*hopper, bias32).ok);
}

TEST_F(CublasLtSupports, RowwiseFp8ScalesOnlyOnHopper) {
  GemmProblem p = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  p.scale = ScaleMode::rowwise;
  EXPECT_TRUE(ask(*hopper, p).ok) << ask(*hopper, p).reason;
  expect_no(*blackwell, p, "only on sm_90");
  expect_no(*blackwell, p, "sm_100");
  p.scale = ScaleMode::tensorwise;
  EXPECT_TRUE(ask(*blackwell, p).ok);
}

TEST_F(CublasLtSupports, VerdictsDoNotDependOnAlphaBetaValues) {
  GemmProblem p = GemmProblem::linear(512, 512, 512);
  p.alpha = 0.25f;
  p.beta = -2.0f;
  EXPECT_TRUE(ask(*hopper, p).ok);
}

// ---- roofline ---------------------------------------------------------------------------

TEST(CeilingsRoof, RooflineBound) {
  Ceilings c{4.0, 800.0, 1600.0};
  // 8192^3 bf16: compute-bound at the bf16 rate.
  EXPECT_NEAR(roof_tflops(GemmProblem::linear(8192, 8192, 8192), c), 800.0, 1e-9);
  EXPECT_NEAR(roof_tflops(GemmProblem::linear(8192, 8192, 8192, DType::e4m3), c), 1600.0, 1e-9);
  // m = 1: memory-bound: flops / (bytes / bandwidth).
  GemmProblem gemv = GemmProblem::linear(1, 8192, 8192);
  double expect = gemv.flops() / (gemv.min_bytes() / 4.0e12) / 1e12;
  EXPECT_NEAR(roof_tflops(gemv, c), expect, 1e-9 * expect);
  EXPECT_LT(roof_tflops(gemv, c), 10.0);
  // fp32: tf32 at half the bf16 rate, plain fp32 at 1/16 of it.
  GemmProblem f32 = GemmProblem::linear(8192, 8192, 8192, DType::fp32, DType::fp32);
  EXPECT_NEAR(roof_tflops(f32, c), 50.0, 1e-9);
  f32.tf32 = true;
  EXPECT_NEAR(roof_tflops(f32, c), 400.0, 1e-9);
  EXPECT_EQ(roof_tflops(f32, Ceilings{}), 0.0);
}

}  // namespace
}  // namespace gemmtune
