#include "trainc/compile/runtime/aten_executor.h"

#include <array>
#include <cmath>

#include "trainc/compat/torch_compat.h"

namespace trainc::ir {
namespace {

using Inputs = std::vector<at::Tensor>;
using Kernel = at::Tensor (*)(const Inputs&, const Attributes&);

at::Tensor attention(const Inputs& in, const Attributes& attrs) {
  if (attrs.causal) return causal_attention(in[0], in[1], in[2], 0.0, false);
  const at::Tensor scores = at::matmul(in[0], in[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(in[0].size(-1)));
  return at::matmul(at::softmax(scores, -1), in[2]);
}

// One ATen call per op. The table below is generated from TRAINC_IR_OPS: an op without its
// run_<op> function does not compile.
at::Tensor run_input(const Inputs& in, const Attributes& a) { throw IrError("inputs are not executed"); }
at::Tensor run_constant(const Inputs& in, const Attributes& a) { return at::full(a.ints, a.scalar, at::TensorOptions().dtype(to_scalar_type(a.dtype))); }
at::Tensor run_neg(const Inputs& in, const Attributes& a) { return at::neg(in[0]); }
at::Tensor run_exp(const Inputs& in, const Attributes& a) { return at::exp(in[0]); }
at::Tensor run_log(const Inputs& in, const Attributes& a) { return at::log(in[0]); }
at::Tensor run_tanh(const Inputs& in, const Attributes& a) { return at::tanh(in[0]); }
at::Tensor run_erf(const Inputs& in, const Attributes& a) { return at::erf(in[0]); }
at::Tensor run_sqrt(const Inputs& in, const Attributes& a) { return at::sqrt(in[0]); }
at::Tensor run_rsqrt(const Inputs& in, const Attributes& a) { return at::rsqrt(in[0]); }
at::Tensor run_reciprocal(const Inputs& in, const Attributes& a) { return at::reciprocal(in[0]); }
at::Tensor run_relu(const Inputs& in, const Attributes& a) { return at::relu(in[0]); }
at::Tensor run_sigmoid(const Inputs& in, const Attributes& a) { return at::sigmoid(in[0]); }
at::Tensor run_cast(const Inputs& in, const Attributes& a) { return in[0].to(to_scalar_type(a.dtype)); }
at::Tensor run_add(const Inputs& in, const Attributes& a) { return at::add(in[0], in[1]); }
at::Tensor run_sub(const Inputs& in, const Attributes& a) { return at::sub(in[0], in[1]); }
at::Tensor run_mul(const Inputs& in, const Attributes& a) { return at::mul(in[0], in[1]); }
at::Tensor run_div(const Inputs& in, const Attributes& a) { return at::div(in[0], in[1]); }
at::Tensor run_pow(const Inputs& in, const Attributes& a) { return at::pow(in[0], in[1]); }
at::Tensor run_maximum(const Inputs& in, const Attributes& a) { return at::maximum(in[0], in[1]); }
at::Tensor run_gt(const Inputs& in, const Attributes& a) { return at::gt(in[0], in[1]); }
at::Tensor run_eq(const Inputs& in, const Attributes& a) { return at::eq(in[0], in[1]); }
at::Tensor run_where(const Inputs& in, const Attributes& a) { return at::where(in[0], in[1], in[2]); }
at::Tensor run_sum(const Inputs& in, const Attributes& a) { return at::sum(in[0], a.ints, a.keepdim); }
at::Tensor run_amax(const Inputs& in, const Attributes& a) { return at::amax(in[0], a.ints, a.keepdim); }
at::Tensor run_reshape(const Inputs& in, const Attributes& a) { return in[0].reshape(a.ints); }
at::Tensor run_permute(const Inputs& in, const Attributes& a) { return in[0].permute(a.ints); }
at::Tensor run_expand(const Inputs& in, const Attributes& a) { return in[0].expand(a.ints); }
at::Tensor run_slice(const Inputs& in, const Attributes& a) { return in[0].slice(a.ints[0], a.ints[1], a.ints[2], a.ints[3]); }
at::Tensor run_matmul(const Inputs& in, const Attributes& a) { return at::matmul(in[0], in[1]); }
at::Tensor run_embedding(const Inputs& in, const Attributes& a) { return at::embedding(in[0], in[1]); }
at::Tensor run_attention(const Inputs& in, const Attributes& a) { return attention(in, a); }
at::Tensor run_conv2d(const Inputs& in, const Attributes& a) { return at::conv2d(in[0], in[1], {}, a.ints[0], a.ints[1]); }

const std::array<Kernel, kOpCount>& kernels() {
#define TRAINC_IR_OP_KERNEL(op, kind, arity) &run_##op,
  static const std::array<Kernel, kOpCount> table = {TRAINC_IR_OPS(TRAINC_IR_OP_KERNEL)};
#undef TRAINC_IR_OP_KERNEL
  return table;
}

}  // namespace

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::bf16: return at::kBFloat16;
    case DType::f16: return at::kHalf;
    case DType::i64: return at::kLong;
    case DType::b8: return at::kBool;
  }
  throw IrError("unknown dtype");
}

DType to_dtype(at::ScalarType type) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::b8}) {
    if (to_scalar_type(dtype) == type) return dtype;
  }
  throw IrError(std::string("the IR has no dtype for ") + c10::toString(type));
}

std::vector<at::Tensor> execute_with_aten(const Graph& graph, const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> values(static_cast<std::size_t>(graph.size()));
  std::size_t next_input = 0;
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::input) {
      if (next_input >= inputs.size()) throw IrError("execute_with_aten: fewer tensors than graph inputs");
      values[static_cast<std::size_t>(id)] = inputs[next_input++];
      continue;
    }
    Inputs arguments;
    for (ValueId input : node.inputs) arguments.push_back(values[static_cast<std::size_t>(input)]);
    values[static_cast<std::size_t>(id)] = kernels()[static_cast<std::size_t>(node.op)](arguments, node.attrs);
  }
  if (next_input != inputs.size()) throw IrError("execute_with_aten: more tensors than graph inputs");
  std::vector<at::Tensor> outputs;
  for (ValueId output : graph.outputs()) outputs.push_back(values[static_cast<std::size_t>(output)]);
  return outputs;
}

}  // namespace trainc::ir
