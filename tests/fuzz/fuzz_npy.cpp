// libFuzzer harness: the .npy reader of `gemmtune run` (tools/gemmtune/npy.cpp). Any input either
// parses into an array whose data matches its shape and dtype, or raises gemmtune::Error; a parsed
// array converts to float and serializes back to an image that parses to the same array.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gemmtune/error.hpp"
#include "gemmtune/npy.hpp"  // tools/gemmtune

using namespace gemmtune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<unsigned char> bytes(data, data + size);
  npy::Array a;
  try {
    a = npy::parse(bytes, "fuzz.npy");
  } catch (const Error&) {
    return 0;
  }
  if (a.data.size() != size_t(a.size()) * npy::size_of(a.elem)) std::abort();
  const std::vector<float> values = a.to_float();
  if (values.size() != size_t(a.size())) std::abort();
  if (a.shape.size() == 2) (void)npy::col_to_row_major(values, a.shape[0], a.shape[1]);
  const std::vector<unsigned char> image = npy::serialize(a.data.data(), a.elem, a.shape, a.fortran_order);
  const npy::Array b = npy::parse(image, "round trip");
  if (b.elem != a.elem || b.shape != a.shape || b.fortran_order != a.fortran_order || b.data != a.data) std::abort();
  return 0;
}
