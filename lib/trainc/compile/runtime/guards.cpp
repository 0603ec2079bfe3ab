#include "trainc/compile/runtime/guards.h"

#include <sstream>

namespace trainc {
namespace {

void describe(std::ostringstream& text, const std::string& name, const at::Tensor& tensor, c10::Device device) {
  text << name << " " << c10::toString(tensor.scalar_type()) << "[";
  for (int64_t i = 0; i < tensor.dim(); ++i) text << (i ? ", " : "") << tensor.size(i);
  text << "] " << device;
}

std::string signature(const at::Tensor& inputs, c10::Device inputs_device, const at::Tensor& targets, c10::Device targets_device) {
  std::ostringstream text;
  describe(text, "inputs", inputs, inputs_device);
  text << ", ";
  describe(text, "targets", targets, targets_device);
  return text.str();
}

}  // namespace

std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets) {
  return signature(inputs, inputs.device(), targets, targets.device());
}

std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets, c10::Device device) {
  return signature(inputs, device, targets, device);
}

}  // namespace trainc
