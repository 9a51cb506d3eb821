// gemmtune: the GEMM problem descriptor.
//
//   D[m, n] = act( alpha * sa * sb * (A[m, k] @ B[k, n]) + beta * C[m, n] + bias[n] )
//
// A is [m, k], B is [k, n], C and D are [m, n], each row- or column-major with a leading
// dimension (elements between consecutive rows of a row-major matrix, or consecutive columns
// of a column-major one; 0 means packed). A PyTorch nn.Linear weight W[n, k] (row-major) is
// B = W^T, i.e. B column-major with ld = k: that is GemmProblem::linear().
// FP8 scales sa, sb are float32 device arrays: tensorwise one value each, rowwise sa[m], sb[n],
// block (DeepSeek-V3's fine-grained scaling, applied to the partial sums of each 128-deep k block):
//   sa: one scale per 1x128 slice of A's rows, logical [m, kb] with kb = ceil(k / 128), stored
//       M-major: the scale of A[i, 128 j .. 128 j + 127] is sa[j * m + i] (torch._scaled_mm's
//       BlockWise1x128 tensor of shape [m, kb] and strides [1, m]);
//   sb: one scale per 128x128 block of B, logical [nb, kb] with nb = ceil(n / 128), stored
//       row-major with a leading dimension of round_up(kb, 4) (16 bytes): the scale of
//       B[128 j .., 128 c ..] is sb[c * round_up(kb, 4) + j] (torch's BlockWise128x128 layout of
//       W's scales); the padding entries are never read.
//   Every block past m, n or k is partial: the last k block covers k - 128 (kb - 1) columns.
// bias has D's dtype. C is read only when beta != 0, and then has D's dtype.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gemmtune {

enum class DType : uint8_t { bf16, fp16, fp32, e4m3, e5m2 };
enum class Layout : uint8_t { row, col };
enum class Activation : uint8_t { none, relu, gelu_tanh, silu };
enum class ScaleMode : uint8_t { none, tensorwise, rowwise, block };

// Block scaling: one scale per kScaleBlock elements of k (and of n, for B).
constexpr int64_t kScaleBlock = 128;

const char* to_string(DType);
const char* to_string(Layout);
const char* to_string(Activation);
const char* to_string(ScaleMode);
// Parsers throw Error naming `field` and listing the accepted spellings.
DType parse_dtype(std::string_view text, std::string_view field = "dtype");
Layout parse_layout(std::string_view text, std::string_view field = "layout");
Activation parse_activation(std::string_view text, std::string_view field = "act");
ScaleMode parse_scale_mode(std::string_view text, std::string_view field = "scale");

size_t size_of(DType);
bool is_fp8(DType);

struct MatrixDesc {
  DType dtype = DType::bf16;
  Layout layout = Layout::row;
  int64_t ld = 0;  // 0 = packed
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  MatrixDesc a{DType::bf16, Layout::row, 0};  // [m, k]
  MatrixDesc b{DType::bf16, Layout::col, 0};  // [k, n]
  MatrixDesc c{DType::bf16, Layout::row, 0};  // [m, n], read when beta != 0
  MatrixDesc d{DType::bf16, Layout::row, 0};  // [m, n]
  float alpha = 1.0f;
  float beta = 0.0f;
  bool bias = false;  // bias[n], D's dtype
  Activation act = Activation::none;
  ScaleMode scale = ScaleMode::none;  // fp8 inputs only; none means sa = sb = 1
  bool tf32 = false;                  // fp32 inputs only: allow tf32 tensor cores

  // D = A @ W^T as torch.nn.Linear computes it: A[m, k] row-major, W[n, k] row-major,
  // D[m, n] row-major; `in` for A and W, `out` for C and D (bf16 -> bf16, fp8 -> bf16).
  static GemmProblem linear(int64_t m, int64_t n, int64_t k, DType in = DType::bf16);
  static GemmProblem linear(int64_t m, int64_t n, int64_t k, DType in, DType out);

  bool uses_c() const { return beta != 0.0f; }
  // Resolved leading dimensions (0 -> packed).
  int64_t lda() const;
  int64_t ldb() const;
  int64_t ldc() const;
  int64_t ldd() const;
  // Elements a buffer for each operand must hold (ld * outer extent).
  int64_t elems_a() const;
  int64_t elems_b() const;
  int64_t elems_c() const;
  int64_t elems_d() const;
  int64_t scale_a_elems() const;  // 0, 1, m, or (block) m * kb
  int64_t scale_b_elems() const;  // 0, 1, n, or (block) nb * round_up(kb, 4)
  // Block scaling's grid: kb = ceil(k / 128) k blocks, nb = ceil(n / 128) n blocks, and the
  // leading dimension of sb (round_up(kb, 4)); see the layouts above.
  int64_t scale_k_blocks() const;
  int64_t scale_n_blocks() const;
  int64_t scale_b_ld() const;

  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Fewest bytes a kernel must move: A, B (and C, bias) read once, D written once.
  double min_bytes() const;

  // Throws Error naming the first bad field and why ("problem.lda: 100 < k = 128 ...").
  void validate() const;

  // Human-readable one-liner, e.g. "4096x4096x4096 bf16 A:row B:col D:bf16/row".
  std::string str() const;
  // Canonical text of everything that can change which kernel is best or correct
  // (shape, dtypes, layouts, leading dims, whether C is read, bias, act, scales, tf32).
  // alpha and beta's values are run-time arguments and are left out.
  std::string canonical() const;
  // 16 hex digits of a stable hash (FNV-1a 64) of canonical(): same across runs and builds.
  std::string key() const;
};

// FNV-1a 64-bit over bytes, as 16 lowercase hex digits. Stable across platforms.
std::string stable_hash(std::string_view text);

// Parses "MxNxK" (e.g. "4096x4096x4096"); throws Error naming `field`.
void parse_mnk(std::string_view text, int64_t& m, int64_t& n, int64_t& k, std::string_view field = "shape");

}  // namespace gemmtune
