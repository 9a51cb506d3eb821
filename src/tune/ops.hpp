// Op traits: what the tune path (src/engine/tune_path.hpp) and GpuBench need of each op, beside
// the public tag (GemmOp in gemmtune/kernel.hpp, SoftmaxOp in gemmtune/softmax.hpp).
//
//   Operands          random inputs + poisoned outputs on the device: (problem, seed, stream
//                     [, specials]), args(), poison_outputs(s), input_bytes(), output_bytes()
//   timing_splits(p)  how many workloads GpuBench times each candidate on (a candidate's time is
//                     the mean of its medians on them): 1, or for grouped GEMMs 2 (two splits)
//   timing_operands(p, w, seed, s)  one operand set of workload w < timing_splits(p)
//   Checker           built from (problem, operands, stream): computes the GPU reference once;
//                     check(stream) compares the operands' current output with it
//   memo_suffix(p)    run-time arguments a loaded candidate bakes in (alpha/beta, scale): they
//                     do not key the cache but do key the engine's in-process memo
//   set_problem(r, p) puts p into a TuneReport (op name and the matching problem field)
//   guard_violation(ops, s)  "" unless the last run wrote past its outputs (GEMM: a guard
//                     after D; softmax: the checker already requires y's padding untouched)
//
// A new op adds its tag, a specialization here, and instantiations in gpu_bench.cpp and
// engine.cpp; the tune path itself is not copied.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/cuda.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/softmax.hpp"
#include "tune/grouped_check.hpp"
#include "tune/operands.hpp"
#include "tune/softmax_check.hpp"
#include "tune/verify.hpp"

namespace gemmtune {

template <class Op>
struct OpTraits;

template <>
struct OpTraits<GemmOp> {
  using Operands = OperandSet;
  static Operands verify_operands(const GemmProblem& p, uint64_t seed, cudaStream_t s) { return Operands(p, seed, s); }
  static size_t timing_splits(const GemmProblem&) { return 1; }
  static std::unique_ptr<Operands> timing_operands(const GemmProblem& p, size_t, uint64_t seed, cudaStream_t s) {
    return std::make_unique<Operands>(p, seed, s);
  }

  class Checker {
   public:
    Checker(const GemmProblem& p, const OperandSet& ops, cudaStream_t s)
        : p_(p), ops_(ops), ref_(size_t(p.m) * size_t(p.n) * sizeof(float)) {
      reference_gemm(p, ops.args(), ref_.as<float>(), s);
    }
    CheckResult check(cudaStream_t s) const { return compare(p_, ops_.args().d, ref_.as<float>(), s); }

   private:
    GemmProblem p_;
    const OperandSet& ops_;
    DeviceBuffer ref_;
  };

  static std::string memo_suffix(const GemmProblem& p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/%a/%a", double(p.alpha), double(p.beta));
    return buf;
  }
  static void set_problem(TuneReport& r, const GemmProblem& p) { r.op = GemmOp::name, r.problem = p; }
  // "" when the candidate wrote nothing beyond D (a guard after it), else what it wrote.
  static std::string guard_violation(const Operands& ops, cudaStream_t s) { return ops.guard_violation(s); }
};

template <>
struct OpTraits<SoftmaxOp> {
  using Operands = SoftmaxOperands;
  // Verification inputs carry torch's special rows (NaN, +Inf, all -Inf, partial -Inf).
  static Operands verify_operands(const SoftmaxProblem& p, uint64_t seed, cudaStream_t s) {
    return Operands(p, seed, s, /*specials=*/true);
  }
  static size_t timing_splits(const SoftmaxProblem&) { return 1; }
  static std::unique_ptr<Operands> timing_operands(const SoftmaxProblem& p, size_t, uint64_t seed, cudaStream_t s) {
    return std::make_unique<Operands>(p, seed, s);
  }

  class Checker {
   public:
    Checker(const SoftmaxProblem& p, const SoftmaxOperands& ops, cudaStream_t s)
        : p_(p), ops_(ops), ref_(size_t(p.rows) * size_t(p.cols) * sizeof(float)), max_(size_t(p.rows) * sizeof(double)) {
      reference_softmax(p, ops.args().x, ref_.as<float>(), max_.as<double>(), s);
    }
    CheckResult check(cudaStream_t s) const {
      return compare_softmax(p_, ops_.args().x, ops_.args().y, ref_.as<float>(), max_.as<double>(), s);
    }

   private:
    SoftmaxProblem p_;
    const SoftmaxOperands& ops_;
    DeviceBuffer ref_, max_;
  };

  static std::string memo_suffix(const SoftmaxProblem& p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "/%a", double(p.scale));
    return buf;
  }
  static void set_problem(TuneReport& r, const SoftmaxProblem& p) { r.op = SoftmaxOp::name, r.softmax = p; }
  static std::string guard_violation(const Operands&, cudaStream_t) { return {}; }
};

template <>
struct OpTraits<GroupedOp> {
  // Timing (GpuBench) uses a balanced split and, when p.skew > 0, a Zipf(p.skew) split too (a
  // candidate's time: the mean of the two); verification a ragged split with an empty group, so
  // that each candidate is checked where tiles end mid-group (tune/grouped_check.hpp).
  using Operands = GroupedOperands;
  static Operands verify_operands(const GroupedGemmProblem& p, uint64_t seed, cudaStream_t s) {
    return Operands(p, seed, s, GroupedSplit::ragged);
  }
  static size_t timing_splits(const GroupedGemmProblem& p) { return p.skew > 0 ? 2 : 1; }
  static std::unique_ptr<Operands> timing_operands(const GroupedGemmProblem& p, size_t w, uint64_t seed,
                                                   cudaStream_t s) {
    return std::make_unique<Operands>(p, seed, s, w == 0 ? GroupedSplit::balanced : GroupedSplit::skewed);
  }
  using Checker = GroupedChecker;

  static std::string memo_suffix(const GroupedGemmProblem& p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "/%a", double(p.alpha));
    return buf;
  }
  static void set_problem(TuneReport& r, const GroupedGemmProblem& p) { r.op = GroupedOp::name, r.grouped = p; }
  // The checker requires every row no group owns to be untouched.
  static std::string guard_violation(const Operands&, cudaStream_t) { return {}; }
};

}  // namespace gemmtune
