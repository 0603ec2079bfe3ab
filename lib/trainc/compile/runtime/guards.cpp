#include "trainc/compile/runtime/guards.h"

#include <sstream>

namespace trainc {
namespace {

void describe(std::ostringstream& text, const std::string& name, const at::Tensor& tensor, c10::Device device) {
  text << name << " " << c10::toString(tensor.scalar_type()) << "[";
  for (int64_t i = 0; i < tensor.dim(); ++i) text << (i ? ", " : "") << tensor.size(i);
  text << "] " << device;
}

}  // namespace

std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets) {
  std::ostringstream text;
  describe(text, "inputs", inputs, inputs.device());
  text << ", ";
  describe(text, "targets", targets, targets.device());
  return text.str();
}

std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets, c10::Device device) {
  std::ostringstream text;
  describe(text, "inputs", inputs, device);
  text << ", ";
  describe(text, "targets", targets, device);
  return text.str();
}

}  // namespace trainc
