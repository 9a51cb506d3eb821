// `gemmtune run --a A.npy --b B.npy --out D.npy`: one GEMM on real data with the selected kernel.
//
// Operands are converted on the host to the compute dtype and keep their file's storage order
// (C order = row-major, Fortran order = col-major), so the problem tuned is the one the files
// describe. C and D are row-major [m, n]; D is written as float32 (float16 when D is fp16).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"
#include "npy.hpp"

namespace gemmtune::cli {
namespace fs = std::filesystem;

namespace {

std::string dim_name(int i, const char* names) { return std::string(1, names[i]); }

// A 2-D array, or an Error naming the file and what it should hold.
const npy::Array& expect_2d(const npy::Array& a, const std::string& file, const char* what) {
  if (a.shape.size() != 2)
    GT_THROW(file + ": expected a 2-D array " + what + ", got shape " + a.shape_str());
  return a;
}

void expect_dim(const npy::Array& a, const std::string& file, const char* what, int dim, const char* dim_names,
                int64_t want, const std::string& because) {
  if (a.shape[size_t(dim)] != want)
    GT_THROW(file + ": dimension " + std::to_string(dim) + " (" + dim_name(dim, dim_names) + ") of " + what +
             " is " + std::to_string(a.shape[size_t(dim)]) + ", but " + because);
}

// A vector of `want` elements: shape (want,), or (1, want) / (want, 1), or a scalar when want == 1.
void expect_vector(const npy::Array& a, const std::string& file, const char* what, int64_t want,
                   const std::string& because) {
  const bool ok = a.size() == want && (a.shape.size() <= 1 || (a.shape.size() == 2 && (a.shape[0] == 1 || a.shape[1] == 1)));
  if (!ok)
    GT_THROW(file + ": " + what + " must hold " + std::to_string(want) + " element(s) (" + because + "), got shape " +
             a.shape_str());
}

DeviceBuffer upload(const std::vector<unsigned char>& bytes) {
  DeviceBuffer buf(bytes.size());
  if (!bytes.empty()) GT_CUDA(cudaMemcpy(buf.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return buf;
}

std::vector<unsigned char> float_bytes(const std::vector<float>& v) {
  std::vector<unsigned char> out(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

int cmd_run(const RunArgs& args) {
  DType in{}, out{};
  Activation act{};
  try {
    in = parse_dtype(args.dtype, "dtype");
    out = args.out_dtype.empty() ? (is_fp8(in) ? DType::bf16 : in) : parse_dtype(args.out_dtype, "out-dtype");
    act = parse_act_flag(args.act);
    if (args.scale_a.empty() != args.scale_b.empty()) GT_THROW("--scale-a and --scale-b: give both or neither");
    if (!args.scale_a.empty() && !is_fp8(in))
      GT_THROW("--scale-a/--scale-b: scales apply to fp8 inputs (--dtype e4m3|e5m2) only");
    if (args.beta != 0 && args.c.empty()) GT_THROW("--c: required when --beta is not 0");
    float_scalar(args.alpha, "alpha");
    float_scalar(args.beta, "beta");
    // --out is checked before anything is read or tuned: a bad path fails at once.
    std::error_code ec;
    const fs::path out_path(args.out);
    const fs::path out_dir = out_path.has_parent_path() ? out_path.parent_path() : fs::path(".");
    if (fs::is_directory(out_path, ec)) GT_THROW("--out: " + args.out + " is a directory");
    if (!fs::is_directory(out_dir, ec)) GT_THROW("--out: the directory of " + args.out + " does not exist");
    if (access(out_dir.c_str(), W_OK) != 0) GT_THROW("--out: cannot write into " + out_dir.string());
  } catch (const Error& e) {
    return usage_error("run", e.message());
  }

  // Shapes: A[m,k]; B[k,n], or W[n,k] with --weight.
  const npy::Array A = npy::read(args.a);
  const npy::Array B = npy::read(args.b);
  expect_2d(A, args.a, "A[m,k]");
  expect_2d(B, args.b, args.weight ? "W[n,k]" : "B[k,n]");
  const int64_t m = A.shape[0], k = A.shape[1];
  const std::string a_has_k = args.a + " has k = " + std::to_string(k);
  int64_t n = 0;
  if (args.weight) {
    expect_dim(B, args.b, "W[n,k]", 1, "nk", k, a_has_k);
    n = B.shape[0];
  } else {
    expect_dim(B, args.b, "B[k,n]", 0, "kn", k, a_has_k);
    n = B.shape[1];
  }

  GemmProblem p = GemmProblem::linear(m, n, k, in, out);
  p.a = {in, A.fortran_order ? Layout::col : Layout::row, 0};
  // W[n,k] in C order is B = W^T in column-major order, and vice versa.
  const bool b_col = args.weight ? !B.fortran_order : B.fortran_order;
  p.b = {in, b_col ? Layout::col : Layout::row, 0};
  p.d = {out, Layout::row, 0};
  p.c = p.d;
  p.alpha = float_scalar(args.alpha, "alpha");
  p.beta = float_scalar(args.beta, "beta");
  p.act = act;

  const std::string mn = "D is [" + std::to_string(m) + ", " + std::to_string(n) + "]";
  std::vector<float> c_rows, bias, sa, sb;
  if (p.uses_c()) {
    const npy::Array C = npy::read(args.c);
    expect_2d(C, args.c, "C[m,n]");
    expect_dim(C, args.c, "C[m,n]", 0, "mn", m, mn);
    expect_dim(C, args.c, "C[m,n]", 1, "mn", n, mn);
    c_rows = C.fortran_order ? npy::col_to_row_major(C.to_float(), m, n) : C.to_float();
  } else if (!args.c.empty()) {
    log_stderr("--c is ignored: --beta is 0");
  }
  if (!args.bias.empty()) {
    const npy::Array b = npy::read(args.bias);
    expect_vector(b, args.bias, "bias[n]", n, "n = " + std::to_string(n));
    bias = b.to_float();
    p.bias = true;
  }
  if (!args.scale_a.empty()) {
    const npy::Array a = npy::read(args.scale_a), b = npy::read(args.scale_b);
    const bool tensorwise = a.size() == 1 && b.size() == 1;
    const bool vectors = a.shape.size() <= 1 || b.shape.size() <= 1 || (a.size() == m && b.size() == n);
    if (!tensorwise && !vectors) {
      // Block: sa [m, kb] and sb [nb, kb] as the files hold them (logical, either order),
      // rearranged into problem.hpp's layouts (sa M-major, sb with a 4-aligned leading dim).
      p.scale = ScaleMode::block;
      const int64_t kb = p.scale_k_blocks(), nb = p.scale_n_blocks(), ldsb = p.scale_b_ld();
      const std::string why = "block, ceil(k / 128) = " + std::to_string(kb);
      expect_2d(a, args.scale_a, "scale_a[m,ceil(k/128)]");
      expect_dim(a, args.scale_a, "scale_a[m,ceil(k/128)]", 0, "mk", m, why);
      expect_dim(a, args.scale_a, "scale_a[m,ceil(k/128)]", 1, "mk", kb, why);
      expect_2d(b, args.scale_b, "scale_b[ceil(n/128),ceil(k/128)]");
      expect_dim(b, args.scale_b, "scale_b[ceil(n/128),ceil(k/128)]", 0, "nk", nb, why);
      expect_dim(b, args.scale_b, "scale_b[ceil(n/128),ceil(k/128)]", 1, "nk", kb, why);
      const std::vector<float> va = a.to_float(), vb = b.to_float();
      sa.assign(size_t(p.scale_a_elems()), 0.0f);
      sb.assign(size_t(p.scale_b_elems()), 0.0f);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < kb; ++j) sa[size_t(j * m + i)] = va[size_t(a.fortran_order ? j * m + i : i * kb + j)];
      for (int64_t c = 0; c < nb; ++c)
        for (int64_t j = 0; j < kb; ++j) sb[size_t(c * ldsb + j)] = vb[size_t(b.fortran_order ? j * nb + c : c * kb + j)];
    }
  }
  if (!args.scale_a.empty() && p.scale != ScaleMode::block) {
    const npy::Array a = npy::read(args.scale_a), b = npy::read(args.scale_b);
    const bool tensorwise = a.size() == 1 && b.size() == 1;
    p.scale = tensorwise ? ScaleMode::tensorwise : ScaleMode::rowwise;
    const char* mode = tensorwise ? "tensorwise" : "rowwise";
    expect_vector(a, args.scale_a, "scale_a", tensorwise ? 1 : m, std::string(mode) + ", m = " + std::to_string(m));
    expect_vector(b, args.scale_b, "scale_b", tensorwise ? 1 : n, std::string(mode) + ", n = " + std::to_string(n));
    sa = a.to_float();
    sb = b.to_float();
  } else if (args.scale_a.empty()) {
    p.scale = ScaleMode::none;  // sa = sb = 1
  }
  try {  // what the flags and the files' shapes make: a usage error, as in `tune` (exit 2)
    p.validate();
  } catch (const Error& e) {
    return usage_error("run", e.message());
  }

  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, log_stderr);
  if (!engine) return kNoDevice;
  TuneReport report;
  const Kernel kernel = engine->select(p, &report);

  DeviceBuffer da = upload(npy::encode(A.to_float(), in));
  DeviceBuffer db = upload(npy::encode(B.to_float(), in));
  DeviceBuffer dc = upload(npy::encode(c_rows, out));
  DeviceBuffer dbias = upload(npy::encode(bias, out));
  DeviceBuffer dsa = upload(float_bytes(sa));
  DeviceBuffer dsb = upload(float_bytes(sb));
  DeviceBuffer dd(size_t(p.elems_d()) * size_of(out));

  GemmArgs ga;
  ga.a = da.get();
  ga.b = db.get();
  ga.c = p.uses_c() ? dc.get() : nullptr;
  ga.d = dd.get();
  ga.bias = p.bias ? dbias.get() : nullptr;
  ga.scale_a = sa.empty() ? nullptr : dsa.as<float>();
  ga.scale_b = sb.empty() ? nullptr : dsb.as<float>();
  Stream stream;
  kernel.run(ga, stream.get());
  stream.sync();

  std::vector<unsigned char> d_bytes(dd.bytes());
  GT_CUDA(cudaMemcpy(d_bytes.data(), dd.get(), d_bytes.size(), cudaMemcpyDeviceToHost));
  if (out == DType::fp16) {
    npy::write(args.out, d_bytes.data(), npy::Elem::f2, {m, n});
  } else {
    const std::vector<float> d = npy::decode(d_bytes.data(), out, m * n);
    npy::write(args.out, d.data(), npy::Elem::f4, {m, n});
  }
  log_stderr("D[" + std::to_string(m) + ", " + std::to_string(n) + "] written to " + args.out + " (" + p.str() +
             ") by " + kernel.backend() + " " + kernel.name() +
             (report.from_cache ? " (from cache)" : " (tuned now in " + fixed(report.seconds, 2) + " s)"));
  return kOk;
}

}  // namespace gemmtune::cli
