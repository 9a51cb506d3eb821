// SHA-256 (FIPS 180-4), for checking artifacts' bytes and for content-addressed keys.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gemmtune {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest();  // finishes; the object is then spent
  std::string hex();                 // digest() as 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;  // bytes
};

// 64 lowercase hex digits of SHA-256(bytes).
std::string sha256_hex(std::string_view bytes);

}  // namespace gemmtune
