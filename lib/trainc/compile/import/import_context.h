// defines: ImportContext, Unsupported, Builder, register_aten_ops, register_composite_ops, arg, out_dtype
//
// What an op builder sees while the importer walks the traced graph: the IR values of the aten
// node's tensor arguments, the constant values of its other arguments, and helpers that emit IR.
// A builder returns the IR values of the node's outputs; it throws Unsupported to report a graph
// break (the importer records the op and the reason and skips what depends on it).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc {

class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ImportContext;
using Builder = std::function<std::vector<ir::ValueId>(ImportContext&, const torch::jit::Node&)>;
using BuilderTable = std::unordered_map<std::string, Builder>;

void register_aten_ops(BuilderTable& table);       // pointwise, reductions, views, linear algebra
void register_composite_ops(BuilderTable& table);  // norms, softmax, losses, dropout, attention, ...

class ImportContext {
 public:
  explicit ImportContext(ir::Graph& graph) : graph_(graph) {}

  // Arguments.
  ir::ValueId tensor(const torch::jit::Value* value) const;  // Unsupported if not an imported tensor
  bool is_tensor(const torch::jit::Value* value) const;
  bool is_none(const torch::jit::Value* value) const;
  const c10::IValue& constant(const torch::jit::Value* value) const;  // Unsupported if not known
  int64_t int_arg(const torch::jit::Value* value) const;
  double double_arg(const torch::jit::Value* value) const;
  bool bool_arg(const torch::jit::Value* value) const;
  std::string string_arg(const torch::jit::Value* value) const;
  std::vector<int64_t> ints_arg(const torch::jit::Value* value) const;  // an int or a list of ints
  std::vector<ir::ValueId> tensors_arg(const torch::jit::Value* value) const;  // a list of tensors
  // The shape and dtype the tracer recorded for a tensor value.
  ir::TensorType traced_type(const torch::jit::Value* value) const;

  // Emitting IR.
  ir::Graph& graph() { return graph_; }
  ir::TensorType type(ir::ValueId value) const { return graph_.type(value); }  // a copy: adding nodes moves them
  ir::ValueId add(ir::Op op, std::vector<ir::ValueId> inputs, ir::Attributes attrs = {});
  ir::ValueId scalar(double value, ir::DType dtype);  // a rank-0 constant
  ir::ValueId cast(ir::ValueId value, ir::DType dtype);  // no node when the dtype already matches
  // A tensor argument cast to `dtype`, or a number argument as a rank-0 constant of `dtype`.
  ir::ValueId operand(const torch::jit::Value* value, ir::DType dtype);
  ir::ValueId reshape(ir::ValueId value, std::vector<int64_t> shape);  // no node when unchanged
  ir::ValueId sum(ir::ValueId value, std::vector<int64_t> axes, bool keepdim);
  ir::ValueId mean(ir::ValueId value, std::vector<int64_t> axes, bool keepdim);
  ir::ValueId binary(ir::Op op, ir::ValueId a, ir::ValueId b) { return add(op, {a, b}); }

  // An op that updates a graph input in place (a buffer: batch-norm statistics) leaves `value`
  // there; the import checks afterwards that only buffers are updated.
  bool is_graph_input(const torch::jit::Value* value) const { return input_index_.count(value) > 0; }
  void update_buffer(const torch::jit::Value* buffer, ir::ValueId value);

  // The importer's own bookkeeping (import.cpp).
  void bind(const torch::jit::Value* value, ir::ValueId id) { tensors_[value] = id; }
  void bind_constant(const torch::jit::Value* value, c10::IValue constant) { constants_[value] = std::move(constant); }
  void bind_list(const torch::jit::Value* value, std::vector<ir::ValueId> ids) { lists_[value] = std::move(ids); }
  void bind_input(const torch::jit::Value* value, int index) { input_index_[value] = index; }
  bool known(const torch::jit::Value* value) const {
    return tensors_.count(value) || constants_.count(value) || lists_.count(value);
  }
  const std::unordered_map<int, ir::ValueId>& buffer_updates() const { return buffer_updates_; }

 private:
  ir::Graph& graph_;
  std::unordered_map<const torch::jit::Value*, ir::ValueId> tensors_;
  std::unordered_map<const torch::jit::Value*, c10::IValue> constants_;
  std::unordered_map<const torch::jit::Value*, std::vector<ir::ValueId>> lists_;
  std::unordered_map<const torch::jit::Value*, int> input_index_;
  std::unordered_map<int, ir::ValueId> buffer_updates_;
};

// The node's i-th argument; Unsupported for an overload with fewer arguments.
inline const torch::jit::Value* arg(const torch::jit::Node& node, std::size_t i) {
  if (i >= node.inputs().size()) throw Unsupported("an overload with " + std::to_string(node.inputs().size()) + " arguments");
  return node.inputs()[i];
}
// The dtype the tracer recorded for the node's (first) output.
inline ir::DType out_dtype(ImportContext& context, const torch::jit::Node& node) { return context.traced_type(node.output()).dtype; }

// The IR dtype of an ATen scalar type; Unsupported for one the IR lacks.
ir::DType ir_dtype(at::ScalarType type);
// Low-precision floats compute in float32 inside decompositions, as ATen's kernels do.
inline ir::DType compute_dtype(ir::DType dtype) {
  return dtype == ir::DType::bf16 || dtype == ir::DType::f16 ? ir::DType::f32 : dtype;
}

}  // namespace trainc
