#include "trainc/compile/runtime/side_product_sms.h"

#include "trainc/compat/side_stream.h"

namespace trainc {

int small_layers_sm_target(int half, int64_t rows, int64_t width) {
  const int64_t tiles = (rows + 127) / 128 * ((width + 127) / 128);
  return half > 0 && tiles < 2 * static_cast<int64_t>(half) ? half : 0;
}

int side_product_sm_target(int64_t rows, int64_t width, Optimization which) {
  const int half = SideStream::product_sm_target();
  if (half == 0 || !optimization_enabled(which)) return 0;
  return small_layers_sm_target(half, rows, width);
}

}  // namespace trainc
