#include "trainc/common/error.h"

namespace trainc {

void fail_check(const char* condition, const char* file, int line, const std::string& detail) {
  throw std::logic_error(std::string("internal error (a bug in trainc) at ") + file + ":" +
                         std::to_string(line) + ": check `" + condition + "` failed" +
                         (detail.empty() ? "" : ": " + detail));
}

}  // namespace trainc
