// NumPy .npy files for `gemmtune run`, and host conversion between float and gemmtune dtypes.
//
// Reads format versions 1.0, 2.0 and 3.0 with element types float16 ('f2'), float32 ('f4'),
// float64 ('f8') in either byte order, and bfloat16 as np.save writes ml_dtypes.bfloat16 (a 2-byte void
// '<V2' or '|V2', or the descr 'bfloat16'), in C or Fortran order. Writes version 1.0,
// little-endian, header padded to 64 bytes as NumPy does. Every error is a gemmtune::Error
// whose message starts with the file's path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gemmtune/problem.hpp"

namespace gemmtune::npy {

enum class Elem : uint8_t { f2, f4, f8, bf16 };
const char* to_string(Elem);
size_t size_of(Elem);

struct Array {
  Elem elem = Elem::f4;
  std::vector<int64_t> shape;         // () for a scalar
  bool fortran_order = false;         // true: column-major (first index fastest)
  std::vector<unsigned char> data;    // elements in file order, little-endian

  int64_t size() const;               // product of shape (1 for a scalar)
  std::string shape_str() const;      // "(3, 4)"
  // Elements as float, in storage order (float64 is rounded).
  std::vector<float> to_float() const;
};

// Parses an in-memory .npy image; `name` prefixes error messages.
Array parse(const std::vector<unsigned char>& bytes, const std::string& name);
Array read(const std::filesystem::path& path);

// Serializes `count = prod(shape)` elements of `elem` at `data` (storage order per fortran_order).
std::vector<unsigned char> serialize(const void* data, Elem elem, const std::vector<int64_t>& shape,
                                     bool fortran_order = false);
void write(const std::filesystem::path& path, const void* data, Elem elem, const std::vector<int64_t>& shape,
           bool fortran_order = false);

// ---- host dtype conversion -------------------------------------------------------------
// float -> `dtype` with round-to-nearest-even; fp8 saturates to the largest finite value
// (as torch's casts with clamping do). Returns size_of(dtype) * values.size() bytes.
std::vector<unsigned char> encode(const std::vector<float>& values, DType dtype);
// `count` elements of `dtype` -> float.
std::vector<float> decode(const void* data, DType dtype, int64_t count);

// Reorders a rows x cols matrix between column-major and row-major storage (col_major holds
// rows * cols values; an empty matrix, either extent 0, returns at once).
std::vector<float> col_to_row_major(const std::vector<float>& col_major, int64_t rows, int64_t cols);

}  // namespace gemmtune::npy
