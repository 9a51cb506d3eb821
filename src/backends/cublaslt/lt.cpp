// cuBLASLt plumbing: RAII owners, problem -> matmul mapping, algo ids and names, static rules.
#include "backends/cublaslt/lt.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>

namespace gemmtune::lt {

std::string status_text(cublasStatus_t st) {
  const char* name = cublasLtGetStatusName(st);
  const char* text = cublasLtGetStatusString(st);
  return std::string("cuBLASLt error ") + (name ? name : "?") + " (" + (text ? text : "?") + ")";
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp16: return CUDA_R_16F;
    case DType::fp32: return CUDA_R_32F;
    case DType::e4m3: return CUDA_R_8F_E4M3;
    case DType::e5m2: return CUDA_R_8F_E5M2;
  }
  GT_THROW("cublaslt: unknown dtype");
}

// ---- RAII owners ---------------------------------------------------------------------------

Handle::Handle() { GT_CUBLAS(cublasLtCreate(&h_)); }
Handle::~Handle() {
  if (h_) cublasLtDestroy(h_);
}

MatmulDesc::MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
  GT_CUBLAS(cublasLtMatmulDescCreate(&d_, compute, scale));
}
MatmulDesc::~MatmulDesc() {
  if (d_) cublasLtMatmulDescDestroy(d_);
}

MatrixLayout::MatrixLayout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  GT_CUBLAS(cublasLtMatrixLayoutCreate(&l_, type, rows, cols, ld));
}
MatrixLayout::~MatrixLayout() {
  if (l_) cublasLtMatrixLayoutDestroy(l_);
}

Preference::Preference(const Prefs& prefs) {
  GT_CUBLAS(cublasLtMatmulPreferenceCreate(&p_));
  auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& v) {
    GT_CUBLAS(cublasLtMatmulPreferenceSetAttribute(p_, attr, &v, sizeof(v)));
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(prefs.max_workspace));
  auto align = [&](cublasLtMatmulPreferenceAttributes_t attr, uint32_t bytes) {
    if (bytes) set(attr, bytes);  // 0: left at cuBLASLt's default (256)
  };
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, prefs.align_a);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, prefs.align_b);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, prefs.align_c);
  align(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, prefs.align_d);
}
Preference::~Preference() {
  if (p_) cublasLtMatmulPreferenceDestroy(p_);
}

// ---- torch's configuration -----------------------------------------------------------------

TorchPath torch_path(const GemmProblem& p) {
  if (is_fp8(p.a.dtype)) return TorchPath::scaled_gemm;
  // addmm's Lt condition (aten/src/ATen/native/cuda/Blas.cpp): a 1-D bias, every dimension > 1.
  if (p.bias && !p.uses_c() && p.m > 1 && p.n > 1 && p.k > 1) return TorchPath::gemm_and_bias;
  return TorchPath::gemm_ex;
}

const char* torch_path_text(TorchPath path) {
  switch (path) {
    case TorchPath::scaled_gemm: return "scaled_gemm";
    case TorchPath::gemm_and_bias: return "gemm_and_bias";
    case TorchPath::gemm_ex: return "gemm_ex";
  }
  return "?";
}

namespace {
// A whole decimal number, or -1 (what torch's std::stoi accepts, less its leniency).
long long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(s);
}
}  // namespace

size_t torch_lt_workspace(const char* cublaslt_workspace_size) {
  size_t kib = 1024;  // torch's default, "according to #73328"
  if (cublaslt_workspace_size) {
    long long n = parse_count(cublaslt_workspace_size);
    if (n >= 0) kib = size_t(n);
  }
  return std::min(kib * 1024, kMaxWorkspace);
}

size_t torch_cublas_workspace(int cc_major, const char* cublas_workspace_config) {
  size_t bytes = cc_major >= 9 && cc_major <= 12 ? size_t(4096) * 8 * 1024 : size_t(4096) * 1024 * 2 + 16 * 1024 * 8;
  if (cublas_workspace_config) {
    // ":4096:8" or ":4096:2:16:8": pairs of KiB and count; unparsable: torch warns, keeps the default.
    std::string cfg(cublas_workspace_config);
    size_t total = 0;
    bool any = false, bad = false;
    size_t pos = 0;
    while (pos < cfg.size() && !bad) {
      size_t mid = cfg[pos] == ':' ? cfg.find(':', pos + 1) : std::string::npos;
      if (mid == std::string::npos) {
        bad = true;
        break;
      }
      size_t end = cfg.find(':', mid + 1);
      long long kib = parse_count(cfg.substr(pos + 1, mid - pos - 1));
      long long count = parse_count(cfg.substr(mid + 1, end == std::string::npos ? std::string::npos : end - mid - 1));
      if (kib < 0 || count < 0) {
        bad = true;
        break;
      }
      total += size_t(kib) * 1024 * size_t(count);
      any = true;
      pos = end == std::string::npos ? cfg.size() : end;
    }
    if (any && !bad) bytes = total;
  }
  return std::min(bytes, kMaxWorkspace);
}

Prefs gemmtune_prefs() { return Prefs{}; }

Prefs torch_prefs(const GemmProblem& p, int cc_major, uint32_t align) {
  Prefs out;
  out.count = kTorchHeuristicCount;
  switch (torch_path(p)) {
    case TorchPath::scaled_gemm:
      out.max_workspace = torch_lt_workspace();
      // torch sets no alignment preference here: cuBLASLt assumes 256 bytes. For pointers
      // aligned to less, ask for what they have (torch itself would not: docs/cublaslt.md).
      out.align_a = out.align_b = out.align_c = out.align_d = align == kTorchAlignment ? 0 : align;
      break;
    case TorchPath::gemm_and_bias:
      out.max_workspace = torch_lt_workspace();
      out.align_a = out.align_b = out.align_c = out.align_d = align;  // D's: the bias pointer's, in torch
      break;
    case TorchPath::gemm_ex:
      out.max_workspace = torch_cublas_workspace(cc_major);
      out.align_a = out.align_b = out.align_c = out.align_d = align;
      break;
  }
  return out;
}

// ---- one problem as a cuBLASLt matmul ------------------------------------------------------

namespace {

// Stand-in for per-call device pointers until bind(): aligned to `align` bytes and no more
// (16 by default, so that the heuristic assumes exactly the alignment run() guarantees; 256 for
// the torch-style query, as torch's tensors are). Never dereferenced.
const void* placeholder(uint32_t align) { return reinterpret_cast<const void*>(uintptr_t(align)); }

// Our matrix X, logically [r, c] in `layout` with leading dim ld, as a cuBLAS operand that must
// present X (want_t false) or X^T (want_t true). Storage read column-major is X^T when X is
// row-major; the op transposes when storage and wish differ.
struct Operand {
  uint64_t rows, cols;
  int64_t ld;
  cublasOperation_t op;
};
Operand operand(Layout layout, int64_t r, int64_t c, int64_t ld, bool want_t) {
  bool stored_t = layout == Layout::row;
  return {uint64_t(stored_t ? c : r), uint64_t(stored_t ? r : c), ld, stored_t == want_t ? CUBLAS_OP_N : CUBLAS_OP_T};
}

std::unique_ptr<MatrixLayout> make_layout(DType t, const Operand& o) {
  return std::make_unique<MatrixLayout>(cuda_type(t), o.rows, o.cols, o.ld);
}

}  // namespace

cublasComputeType_t compute_type(const GemmProblem& p) {
  return p.a.dtype == DType::fp32 && p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasLtEpilogue_t epilogue(const GemmProblem& p) {
  switch (p.act) {
    case Activation::relu: return p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::gelu_tanh: return p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case Activation::none:
    case Activation::silu: break;  // silu: a native pass over D follows the matmul
  }
  return p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

Plan::Plan(const GemmProblem& p, uint32_t placeholder_align)
    : desc(compute_type(p), CUDA_R_32F),
      swap_(p.d.layout == Layout::row),
      bias_(p.bias),
      scale_(p.scale),
      bound_bias_(placeholder(placeholder_align)),
      bound_sa_(bound_bias_),
      bound_sb_(bound_bias_) {
  Operand oa = swap_ ? operand(p.b.layout, p.k, p.n, p.ldb(), true) : operand(p.a.layout, p.m, p.k, p.lda(), false);
  Operand ob = swap_ ? operand(p.a.layout, p.m, p.k, p.lda(), true) : operand(p.b.layout, p.k, p.n, p.ldb(), false);
  Operand od = operand(p.d.layout, p.m, p.n, p.ldd(), swap_);  // op is always N: storage order
  a = make_layout(swap_ ? p.b.dtype : p.a.dtype, oa);
  b = make_layout(swap_ ? p.a.dtype : p.b.dtype, ob);
  d = make_layout(p.d.dtype, od);
  // Without C (beta = 0) run() passes D as C: same layout.
  c = p.uses_c() ? make_layout(p.c.dtype, operand(p.c.layout, p.m, p.n, p.ldc(), swap_)) : make_layout(p.d.dtype, od);
  configure(p, oa.op, ob.op);
}

void Plan::configure(const GemmProblem& p, cublasOperation_t op_a, cublasOperation_t op_b) {
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(op_a));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(op_b));
  desc.set(CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_HOST));  // alpha, beta on host
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(epilogue(p)));
  if (p.bias) {
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(cuda_type(p.d.dtype)));
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bound_bias_);
  }
  if (is_fp8(p.a.dtype)) desc.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(0));  // torch._scaled_mm's default
  if (p.scale == ScaleMode::none) return;  // no scale pointers: scales are 1
  if (p.scale == ScaleMode::rowwise) {
    // One fp32 per row of cuBLAS's A (its M) and per column of cuBLAS's B (its N).
    int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode);
    desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode);
  }
  if (p.scale == ScaleMode::block) {
    // Our A's scales are one fp32 per 128 of k (VEC128_32F), our B's one per 128x128 block
    // (BLK128x128_32F); the layouts of problem.hpp are torch._scaled_mm's, which hands them to
    // cuBLASLt as they are. swap_: cuBLAS's A is our B.
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, swap_ ? blk : vec);
    desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, swap_ ? vec : blk);
  }
  desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, bound_sa_);
  desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, bound_sb_);
}

void Plan::bind(const GemmArgs& g) {
  if (bias_ && g.bias != bound_bias_) {
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    bound_bias_ = g.bias;
  }
  if (scale_ == ScaleMode::none) return;
  // cuBLAS A is our B when swapped: its scale (tensorwise, or [n] rowwise) is ours for B.
  const void* sa = swap_ ? g.scale_b : g.scale_a;
  const void* sb = swap_ ? g.scale_a : g.scale_b;
  if (sa != bound_sa_) {
    desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sa);
    bound_sa_ = sa;
  }
  if (sb != bound_sb_) {
    desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sb);
    bound_sb_ = sb;
  }
}

// ---- algo ids and names --------------------------------------------------------------------

std::string algo_to_hex(const cublasLtMatmulAlgo_t& algo) {
  static const char digits[] = "0123456789abcdef";
  unsigned char bytes[sizeof algo];
  std::memcpy(bytes, &algo, sizeof algo);
  std::string out;
  out.reserve(2 * sizeof algo);
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

namespace {
int hex_value(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}
}  // namespace

cublasLtMatmulAlgo_t algo_from_hex(std::string_view id) {
  cublasLtMatmulAlgo_t algo;
  unsigned char bytes[sizeof algo];
  auto bad = [&](const std::string& why) {
    GT_THROW("cublaslt: candidate id '" + std::string(id) + "' is not usable: " + why);
  };
  if (id.size() != 2 * sizeof algo)
    bad("expected " + std::to_string(2 * sizeof algo) + " hex digits, got " + std::to_string(id.size()) +
        " characters");
  for (size_t i = 0; i < sizeof algo; ++i) {
    int hi = hex_value(id[2 * i]), lo = hex_value(id[2 * i + 1]);
    if (hi < 0 || lo < 0) bad("character " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1) + " is not a hex digit");
    bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  std::memcpy(&algo, bytes, sizeof algo);
  return algo;
}

std::string torch_id(const cublasLtMatmulAlgo_t& main, const cublasLtMatmulAlgo_t& fallback) {
  return std::string(kTorchIdPrefix) + algo_to_hex(main) + "-" + algo_to_hex(fallback);
}

bool is_torch_id(std::string_view id) { return id.substr(0, kTorchIdPrefix.size()) == kTorchIdPrefix; }

void parse_torch_id(std::string_view id, cublasLtMatmulAlgo_t& main, cublasLtMatmulAlgo_t& fallback) {
  constexpr size_t hex = 2 * sizeof(cublasLtMatmulAlgo_t);
  const size_t p = kTorchIdPrefix.size();
  if (!is_torch_id(id) || id.size() != p + hex + 1 + hex || id[p + hex] != '-')
    GT_THROW("cublaslt: candidate id '" + std::string(id) + "' is not usable: expected torch-<" + std::to_string(hex) +
             " hex digits>-<" + std::to_string(hex) + " hex digits>");
  main = algo_from_hex(id.substr(p, hex));
  fallback = algo_from_hex(id.substr(p + hex + 1));
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(&x, &y, sizeof x) == 0;
}

std::vector<size_t> plain_candidates(const std::vector<cublasLtMatmulAlgo_t>& results,
                                     const cublasLtMatmulAlgo_t* baseline) {
  std::vector<size_t> keep;
  for (size_t i = 0; i < results.size(); ++i) {
    bool dup = baseline && same_algo(results[i], *baseline);
    for (size_t j : keep) dup = dup || same_algo(results[j], results[i]);
    if (!dup) keep.push_back(i);
  }
  return keep;
}

namespace {
template <class T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

const char* reduction_text(uint32_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output";
  }
  return "?";
}
}  // namespace

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  auto id = config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
  auto tile = config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  auto stages = config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  auto splitk = config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  auto red = config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  auto swz = config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  auto custom = config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  auto cluster = config<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);

  // Tile MxN comes from the tile id, its K from the stages id ("64x4": K = 64, 4 stages).
  std::ostringstream o;
  int sk = 0, count = 0;
  bool known_stages = stages_dims(stages, sk, count);
  std::string tile_dims = tile_text(tile);
  o << "algo=" << id << " tile=" << tile_dims;
  if (known_stages && sk > 0 && tile_dims.find_first_not_of("0123456789x") == std::string::npos) o << "x" << sk;
  o << " stages=";
  if (!known_stages) o << "#" << stages;
  else if (sk == 0) o << "default";  // UNDEFINED: the kernel's own choice
  else if (count == 0) o << "auto";
  else o << count;
  o << " splitk=" << (splitk > 0 ? splitk : 1);
  if (splitk > 1) o << " red=" << reduction_text(red);
  o << " swz=" << swz << " custom=" << custom << " cluster=" << cluster_text(cluster);
  return o.str();
}

// ---- rules ---------------------------------------------------------------------------------

namespace {

// FP8 rules (cublasLtMatmul docs): "TN" only, 16-byte-aligned leading dimensions, fp32 compute.
Verdict fp8_verdict(const GemmProblem& p, const DeviceInfo& dev) {
  if (p.a.layout != Layout::row || p.b.layout != Layout::col)
    return Verdict::no(
        "FP8 needs A row-major and B column-major (cuBLASLt's FP8 kernels on Hopper take only the TN layout)");
  auto aligned = [](int64_t ld, DType t) { return (ld * int64_t(size_of(t))) % 16 == 0; };
  if (!aligned(p.lda(), p.a.dtype) || !aligned(p.ldb(), p.b.dtype) || !aligned(p.ldd(), p.d.dtype) ||
      (p.uses_c() && !aligned(p.ldc(), p.c.dtype)))
    return Verdict::no("FP8 needs every leading dimension to be a multiple of 16 bytes");
  // The FP8 type table makes the bias bf16 when D is fp32; ours has D's dtype.
  if (p.bias && p.d.dtype == DType::fp32)
    return Verdict::no("cuBLASLt's FP8 kernels with fp32 output take a bf16 bias, not an fp32 one");
  // Rowwise = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F (cuBLAS >= 12.9), which exists for
  // sm_90 ONLY, not for sm_100+: NVIDIA's cuBLAS team: OUTER_VEC_32F, VEC128_32F and
  // BLK128x128_32F "are currently only supported on SM90" (NVIDIA/CUDALibrarySamples#270, with
  // the scaling-mode table of the cuBLAS docs); PyTorch runs rowwise _scaled_mm through it on
  // H100 (pytorch#157905, kernel "nvjet_..._ovscale_TNT") and turned it off for sm_100/110/120
  // where cuBLASLt says NOT_SUPPORTED (pytorch#160693, #161236).
  if (p.scale == ScaleMode::rowwise && dev.cc_major != 9)
    return Verdict::no("rowwise FP8 scales (cuBLASLt's OUTER_VEC_32F mode) are supported only on sm_90; this device is "
                       "sm_" + std::to_string(dev.cc_major) + std::to_string(dev.cc_minor));
  // Block scales = VEC128_32F for A and BLK128x128_32F for B (cuBLAS >= 12.9, sm_90 only, as
  // above). Used only in torch._scaled_mm's configuration (row-major D: cuBLAS computes D^T)
  // and for whole k blocks: the configurations gemmtune verified on the H200.
  if (p.scale == ScaleMode::block) {
    if (dev.cc_major != 9)
      return Verdict::no("block FP8 scales (cuBLASLt's VEC128_32F / BLK128x128_32F modes) are supported only on "
                         "sm_90; this device is sm_" + std::to_string(dev.cc_major) + std::to_string(dev.cc_minor));
    if (p.k % kScaleBlock != 0)
      return Verdict::no("block FP8 scales are used with k a multiple of 128 only (k = " + std::to_string(p.k) + ")");
    if (p.d.layout != Layout::row)
      return Verdict::no("block FP8 scales are used with a row-major D only (torch._scaled_mm's configuration)");
  }
  return Verdict::yes();
}

}  // namespace

Verdict static_verdict(const GemmProblem& p, const DeviceInfo& dev) {
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX)
    return Verdict::no("cuBLASLt takes m, n, k up to 2^31-1");
  if (is_fp8(p.d.dtype)) return Verdict::no("FP8 output is not offered by this backend");
  if (p.d.layout == Layout::col && p.bias)
    return Verdict::no(
        "bias over n with a column-major D is a per-column bias; cuBLASLt's BIAS epilogues add one value per row of D");
  if (p.uses_c() && p.c.layout != p.d.layout)
    return Verdict::no("C must have D's layout (cuBLASLt reads C in D's order)");
  return is_fp8(p.a.dtype) ? fp8_verdict(p, dev) : Verdict::yes();
}

}  // namespace gemmtune::lt
