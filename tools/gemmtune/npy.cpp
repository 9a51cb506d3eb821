// .npy reading and writing, and host dtype conversion (see npy.hpp for the contract).
#include "npy.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/text.hpp"
#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"

namespace gemmtune::npy {

namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// This parser accepts exactly the value kinds .npy headers use: strings, True/False and
// tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = string_lit();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') fail("structured dtypes are not supported");
        descr = string_lit();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = bool_lit();
        have_fortran = true;
      } else if (key == "shape") {
        shape = tuple_lit();
        have_shape = true;
      } else {
        fail("unexpected header key '" + printable(key) + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') break;
      fail("expected ',' or '}' in header");
    }
    if (!have_descr || !have_fortran || !have_shape)
      fail("header lacks 'descr', 'fortran_order' or 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    // The header around the offset, escaped and capped (a 20 MB header is not echoed whole).
    const size_t from = i_ > kMaxQuoted / 2 ? i_ - kMaxQuoted / 2 : 0;
    GT_THROW(name_ + ": bad .npy header: " + why + " (at offset " + std::to_string(i_) + " of a " +
             std::to_string(s_.size()) + "-byte header: " + (from ? "..." : "") + "\"" +
             printable(std::string_view(s_).substr(from), kMaxQuoted) + "\")");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_lit() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  bool bool_lit() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<int64_t> tuple_lit() {
    expect('(');
    std::vector<int64_t> dims;
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        return dims;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      // Python writes long integers of old pickles as "3L".
      if (peek() == 'L') ++i_;
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in shape");
    }
  }

  const std::string& s_;
  const std::string& name_;
  size_t i_ = 0;
};

// Element type and byte order from a descr such as '<f4', '>f8', '|V2' or 'bfloat16'.
Elem parse_descr(const std::string& descr, bool& big_endian, const std::string& name) {
  big_endian = false;
  if (descr == "bfloat16") return Elem::bf16;
  std::string d = descr;
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    big_endian = d[0] == '>';
    d = d.substr(1);
  }
  if (d == "f2" || d == "e") return Elem::f2;
  if (d == "f4" || d == "f") return Elem::f4;
  if (d == "f8" || d == "d") return Elem::f8;
  // ml_dtypes.bfloat16 is not a builtin NumPy type: np.save records it as a 2-byte void.
  if (d == "V2") return Elem::bf16;
  GT_THROW(name + ": unsupported dtype '" + descr + "' (gemmtune reads float16, float32, float64 and bfloat16)");
}

const char* descr_of(Elem e) {
  switch (e) {
    case Elem::f2: return "<f2";
    case Elem::f4: return "<f4";
    case Elem::f8: return "<f8";
    case Elem::bf16: return "<V2";  // what np.save writes for ml_dtypes.bfloat16
  }
  return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// prod(shape), or -1 on overflow of a sane size (2^60 elements).
int64_t checked_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > (int64_t(1) << 60) / d) return -1;
    n *= d;
  }
  return n;
}

float half_bits_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

uint16_t float_to_half_bits(float f) {
  __half_raw raw = __half(__float2half_rn(f));
  return raw.x;
}

float bf16_bits_to_float(uint16_t bits) {
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16_bits(float f) {
  __nv_bfloat16_raw raw = __nv_bfloat16(__float2bfloat16_rn(f));
  return raw.x;
}

}  // namespace

const char* to_string(Elem e) {
  switch (e) {
    case Elem::f2: return "float16";
    case Elem::f4: return "float32";
    case Elem::f8: return "float64";
    case Elem::bf16: return "bfloat16";
  }
  return "?";
}

size_t size_of(Elem e) {
  switch (e) {
    case Elem::f2: return 2;
    case Elem::f4: return 4;
    case Elem::f8: return 8;
    case Elem::bf16: return 2;
  }
  return 0;
}

int64_t Array::size() const { return checked_count(shape); }

std::string Array::shape_str() const { return shape_text(shape); }

std::vector<float> Array::to_float() const {
  const int64_t n = size();
  std::vector<float> out(size_t(n > 0 ? n : 0));
  const unsigned char* p = data.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (elem) {
      case Elem::f2: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = half_bits_to_float(b);
        break;
      }
      case Elem::bf16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = bf16_bits_to_float(b);
        break;
      }
      case Elem::f4: std::memcpy(&out[i], p + 4 * i, 4); break;
      case Elem::f8: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
    }
  }
  return out;
}

Array parse(const std::vector<unsigned char>& bytes, const std::string& name) {
  if (bytes.size() < 8 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
    GT_THROW(name + ": not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = bytes[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    if (bytes.size() < 10) GT_THROW(name + ": truncated .npy header");
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) GT_THROW(name + ": truncated .npy header");
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    offset = 12;
  } else {
    GT_THROW(name + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(bytes[7]));
  }
  if (bytes.size() < offset + header_len)
    GT_THROW(name + ": truncated .npy header (" + std::to_string(header_len) + " header bytes declared, " +
             std::to_string(bytes.size() - offset) + " present)");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + offset), header_len);

  Array a;
  std::string descr;
  HeaderParser(header, name).parse(descr, a.fortran_order, a.shape);
  bool big_endian = false;
  a.elem = parse_descr(descr, big_endian, name);

  const int64_t count = checked_count(a.shape);
  if (count < 0) GT_THROW(name + ": shape " + shape_text(a.shape) + " is too large");
  const size_t esize = size_of(a.elem);
  const size_t need = size_t(count) * esize;
  const size_t have = bytes.size() - offset - header_len;
  if (have != need)
    GT_THROW(name + ": data is " + std::to_string(have) + " bytes, but shape " + shape_text(a.shape) + " of " +
             to_string(a.elem) + " needs " + std::to_string(need) + (have < need ? " (file truncated)" : ""));
  a.data.assign(bytes.begin() + std::ptrdiff_t(offset + header_len), bytes.end());
  if (big_endian && esize > 1)
    for (size_t i = 0; i < a.data.size(); i += esize) std::reverse(a.data.begin() + i, a.data.begin() + i + esize);
  return a;
}

Array read(const std::filesystem::path& path) {
  // A regular file only, its size known before reading: a directory, FIFO or /dev/zero is an
  // error naming the file, not a hang or an exhausted memory.
  securefs::Read r = securefs::read_regular(path, uint64_t(1) << 36, {}, true);
  if (r.absent) GT_THROW(path.string() + ": cannot open (No such file or directory)");
  if (!r.bytes) GT_THROW(r.problem);
  std::vector<unsigned char> bytes(r.bytes->begin(), r.bytes->end());
  r.bytes.reset();
  return parse(bytes, path.string());
}

std::vector<unsigned char> serialize(const void* data, Elem elem, const std::vector<int64_t>& shape,
                                     bool fortran_order) {
  const int64_t count = checked_count(shape);
  GT_CHECK(count >= 0, "npy: shape " + shape_text(shape) + " is invalid");
  std::string header = std::string("{'descr': '") + descr_of(elem) +
                       "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                       ", 'shape': " + shape_text(shape) + ", }";
  // NumPy pads with spaces so that the data starts on a 64-byte boundary, then a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  GT_CHECK(header.size() <= 65535, "npy: header too long");

  std::vector<unsigned char> out(std::begin(kMagic), std::end(kMagic));
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<unsigned char>(header.size() & 0xff));
  out.push_back(static_cast<unsigned char>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = static_cast<const unsigned char*>(data);
  out.insert(out.end(), p, p + size_t(count) * size_of(elem));
  return out;
}

void write(const std::filesystem::path& path, const void* data, Elem elem, const std::vector<int64_t>& shape,
           bool fortran_order) {
  const std::vector<unsigned char> bytes = serialize(data, elem, shape, fortran_order);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) GT_THROW(path.string() + ": cannot create (" + std::strerror(errno) + ")");
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.close();
  if (!out) GT_THROW(path.string() + ": write failed");
}

std::vector<unsigned char> encode(const std::vector<float>& values, DType dtype) {
  std::vector<unsigned char> out(values.size() * gemmtune::size_of(dtype));
  unsigned char* p = out.data();
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    switch (dtype) {
      case DType::fp32: std::memcpy(p + 4 * i, &v, 4); break;
      case DType::fp16: {
        uint16_t b = float_to_half_bits(v);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::bf16: {
        uint16_t b = float_to_bf16_bits(v);
        std::memcpy(p + 2 * i, &b, 2);
        break;
      }
      case DType::e4m3: p[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); break;
      case DType::e5m2: p[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2); break;
    }
  }
  return out;
}

std::vector<float> decode(const void* data, DType dtype, int64_t count) {
  std::vector<float> out(size_t(count > 0 ? count : 0));
  const auto* p = static_cast<const unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::fp32: std::memcpy(&out[i], p + 4 * i, 4); break;
      case DType::fp16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = half_bits_to_float(b);
        break;
      }
      case DType::bf16: {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = bf16_bits_to_float(b);
        break;
      }
      case DType::e4m3:
      case DType::e5m2: {
        __half_raw h = __nv_cvt_fp8_to_halfraw(p[i], dtype == DType::e4m3 ? __NV_E4M3 : __NV_E5M2);
        out[i] = half_bits_to_float(h.x);
        break;
      }
    }
  }
  return out;
}

std::vector<float> col_to_row_major(const std::vector<float>& col_major, int64_t rows, int64_t cols) {
  std::vector<float> out(col_major.size());
  // An empty matrix moves nothing, whatever its other extent (a shape of (8e13, 0) looped 8e13
  // times: the fuzz test's timeout).
  if (rows <= 0 || cols <= 0) return out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = col_major[size_t(c * rows + r)];
  return out;
}

}  // namespace gemmtune::npy
