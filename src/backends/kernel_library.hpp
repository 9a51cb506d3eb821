// What the backends that run precompiled kernel libraries through a C ABI share (cutlass:
// gt_cutlass_abi.h, cutedsl: gt_cutedsl_abi.h and softmax_abi.h): filling the GEMM argument
// struct, and the checks of a freshly loaded library. Header-only.
#pragma once

#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {

// The C ABI arguments of one GEMM run of `p` on `dev` with `g`'s pointers (`g` default-made, all
// null, for can_implement). Args is GtCutlassArgs or GtCutedslArgs: structs with the same field
// names and meanings. device is 0 when `dev` is not a real device (index -1); C and ldc are
// passed only when p reads C, else C is null and ldc is ldd.
template <class Args>
Args gemm_abi_args(int abi_version, const DeviceInfo& dev, const GemmProblem& p, const GemmArgs& g) {
  Args a{};
  a.abi_version = abi_version;
  a.device = dev.index < 0 ? 0 : dev.index;
  a.sm_count = dev.sm_count;
  a.m = p.m, a.n = p.n, a.k = p.k;
  a.a = g.a, a.b = g.b, a.c = p.uses_c() ? g.c : nullptr, a.d = g.d, a.bias = g.bias;
  a.scale_a = g.scale_a, a.scale_b = g.scale_b;
  a.lda = p.lda(), a.ldb = p.ldb(), a.ldc = p.uses_c() ? p.ldc() : p.ldd(), a.ldd = p.ldd();
  a.alpha = p.alpha, a.beta = p.beta;
  return a;
}

// Checks of a loaded library; `what` names it in the error ("cutlass: artifact", "cutedsl:
// softmax artifact"), followed by the first 16 hex digits of its artifact key.
// Throws Error "<what> <key> has ABI version <got>, this build expects <want>" unless got == want.
inline void check_abi_version(std::string_view what, const std::string& key, int got, int want) {
  if (got != want)
    GT_THROW(std::string(what) + " " + key.substr(0, 16) + " has ABI version " + std::to_string(got) +
             ", this build expects " + std::to_string(want));
}

// Throws Error "<what> <key> is '<got>', expected '<want>'" unless the library's own config text
// `got` is `want` (what the caller compiled it for).
inline void check_config(std::string_view what, const std::string& key, const std::string& got,
                         const std::string& want) {
  if (got != want) GT_THROW(std::string(what) + " " + key.substr(0, 16) + " is '" + got + "', expected '" + want + "'");
}

}  // namespace gemmtune
