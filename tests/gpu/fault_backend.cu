// Fault-injection backends (fault_backend.hpp).
#include "fault_backend.hpp"

#include <cuda_bf16.h>

#include <cstdlib>
#include <memory>

#include "backends/backend.hpp"
#include "engine/registry.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::gpu_test {
namespace {

enum class Kind : int { good, illegal_address, trap, hang, spin, oob, wrong, prepare_crash };

const char* kKindNames[] = {"good", "illegal_address", "trap", "hang", "spin", "oob", "wrong", "prepare_crash"};

Kind kind_of(const std::string& id) {
  for (int i = 0; i < int(std::size(kKindNames)); ++i)
    if (id == kKindNames[i]) return Kind(i);
  GT_THROW("fault backend: unknown candidate id '" + id + "'");
}

// D[m, n] = A[m, k] @ W[n, k]^T (row-major, packed), one thread per output, fp32 accumulation;
// `kind` adds its fault (fault_backend.hpp). Grid (ceil(n / 128), m), 128 threads.
__global__ void naive_linear(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* d, int m, int n, int k,
                             int kind) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
  const bool first = col == 0 && row == 0;
  if (first && kind == int(Kind::illegal_address)) *reinterpret_cast<volatile int*>(0x10) = 1;
  if (first && kind == int(Kind::trap)) __trap();
  if (first && kind == int(Kind::hang)) {
    // An asm volatile statement is a side effect the compiler must keep: a loop of plain
    // volatile reads of a local was removed (measured on the H200: the kernel returned).
    for (;;) asm volatile("nanosleep.u32 1000;" ::: "memory");
  }
  if (first && kind == int(Kind::spin)) {
    const long long t0 = clock64();
    while (clock64() - t0 < 40'000'000ll) {  // ~20 ms at ~2 GHz
    }
  }
  if (row >= m || col >= n) return;
  float acc = 0;
  for (int i = 0; i < k; ++i) acc += __bfloat162float(a[size_t(row) * k + i]) * __bfloat162float(w[size_t(col) * k + i]);
  if (kind == int(Kind::wrong)) acc *= 1.5f;
  d[size_t(row) * n + col] = __float2bfloat16(acc);
  if (kind == int(Kind::oob) && row == m - 1) d[size_t(m) * n + col] = __float2bfloat16(acc);  // the row after D
}

class FaultCandidate : public detail::CandidateFor<GemmOp> {
 public:
  FaultCandidate(std::string backend, Kind kind, const GemmProblem& p) : backend_(std::move(backend)), kind_(kind), p_(p) {}
  std::string backend() const override { return backend_; }
  std::string id() const override { return kKindNames[int(kind_)]; }
  std::string name() const override { return std::string("naive ") + kKindNames[int(kind_)]; }
  void prepare(std::span<const compile::Built>) override {
    if (kind_ == Kind::prepare_crash) std::abort();
  }
  void run(const GemmArgs& args, cudaStream_t stream) override {
    dim3 grid(unsigned((p_.n + 127) / 128), unsigned(p_.m));
    naive_linear<<<grid, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(args.a),
                                           static_cast<const __nv_bfloat16*>(args.b),
                                           static_cast<__nv_bfloat16*>(args.d), int(p_.m), int(p_.n), int(p_.k),
                                           int(kind_));
  }

 private:
  std::string backend_;
  Kind kind_;
  GemmProblem p_;
};

class FaultBackend : public BackendFor<GemmOp> {
 public:
  FaultBackend(std::string name, std::vector<Kind> faults) : name_(std::move(name)), faults_(std::move(faults)) {}
  std::string name() const override { return name_; }
  std::string version() const override { return "fault-injection 1"; }
  Verdict available() const override { return Verdict::yes(); }
  Verdict supports(const GemmProblem& p) const override {
    const GemmProblem plain = GemmProblem::linear(p.m, p.n, p.k);
    if (p.canonical() != plain.canonical() || p.alpha != 1.0f || p.beta != 0.0f)
      return Verdict::no("only a plain bf16 nn.Linear problem (packed, alpha 1, beta 0, no epilogue)");
    if (p.m > 65535 || p.n > (1 << 30) || p.k > (1 << 30)) return Verdict::no("too large for the naive kernel");
    return Verdict::yes();
  }
  std::vector<std::unique_ptr<Cand>> candidates(const GemmProblem& p) override {
    std::vector<std::unique_ptr<Cand>> out;
    for (Kind f : faults_) out.push_back(std::make_unique<FaultCandidate>(name_, f, p));
    out.push_back(std::make_unique<FaultCandidate>(name_, Kind::good, p));
    return out;
  }
  std::unique_ptr<Cand> load(const GemmProblem& p, const std::string& id) override {
    return std::make_unique<FaultCandidate>(name_, kind_of(id), p);
  }

 private:
  std::string name_;
  std::vector<Kind> faults_;
};

template <Kind K>
std::unique_ptr<BackendFor<GemmOp>> make_one(const BackendContext&) {
  return std::make_unique<FaultBackend>(std::string("fault_") + kKindNames[int(K)], std::vector<Kind>{K});
}

std::unique_ptr<BackendFor<GemmOp>> make_all(const BackendContext&) {
  std::vector<Kind> all;
  for (int i = 1; i < int(std::size(kKindNames)); ++i) all.push_back(Kind(i));
  return std::make_unique<FaultBackend>("fault_all", all);
}

}  // namespace

const std::vector<std::string>& fault_kinds() {
  static const std::vector<std::string> kinds(std::begin(kKindNames) + 1, std::end(kKindNames));
  return kinds;
}

void register_fault_backends() {
  register_extra_backend("fault_illegal_address", &make_one<Kind::illegal_address>);
  register_extra_backend("fault_trap", &make_one<Kind::trap>);
  register_extra_backend("fault_hang", &make_one<Kind::hang>);
  register_extra_backend("fault_spin", &make_one<Kind::spin>);
  register_extra_backend("fault_oob", &make_one<Kind::oob>);
  register_extra_backend("fault_wrong", &make_one<Kind::wrong>);
  register_extra_backend("fault_prepare_crash", &make_one<Kind::prepare_crash>);
  register_extra_backend("fault_all", &make_all);
}

}  // namespace gemmtune::gpu_test
