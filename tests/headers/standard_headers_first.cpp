// Users include standard headers before hipgrad's, and so before the HIP runtime. The library's
// device code must compile that way too: on AMD, a <cstring> ahead of the runtime leaves
// std::memcpy naming only the host memcpy, which device code may not call. This translation unit
// instantiates, in a kernel, every device function that copies bytes (bit casts, shuffles of a
// struct, vector stores, 16-bit conversions), after the standard headers.
#include <cstring>
#include <string>
#include <vector>

#include "hipgrad/hipgrad.hpp"

namespace hipgrad_header_check {

struct ThreeWords {
  float a, b, c;
};

// External linkage: the kernel is emitted for every target without a launch.
__global__ void copies_bytes_on_the_device(float* out, hipgrad::half* halves, hipgrad::bfloat16* bfloats,
                                           unsigned bits) {
  out[0] = hipgrad::detail::bit_cast<float>(bits);
  const ThreeWords moved = hipgrad::shfl_xor(ThreeWords{out[1], out[2], out[3]}, 1);
  out[4] = moved.a + moved.b + moved.c;
  halves[0] = hipgrad::type_convert<hipgrad::half>(out[5]);
  bfloats[0] = hipgrad::type_convert<hipgrad::bfloat16>(out[6]);
  hipgrad::Vector<hipgrad::half, 8> v{};
  v[0] = halves[0];
  hipgrad::store_vector(halves + 8, v);
}

}  // namespace hipgrad_header_check
