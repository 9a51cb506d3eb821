// .npy reading/writing and host dtype conversion of the gemmtune CLI (tools/gemmtune/npy.*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>

#include "gemmtune/error.hpp"
#include "gemmtune/npy.hpp"

namespace npy = gemmtune::npy;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> from_hex(const std::string& hex) {
  std::vector<unsigned char> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A file exactly as np.save (NumPy 2.x) writes it: version 1.0, header padded with spaces to
// 128 bytes in all, ending in '\n'. `data_hex` was printed by NumPy for the same array.
std::vector<unsigned char> numpy_file(const std::string& dict, const std::string& data_hex) {
  std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict;  // header length 0x76 = 118
  file.append(128 - 1 - file.size(), ' ');
  file += '\n';
  for (unsigned char c : from_hex(data_hex)) file += static_cast<char>(c);
  return std::vector<unsigned char>(file.begin(), file.end());
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gemmtune_npy_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

void write_bytes(const fs::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gemmtune::Error& e) {
    return e.message();
  }
  return "(no error)";
}

}  // namespace

TEST(Npy, ReadsNumpyFortranFloat32) {
  const auto a = npy::parse(numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                       "0000803f00008040000000400000a040000040400000c040"),
                            "f.npy");
  EXPECT_EQ(a.elem, npy::Elem::f4);
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  // [[1,2,3],[4,5,6]] stored column by column.
  EXPECT_EQ(a.to_float(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(npy::col_to_row_major(a.to_float(), 2, 3), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, ReadsMlDtypesBfloat16) {
  const auto a = npy::parse(
      numpy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (2, 2), }", "c03f00c050404a71"), "b.npy");
  EXPECT_EQ(a.elem, npy::Elem::bf16);
  const auto f = a.to_float();
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 3.25f);
  EXPECT_NEAR(f[3], 1e30f, 1e28f);
}

TEST(Npy, ReadsBigEndianFloat64AndFloat16AndScalar) {
  const auto d = npy::parse(numpy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }",
                                       "3ff0000000000000bfe00000000000004008000000000000"),
                            "d.npy");
  EXPECT_EQ(d.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(d.to_float(), (std::vector<float>{1.0f, -0.5f, 3.0f}));

  const auto h = npy::parse(
      numpy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", "0038ff7b00bc0040"), "h.npy");
  EXPECT_EQ(h.to_float(), (std::vector<float>{0.5f, 65504.0f, -1.0f, 2.0f}));

  const auto s = npy::parse(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "0000e040"), "s.npy");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.to_float(), (std::vector<float>{7.0f}));
}

TEST(Npy, WritesWhatNumpyWrites) {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const auto bytes = npy::serialize(v, npy::Elem::f4, {2, 3});
  // NumPy: 10-byte preamble, header length 118, data at offset 128.
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes[8], 118);
  EXPECT_EQ(bytes[9], 0);
  EXPECT_EQ(bytes[127], '\n');
  const std::string header(bytes.begin() + 10, bytes.begin() + 128);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << header;
}

TEST(Npy, RoundTripsEveryElementTypeAndOrder) {
  TempDir dir;
  for (bool fortran : {false, true}) {
    // float16: values exactly representable.
    const std::vector<float> values = {0.5f, -1.25f, 2.0f, 1024.0f, -0.0f, 3.0f};
    {
      const auto halves = npy::encode(values, gemmtune::DType::fp16);
      const auto p = dir / ("h" + std::to_string(fortran) + ".npy");
      npy::write(p, halves.data(), npy::Elem::f2, {3, 2}, fortran);
      const auto a = npy::read(p);
      EXPECT_EQ(a.elem, npy::Elem::f2);
      EXPECT_EQ(a.fortran_order, fortran);
      EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
      EXPECT_EQ(a.to_float(), values);
    }
    {
      const auto p = dir / ("f" + std::to_string(fortran) + ".npy");
      npy::write(p, values.data(), npy::Elem::f4, {2, 3}, fortran);
      const auto a = npy::read(p);
      EXPECT_EQ(a.elem, npy::Elem::f4);
      EXPECT_EQ(a.fortran_order, fortran);
      EXPECT_EQ(a.to_float(), values);
    }
    {
      const std::vector<double> dv = {0.1, -2.5, 1e-3, 7, 8, 9};
      const auto p = dir / ("d" + std::to_string(fortran) + ".npy");
      npy::write(p, dv.data(), npy::Elem::f8, {6}, fortran);
      const auto a = npy::read(p);
      EXPECT_EQ(a.elem, npy::Elem::f8);
      EXPECT_EQ(a.shape, (std::vector<int64_t>{6}));
      const auto f = a.to_float();
      for (size_t i = 0; i < dv.size(); ++i) EXPECT_EQ(f[i], static_cast<float>(dv[i]));
    }
  }
  // A large header (many dimensions) still pads to a 64-byte boundary.
  const float one = 1;
  const auto bytes = npy::serialize(&one, npy::Elem::f4, std::vector<int64_t>(20, 1));
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);
  EXPECT_EQ(npy::parse(bytes, "x").shape.size(), 20u);
}

TEST(Npy, ErrorsNameTheFile) {
  TempDir dir;
  const auto bad = dir / "bad_magic.npy";
  write_bytes(bad, {'N', 'O', 'T', 'N', 'P', 'Y', 1, 0, 0, 0});
  std::string msg = error_of([&] { npy::read(bad); });
  EXPECT_NE(msg.find("bad_magic.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;

  // Header length says 118 but the file ends after 20 header bytes.
  auto full = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "00000000");
  full.resize(30);
  const auto trunc = dir / "trunc_header.npy";
  write_bytes(trunc, full);
  msg = error_of([&] { npy::read(trunc); });
  EXPECT_NE(msg.find("trunc_header.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  // Data shorter than the shape needs.
  const auto short_data = dir / "short.npy";
  write_bytes(short_data, numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "0000803f"));
  msg = error_of([&] { npy::read(short_data); });
  EXPECT_NE(msg.find("short.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;

  msg = error_of([&] {
    npy::parse(numpy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", "01000000"), "int.npy");
  });
  EXPECT_NE(msg.find("int.npy: unsupported dtype '<i4'"), std::string::npos) << msg;

  msg = error_of([&] { npy::parse(numpy_file("{'descr': '<f4', 'shape': (1,), }", "0000803f"), "nokey.npy"); });
  EXPECT_NE(msg.find("nokey.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fortran_order"), std::string::npos) << msg;

  msg = error_of([&] { npy::read(dir / "missing.npy"); });
  EXPECT_NE(msg.find("missing.npy: cannot open"), std::string::npos) << msg;
}

TEST(Npy, EncodesAndDecodesGemmDtypes) {
  using gemmtune::DType;
  const std::vector<float> v = {1.0f, -2.5f, 0.1f, 1000.0f, -1e6f};
  // fp32 exact.
  EXPECT_EQ(npy::decode(npy::encode(v, DType::fp32).data(), DType::fp32, 5), v);
  // bf16: 8 mantissa bits, round to nearest even.
  auto bf = npy::decode(npy::encode(v, DType::bf16).data(), DType::bf16, 5);
  EXPECT_EQ(bf[0], 1.0f);
  EXPECT_EQ(bf[1], -2.5f);
  EXPECT_NEAR(bf[2], 0.1f, 0.1f / 128);
  EXPECT_EQ(bf[3], 1000.0f);
  // fp16 saturates to inf beyond 65504 (IEEE).
  auto h = npy::decode(npy::encode(v, DType::fp16).data(), DType::fp16, 5);
  EXPECT_EQ(h[1], -2.5f);
  EXPECT_TRUE(std::isinf(h[4]));
  // e4m3: max finite 448, saturating; 3 mantissa bits.
  auto e4 = npy::decode(npy::encode(v, DType::e4m3).data(), DType::e4m3, 5);
  EXPECT_EQ(e4[0], 1.0f);
  EXPECT_EQ(e4[1], -2.5f);
  EXPECT_EQ(e4[3], 448.0f);
  EXPECT_EQ(e4[4], -448.0f);
  EXPECT_EQ(npy::encode({1.0f}, DType::e4m3)[0], 0x38);
  // e5m2: max finite 57344; 2 mantissa bits.
  auto e5 = npy::decode(npy::encode(v, DType::e5m2).data(), DType::e5m2, 5);
  EXPECT_EQ(e5[1], -2.5f);
  EXPECT_EQ(e5[3], 1024.0f);
  EXPECT_EQ(e5[4], -57344.0f);
  EXPECT_EQ(npy::encode({1.0f}, DType::e5m2)[0], 0x3c);
}
