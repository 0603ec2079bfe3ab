#include "trainc/compile/runtime/guards.h"

#include <sstream>

namespace trainc {
namespace {

void describe(std::ostringstream& text, const std::string& name, const at::Tensor& tensor) {
  text << name << " " << c10::toString(tensor.scalar_type()) << "[";
  for (int64_t i = 0; i < tensor.dim(); ++i) text << (i ? ", " : "") << tensor.size(i);
  text << "] " << tensor.device();
}

}  // namespace

std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets) {
  std::ostringstream text;
  describe(text, "inputs", inputs);
  text << ", ";
  describe(text, "targets", targets);
  return text.str();
}

}  // namespace trainc
