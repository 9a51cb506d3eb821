// Test support: exact host decoding / encoding of every operand dtype, a float64 host GEMM
// with the full epilogue, and a host comparison with the same bounds as gemmtune::compare.
// Header-only; host code only (the CUDA runtime is used only to download operands).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "tune/verify.hpp"

namespace gemmtune::host {

// ---- formats ------------------------------------------------------------------------------

// A binary floating-point format of 1 + exp_bits + man_bits bits.
struct Format {
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // all-ones exponent is Inf (mantissa 0) / NaN; else (e4m3fn) only S.1111.111 is NaN
};
inline constexpr Format kBf16{8, 7, 127, true};
inline constexpr Format kFp16{5, 10, 15, true};
inline constexpr Format kE4m3{4, 3, 7, false};  // e4m3fn: no Inf, max 448, NaN = 0x7f / 0xff
inline constexpr Format kE5m2{5, 2, 15, true};  // max 57344

// Exact value of a bit pattern (NaN for NaN patterns, +-Inf where the format has them).
inline double decode_bits(const Format& f, uint32_t bits) {
  const uint32_t man_mask = (1u << f.man_bits) - 1, exp_mask = (1u << f.exp_bits) - 1;
  const bool neg = (bits >> (f.exp_bits + f.man_bits)) & 1u;
  const uint32_t e = (bits >> f.man_bits) & exp_mask, mant = bits & man_mask;
  double v;
  if (f.ieee_specials && e == exp_mask) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_specials && e == exp_mask && mant == man_mask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(double(mant), 1 - f.bias - f.man_bits);  // subnormal
  } else {
    v = std::ldexp(double(mant + (1u << f.man_bits)), int(e) - f.bias - f.man_bits);
  }
  return neg ? -v : v;
}

// Round to nearest even. Overflow: Inf where the format has it, unless `satfinite`, which
// (like __NV_SATFINITE) clamps to the largest finite value; e4m3 always saturates.
inline uint32_t encode_bits(const Format& f, double x, bool satfinite = false) {
  const int sign_shift = f.exp_bits + f.man_bits;
  const uint32_t exp_mask = (1u << f.exp_bits) - 1, man_mask = (1u << f.man_bits) - 1;
  if (std::isnan(x)) return f.ieee_specials ? (exp_mask << f.man_bits) | (1u << (f.man_bits - 1)) : (exp_mask << f.man_bits) | man_mask;
  const uint32_t sign = std::signbit(x) ? (1u << sign_shift) : 0u;
  const double a = std::fabs(x);
  // Largest finite pattern.
  const uint32_t max_finite = f.ieee_specials ? ((exp_mask - 1) << f.man_bits) | man_mask : (exp_mask << f.man_bits) | (man_mask - 1);
  const uint32_t overflow = (f.ieee_specials && !satfinite) ? exp_mask << f.man_bits : max_finite;
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  int e;
  std::frexp(a, &e);
  e -= 1;  // a in [2^e, 2^(e+1))
  uint64_t q;  // magnitude in units of the ulp at a's binade, rounded; carries into the exponent
  if (e < emin) {
    q = uint64_t(std::nearbyint(std::ldexp(a, f.man_bits - emin)));  // subnormal: field 0
  } else {
    const double scaled = std::ldexp(a, f.man_bits - e);  // in [2^M, 2^(M+1))
    const uint64_t r = uint64_t(std::nearbyint(scaled));  // may round up to 2^(M+1): carry
    q = (uint64_t(e - emin + 1) << f.man_bits) + (r - (uint64_t(1) << f.man_bits));
  }
  if (q > max_finite) return sign | overflow;
  return sign | uint32_t(q);
}

inline double decode_bf16(uint16_t b) { return decode_bits(kBf16, b); }
inline double decode_fp16(uint16_t b) { return decode_bits(kFp16, b); }
inline double decode_e4m3(uint8_t b) { return decode_bits(kE4m3, b); }
inline double decode_e5m2(uint8_t b) { return decode_bits(kE5m2, b); }
inline uint16_t encode_bf16(double x) { return uint16_t(encode_bits(kBf16, x)); }
inline uint16_t encode_fp16(double x) { return uint16_t(encode_bits(kFp16, x)); }
inline uint8_t encode_e4m3(double x) { return uint8_t(encode_bits(kE4m3, x, true)); }
inline uint8_t encode_e5m2(double x, bool satfinite = true) { return uint8_t(encode_bits(kE5m2, x, satfinite)); }

// Element i of a raw buffer of `dt`, exactly.
inline double load(DType dt, const void* base, int64_t i) {
  switch (dt) {
    case DType::bf16: { uint16_t v; std::memcpy(&v, static_cast<const char*>(base) + 2 * i, 2); return decode_bf16(v); }
    case DType::fp16: { uint16_t v; std::memcpy(&v, static_cast<const char*>(base) + 2 * i, 2); return decode_fp16(v); }
    case DType::fp32: { float v; std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4); return v; }
    case DType::e4m3: return decode_e4m3(static_cast<const uint8_t*>(base)[i]);
    case DType::e5m2: return decode_e5m2(static_cast<const uint8_t*>(base)[i]);
  }
  return 0;
}

// Stores x rounded to `dt` (fp32: the nearest float; fp8: saturating) as element i.
inline void store(DType dt, void* base, int64_t i, double x) {
  char* p = static_cast<char*>(base);
  switch (dt) {
    case DType::bf16: { uint16_t v = encode_bf16(x); std::memcpy(p + 2 * i, &v, 2); break; }
    case DType::fp16: { uint16_t v = encode_fp16(x); std::memcpy(p + 2 * i, &v, 2); break; }
    case DType::fp32: { float v = float(x); std::memcpy(p + 4 * i, &v, 4); break; }
    case DType::e4m3: reinterpret_cast<uint8_t*>(p)[i] = encode_e4m3(x); break;
    case DType::e5m2: reinterpret_cast<uint8_t*>(p)[i] = encode_e5m2(x); break;
  }
}

// Offset of element (r, c) of a matrix.
inline int64_t offset(Layout layout, int64_t ld, int64_t r, int64_t c) { return layout == Layout::row ? r * ld + c : c * ld + r; }

// ---- operands -----------------------------------------------------------------------------

// Host copies of one run's operands, as raw bytes (scales as floats).
struct Operands {
  std::vector<uint8_t> a, b, c, bias;  // c, bias empty when unused
  std::vector<float> sa, sb;           // empty without scales
};

inline std::vector<uint8_t> download_bytes(const void* p, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  if (bytes) GT_CUDA(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost));
  return v;
}

// Copies the operands an OperandSet (or any caller) made for `p` to the host; synchronous.
inline Operands download(const GemmProblem& p, const GemmArgs& g) {
  Operands o;
  o.a = download_bytes(g.a, size_t(p.elems_a()) * size_of(p.a.dtype));
  o.b = download_bytes(g.b, size_t(p.elems_b()) * size_of(p.b.dtype));
  if (p.uses_c()) o.c = download_bytes(g.c, size_t(p.elems_c()) * size_of(p.d.dtype));
  if (p.bias) o.bias = download_bytes(g.bias, size_t(p.n) * size_of(p.d.dtype));
  if (p.scale_a_elems()) {
    o.sa.resize(size_t(p.scale_a_elems()));
    GT_CUDA(cudaMemcpy(o.sa.data(), g.scale_a, o.sa.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  if (p.scale_b_elems()) {
    o.sb.resize(size_t(p.scale_b_elems()));
    GT_CUDA(cudaMemcpy(o.sb.data(), g.scale_b, o.sb.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  return o;
}

// D (any dtype / layout / ldd) as a packed row-major [m, n] array of exact values.
inline std::vector<double> unpack_d(const GemmProblem& p, const std::vector<uint8_t>& d) {
  std::vector<double> out(size_t(p.m * p.n));
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t c = 0; c < p.n; ++c) out[size_t(r * p.n + c)] = load(p.d.dtype, d.data(), offset(p.d.layout, p.ldd(), r, c));
  return out;
}

// Packs row-major values into a D buffer of the problem's dtype / layout / ldd (p.elems_d()
// elements; padding left as `fill` bytes).
inline std::vector<uint8_t> pack_d(const GemmProblem& p, const std::vector<double>& values, uint8_t fill = 0xff) {
  std::vector<uint8_t> d(size_t(p.elems_d()) * size_of(p.d.dtype), fill);
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t c = 0; c < p.n; ++c) store(p.d.dtype, d.data(), offset(p.d.layout, p.ldd(), r, c), values[size_t(r * p.n + c)]);
  return d;
}

// ---- float64 GEMM -------------------------------------------------------------------------

inline double activate(Activation act, double x) {
  switch (act) {
    case Activation::none: return x;
    case Activation::relu: return x > 0 ? x : 0;
    case Activation::gelu_tanh: return 0.5 * x * (1 + std::tanh(0.79788456080286535588 /* sqrt(2 / pi) */ * (x + 0.044715 * x * x * x)));
    case Activation::silu: return x / (1 + std::exp(-x));
  }
  return x;
}

// D = act(alpha * sa * sb * (A @ B) + beta * C + bias) in float64, packed row-major [m, n].
inline std::vector<double> host_gemm(const GemmProblem& p, const Operands& o) {
  const int64_t lda = p.lda(), ldb = p.ldb();
  std::vector<double> A(size_t(p.m * p.k)), B(size_t(p.k * p.n));  // decoded, packed row-major
  // Block scales (problem.hpp's layouts) multiply the decoded inputs: exact in float64 for
  // fp8 values times fp32 scales, and the same as scaling each k block's partial sums.
  const bool block = p.scale == ScaleMode::block;
  const int64_t bs = kScaleBlock, ldsb = p.scale_b_ld();
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t kk = 0; kk < p.k; ++kk)
      A[size_t(r * p.k + kk)] = load(p.a.dtype, o.a.data(), offset(p.a.layout, lda, r, kk)) *
                                (block ? double(o.sa.at(size_t((kk / bs) * p.m + r))) : 1.0);
  for (int64_t kk = 0; kk < p.k; ++kk)
    for (int64_t c = 0; c < p.n; ++c)
      B[size_t(kk * p.n + c)] = load(p.b.dtype, o.b.data(), offset(p.b.layout, ldb, kk, c)) *
                                (block ? double(o.sb.at(size_t((c / bs) * ldsb + kk / bs))) : 1.0);
  std::vector<double> D(size_t(p.m * p.n), 0.0);
  for (int64_t r = 0; r < p.m; ++r) {
    double* row = &D[size_t(r * p.n)];
    for (int64_t kk = 0; kk < p.k; ++kk) {
      const double av = A[size_t(r * p.k + kk)];
      const double* brow = &B[size_t(kk * p.n)];
      for (int64_t c = 0; c < p.n; ++c) row[c] += av * brow[c];
    }
  }
  for (int64_t r = 0; r < p.m; ++r)
    for (int64_t c = 0; c < p.n; ++c) {
      double sa = 1, sb = 1;
      if (p.scale == ScaleMode::tensorwise) sa = o.sa.at(0), sb = o.sb.at(0);
      if (p.scale == ScaleMode::rowwise) sa = o.sa.at(size_t(r)), sb = o.sb.at(size_t(c));
      double v = double(p.alpha) * sa * sb * D[size_t(r * p.n + c)];
      if (p.uses_c()) v += double(p.beta) * load(p.d.dtype, o.c.data(), offset(p.c.layout, p.ldc(), r, c));
      if (p.bias) v += load(p.d.dtype, o.bias.data(), c);
      D[size_t(r * p.n + c)] = activate(p.act, v);
    }
  return D;
}

// ---- comparison ---------------------------------------------------------------------------

// The same test as gemmtune::compare, on host arrays (both packed row-major [m, n]).
inline CheckResult host_compare(const GemmProblem& p, const std::vector<double>& d, const std::vector<double>& ref,
                                const Tolerance& tol) {
  CheckResult res;
  double ref2 = 0, err2 = 0;
  int64_t ref_finite = 0, worst_index = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;
    ++ref_finite;
    ref2 += ref[i] * ref[i];
    if (std::isfinite(d[i])) err2 += (d[i] - ref[i]) * (d[i] - ref[i]);
    else ++res.nonfinite;
  }
  const double rms = ref_finite ? std::sqrt(ref2 / double(ref_finite)) : 0.0;
  res.rel_err = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
  for (size_t i = 0; i < ref.size(); ++i) {
    double ratio;
    if (!std::isfinite(ref[i])) {
      ratio = ((std::isnan(ref[i]) && std::isnan(d[i])) || ref[i] == d[i]) ? 0.0 : INFINITY;
    } else {
      const double diff = std::fabs(d[i] - ref[i]), bound = tol.elem_rel * std::fabs(ref[i]) + tol.elem_abs * rms;
      ratio = !std::isfinite(diff) ? INFINITY : diff == 0 ? 0.0 : bound > 0 ? diff / bound : INFINITY;
    }
    if (ratio > 1) ++res.bad;
    if (ratio > res.worst_ratio) res.worst_ratio = ratio, worst_index = int64_t(i);
  }
  res.ok = res.bad == 0 && res.nonfinite == 0 && res.rel_err <= tol.rel_norm;
  if (!res.ok) {
    res.reason = std::to_string(res.bad) + " of " + std::to_string(ref.size()) + " elements over bound";
    if (worst_index >= 0)
      res.reason += " (worst " + std::to_string(res.worst_ratio) + "x at row " + std::to_string(worst_index / p.n) +
                    ", col " + std::to_string(worst_index % p.n) + ")";
    res.reason += "; " + std::to_string(res.nonfinite) + " non-finite; rel err " + std::to_string(res.rel_err) +
                  " (limit " + std::to_string(tol.rel_norm) + ")";
  }
  return res;
}

inline CheckResult host_compare(const GemmProblem& p, const std::vector<double>& d, const std::vector<double>& ref) {
  return host_compare(p, d, ref, tolerance_for(p));
}

}  // namespace gemmtune::host
