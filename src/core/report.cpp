// TuneReport helpers and Kernel.
#include "backends/backend.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/report.hpp"

namespace gemmtune {

const char* to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::ok: return "ok";
    case CandidateStatus::wrong: return "wrong";
    case CandidateStatus::failed: return "failed";
    case CandidateStatus::pruned: return "pruned";
  }
  return "?";
}

const CandidateResult* TuneReport::winner() const {
  for (auto& r : results)
    if (r.winner) return &r;
  return nullptr;
}

const CandidateResult* TuneReport::default_pick() const {
  for (auto& r : results)
    if (r.is_default) return &r;
  return nullptr;
}

Kernel::Kernel(GemmProblem problem, std::shared_ptr<detail::Candidate> impl)
    : problem_(std::move(problem)), impl_(std::move(impl)) {}

std::string Kernel::backend() const { return impl_ ? impl_->backend() : ""; }
std::string Kernel::name() const { return impl_ ? impl_->name() : ""; }
std::string Kernel::id() const { return impl_ ? impl_->id() : ""; }

void Kernel::run(const GemmArgs& args, cudaStream_t stream) const {
  GT_CHECK(impl_, "Kernel::run: empty kernel (default-constructed)");
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  auto need = [&](const void* p, const char* field) {
    GT_CHECK(p, std::string("args.") + field + ": null, but the problem needs it");
    GT_CHECK(aligned(p), std::string("args.") + field + ": must be 16-byte aligned");
  };
  need(args.a, "a");
  need(args.b, "b");
  need(args.d, "d");
  if (problem_.uses_c()) need(args.c, "c (beta != 0)");
  if (problem_.bias) need(args.bias, "bias");
  if (problem_.scale != ScaleMode::none) {
    GT_CHECK(args.scale_a, "args.scale_a: null, but the problem has fp8 scales");
    GT_CHECK(args.scale_b, "args.scale_b: null, but the problem has fp8 scales");
  }
  impl_->run(args, stream);
}

}  // namespace gemmtune
