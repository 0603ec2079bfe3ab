#include "trainc/compile/runtime/kernel_profile.h"

#include <cstdlib>
#include <string>

#include "trainc/common/error.h"

namespace trainc {

bool kernel_profile_requested() {
  const char* value = std::getenv("TRAINC_PROFILE_KERNELS");
  if (value == nullptr || *value == '\0' || std::string(value) == "0") return false;
  if (std::string(value) == "1") return true;
  throw UserError(std::string("TRAINC_PROFILE_KERNELS=") + value + ": expected 1 (on) or 0 (off)");
}

}  // namespace trainc
