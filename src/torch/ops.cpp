// libgemmtune_torch_<torch major.minor>.so: a selected GEMM kernel as a PyTorch C++ op, so that
// code compiled by torch.compile launches it without running Python.
//
// Under torch.compile, gemmtune.torch.mm / linear trace, for a key with static shapes whose pick
// is not torch's own kernel, gemmtune::run_abd(a, b, bias, kernel) instead of the Python op
// gemmtune::mm / linear (python/gemmtune/torch/_ops.py, _traced_route). `kernel` is a constant of
// the graph: the index of an entry bound here at trace time by gemmtune::_bind_kernel. Inductor's
// wrapper then calls the dispatcher, which calls run_abd below: a check of the operands against
// the entry, at::empty for the output, one gt_kernel_run_abd on torch's current stream. The
// Python op costs a Python implementation behind the dispatcher on every call (key, lookup,
// output, ctypes: +7-8 us a call on the H200's host, docs/python.md).
//
// Entries live for the process: a compiled graph keeps its constant as long as it likes, so an
// entry is never freed (a handful per model; each owns its own kernel handle, loaded for it, so
// the eager path's kernel and this one never share a handle: the C API forbids running one
// kernel on two threads at once, and the dispatcher runs ops without the GIL).
//
// Operands that differ from the bound geometry (shape, strides, dtype, device) or are not
// 16-byte aligned are passed to the Python op (gemmtune::mm / linear), which plans them and
// reports what is wrong, naming the argument.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/gemmtune_c.h"

namespace {

// One tensor's bound geometry: what the kernel was selected for.
struct Geometry {
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype;

  explicit Geometry(const at::Tensor& t) : sizes(t.sizes().vec()), strides(t.strides().vec()), dtype(t.scalar_type()) {}
  bool matches(const at::Tensor& t) const {
    return t.scalar_type() == dtype && t.sizes().equals(sizes) && t.strides().equals(strides);
  }
};

struct Entry {
  gt_kernel* kernel;                     // owned, never destroyed (see above)
  std::string op;                        // "mm" or "linear": the Python op of the fallback
  std::optional<std::string> activation; // linear's
  c10::DeviceIndex device;
  Geometry a, b;
  std::optional<Geometry> bias;
  std::vector<int64_t> out;              // the output's sizes (row-major, a's dtype)
  std::mutex run;                        // one run of the kernel at a time

  Entry(gt_kernel* k, std::string o, std::optional<std::string> act, c10::DeviceIndex dev, const at::Tensor& ta,
        const at::Tensor& tb, const std::optional<at::Tensor>& tbias, std::vector<int64_t> sizes)
      : kernel(k), op(std::move(o)), activation(std::move(act)), device(dev), a(ta), b(tb),
        bias(tbias ? std::optional<Geometry>(Geometry(*tbias)) : std::nullopt), out(std::move(sizes)) {}

  // Whether the operands are the bound ones: geometry, device, 16-byte aligned data.
  bool accepts(const at::Tensor& ta, const at::Tensor& tb, const std::optional<at::Tensor>& tbias) const {
    auto on = [this](const at::Tensor& t) {
      return t.is_cuda() && t.device().index() == device && (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0;
    };
    if (!a.matches(ta) || !b.matches(tb) || !on(ta) || !on(tb)) return false;
    if (bias.has_value() != tbias.has_value()) return false;
    return !bias || (bias->matches(*tbias) && on(*tbias));
  }
};

std::mutex table_mutex;
std::vector<std::unique_ptr<Entry>> table;  // index: the op's `kernel` argument

Entry& entry(int64_t kernel) {
  std::lock_guard lock(table_mutex);
  TORCH_CHECK(kernel >= 0 && kernel < static_cast<int64_t>(table.size()), "gemmtune::run_abd: kernel: ", kernel,
              " is not a kernel bound by gemmtune::_bind_kernel (", table.size(), " bound)");
  return *table[static_cast<size_t>(kernel)];
}

// The Python op's answer for operands the entry does not accept.
at::Tensor fallback(const Entry& e, const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  if (e.op == "mm") {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("gemmtune::mm", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(a, b);
  }
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("gemmtune::linear", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            std::optional<c10::string_view>)>();
  return op.call(a, b, bias, e.activation ? std::optional<c10::string_view>(*e.activation) : std::nullopt);
}

// D = a @ b (mm) or x @ weight^T + bias with the epilogue (linear), by the bound kernel.
at::Tensor run_abd(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias, int64_t kernel) {
  Entry& e = entry(kernel);
  if (!e.accepts(a, b, bias)) return fallback(e, a, b, bias);
  at::Tensor d = at::empty(e.out, a.options());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(e.device).stream();
  int status;
  {
    std::lock_guard lock(e.run);
    status = gt_kernel_run_abd(e.kernel, a.data_ptr(), b.data_ptr(), d.data_ptr(), bias ? bias->data_ptr() : nullptr,
                               stream);
  }
  TORCH_CHECK(status == GT_OK, "gemmtune::run_abd: ", gt_last_error());
  return d;
}

// Binds a kernel handle (a gt_kernel*, whose ownership passes here) selected for operands of
// the given geometry (a, b, bias: tensors of any device, meta ones included, with the bound
// sizes, strides and dtypes) on CUDA device `device`; returns run_abd's `kernel` argument.
int64_t bind_kernel(int64_t handle, std::string op, std::optional<std::string> activation, int64_t device,
                    const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                    std::vector<int64_t> out) {
  TORCH_CHECK(handle != 0, "gemmtune::_bind_kernel: handle: null");
  TORCH_CHECK(op == "mm" || op == "linear", "gemmtune::_bind_kernel: op: '", op, "' is not mm or linear");
  TORCH_CHECK(device >= 0 && device <= std::numeric_limits<c10::DeviceIndex>::max(),
              "gemmtune::_bind_kernel: device: ", device, " is not a CUDA device index");
  for (int64_t s : out) TORCH_CHECK(s >= 0, "gemmtune::_bind_kernel: out: negative size ", s);
  auto e = std::make_unique<Entry>(reinterpret_cast<gt_kernel*>(static_cast<uintptr_t>(handle)), std::move(op),
                                   std::move(activation), static_cast<c10::DeviceIndex>(device), a, b, bias,
                                   std::move(out));
  std::lock_guard lock(table_mutex);
  table.push_back(std::move(e));
  return static_cast<int64_t>(table.size() - 1);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(gemmtune, m) {
  m.def("_bind_kernel(int handle, str op, str? activation, int device, Tensor a, Tensor b, Tensor? bias, "
        "int[] out) -> int",
        &bind_kernel);
  m.def("run_abd(Tensor a, Tensor b, Tensor? bias, int kernel) -> Tensor");
}

TORCH_LIBRARY_IMPL(gemmtune, CUDA, m) { m.impl("run_abd", &run_abd); }
