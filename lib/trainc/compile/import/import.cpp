#include "trainc/compile/import/import.h"

#include <torch/csrc/jit/ir/ir.h>

#include <set>

#include "trainc/compile/import/import_context.h"

namespace trainc {

using ir::DType;
using ir::Op;
using ir::ValueId;
namespace jit = torch::jit;

ir::DType ir_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kBFloat16: return DType::bf16;
    case at::kHalf: return DType::f16;
    case at::kLong: return DType::i64;
    case at::kBool: return DType::b8;
    default: throw Unsupported(std::string("dtype ") + c10::toString(type) + " has no IR dtype");
  }
}

// --- arguments -------------------------------------------------------------------------------

bool ImportContext::is_tensor(const jit::Value* value) const { return tensors_.count(value) > 0; }

ValueId ImportContext::tensor(const jit::Value* value) const {
  const auto it = tensors_.find(value);
  if (it != tensors_.end()) return it->second;
  if (constants_.count(value) && constants_.at(value).isTensor()) throw Unsupported("a tensor constant baked into the trace");
  throw Unsupported("argument %" + value->debugName() + " is not a tensor the graph computes");
}

bool ImportContext::is_none(const jit::Value* value) const {
  const auto it = constants_.find(value);
  return it != constants_.end() && it->second.isNone();
}

const c10::IValue& ImportContext::constant(const jit::Value* value) const {
  const auto it = constants_.find(value);
  if (it == constants_.end()) throw Unsupported("argument %" + value->debugName() + " is computed at run time, not a constant");
  return it->second;
}

int64_t ImportContext::int_arg(const jit::Value* value) const {
  const c10::IValue& v = constant(value);
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool() ? 1 : 0;
  throw Unsupported("expected an int argument, got " + v.tagKind());
}

double ImportContext::double_arg(const jit::Value* value) const {
  const c10::IValue& v = constant(value);
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  throw Unsupported("expected a number argument, got " + v.tagKind());
}

bool ImportContext::bool_arg(const jit::Value* value) const {
  const c10::IValue& v = constant(value);
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt() != 0;
  throw Unsupported("expected a bool argument, got " + v.tagKind());
}

std::string ImportContext::string_arg(const jit::Value* value) const {
  const c10::IValue& v = constant(value);
  if (!v.isString()) throw Unsupported("expected a string argument, got " + v.tagKind());
  return v.toStringRef();
}

std::vector<int64_t> ImportContext::ints_arg(const jit::Value* value) const {
  const c10::IValue& v = constant(value);
  if (v.isInt()) return {v.toInt()};
  if (v.isIntList()) return v.toIntVector();
  throw Unsupported("expected a list of ints, got " + v.tagKind());
}

std::vector<ValueId> ImportContext::tensors_arg(const jit::Value* value) const {
  const auto it = lists_.find(value);
  if (it == lists_.end()) throw Unsupported("expected a list of tensors the graph computes");
  return it->second;
}

ir::TensorType ImportContext::traced_type(const jit::Value* value) const {
  const auto type = value->type()->cast<c10::TensorType>();
  if (!type || !type->scalarType() || !type->sizes().concrete_sizes()) throw Unsupported("the trace left a tensor without a shape");
  return {ir_dtype(*type->scalarType()), *type->sizes().concrete_sizes()};
}

// --- emitting ----------------------------------------------------------------------------------

ValueId ImportContext::add(Op op, std::vector<ValueId> inputs, ir::Attributes attrs) {
  return graph_.add(op, std::move(inputs), std::move(attrs));
}

ValueId ImportContext::scalar(double value, DType dtype) {
  ir::Attributes attrs;
  attrs.scalar = value;
  attrs.dtype = dtype;
  return add(Op::constant, {}, attrs);
}

ValueId ImportContext::cast(ValueId value, DType dtype) {
  if (type(value).dtype == dtype) return value;
  ir::Attributes attrs;
  attrs.dtype = dtype;
  return add(Op::cast, {value}, attrs);
}

ValueId ImportContext::operand(const jit::Value* value, DType dtype) {
  if (is_tensor(value)) return cast(tensor(value), dtype);
  return scalar(double_arg(value), dtype);
}

ValueId ImportContext::reshape(ValueId value, std::vector<int64_t> shape) {
  if (type(value).shape == shape) return value;
  ir::Attributes attrs;
  attrs.ints = std::move(shape);
  return add(Op::reshape, {value}, attrs);
}

ValueId ImportContext::sum(ValueId value, std::vector<int64_t> axes, bool keepdim) {
  if (axes.empty()) return value;
  ir::Attributes attrs;
  attrs.ints = std::move(axes);
  attrs.keepdim = keepdim;
  return add(Op::sum, {value}, attrs);
}

ValueId ImportContext::mean(ValueId value, std::vector<int64_t> axes, bool keepdim) {
  const ir::TensorType& in = type(value);
  int64_t count = 1;
  for (int64_t axis : axes) count *= in.shape[static_cast<std::size_t>(axis < 0 ? axis + in.rank() : axis)];
  const ValueId total = sum(value, std::move(axes), keepdim);
  return binary(Op::div, total, scalar(static_cast<double>(count), in.dtype));
}

void ImportContext::update_buffer(const jit::Value* buffer, ValueId value) {
  const auto it = input_index_.find(buffer);
  if (it == input_index_.end()) throw Unsupported("an in-place update of a tensor that is not a model buffer");
  buffer_updates_[it->second] = value;
}

// --- the walk ----------------------------------------------------------------------------------

namespace {

const BuilderTable& builders() {
  static const BuilderTable table = [] {
    BuilderTable t;
    register_aten_ops(t);
    register_composite_ops(t);
    return t;
  }();
  return table;
}

bool produces_tensor(const jit::Value* value) { return value->type()->cast<c10::TensorType>() != nullptr; }

// The module an op belongs to, as far as a trace of C++ modules can tell: the nearest node, at or
// after this one (else before it), that reads a parameter names that parameter's module.
std::string nearest_module(const jit::Node* node, const std::unordered_map<const jit::Value*, std::string>& parameter_names) {
  const auto module_of = [&](const jit::Node* n) -> std::string {
    for (const jit::Value* input : n->inputs()) {
      const auto it = parameter_names.find(input);
      if (it == parameter_names.end()) continue;
      const std::size_t dot = it->second.rfind('.');
      return dot == std::string::npos ? std::string("(model)") : it->second.substr(0, dot);
    }
    return "";
  };
  for (const jit::Node* n = node; n->kind() != jit::prim::Return; n = n->next()) {
    const std::string name = module_of(n);
    if (!name.empty()) return name;
  }
  for (const jit::Node* n = node->prev(); n->kind() != jit::prim::Param; n = n->prev()) {
    const std::string name = module_of(n);
    if (!name.empty()) return name;
  }
  return "(model)";
}

// Evaluates a node whose inputs are all known constants and whose outputs are not tensors (size
// arithmetic, list building): the trace of a TorchScript model computes shapes this way.
bool fold_constant(ImportContext& context, const jit::Node& node) {
  for (const jit::Value* output : node.outputs()) {
    if (produces_tensor(output)) return false;
  }
  torch::jit::Stack stack;
  for (const jit::Value* input : node.inputs()) {
    if (context.is_tensor(input)) return false;
    stack.push_back(context.constant(input));
  }
  if (!node.maybeOperator()) return false;
  node.getOperation()(stack);
  for (std::size_t i = 0; i < node.outputs().size(); ++i) context.bind_constant(node.outputs()[i], stack[i]);
  return true;
}

}  // namespace

ImportedGraph import_graph(const CapturedStep& captured) {
  ImportedGraph result;
  ImportContext context(result.graph);
  const jit::Graph& traced = *captured.graph;
  if (traced.inputs().size() != captured.inputs.size()) throw ir::IrError("import: the trace's inputs do not match the step's");
  std::unordered_map<const jit::Value*, std::string> parameter_names;
  for (std::size_t i = 0; i < captured.inputs.size(); ++i) {
    const jit::Value* value = traced.inputs()[i];
    const ValueId id = result.graph.add_input(captured.inputs[i].name, context.traced_type(value));
    context.bind(value, id);
    context.bind_input(value, static_cast<int>(i));
    if (captured.inputs[i].kind == StepInputKind::parameter) parameter_names[value] = captured.inputs[i].name;
  }

  std::set<std::pair<std::string, std::string>> reported;
  for (const jit::Node* node : traced.nodes()) {
    const std::string kind = node->kind().toQualString();
    if (node->kind() != jit::prim::Constant && node->kind() != jit::prim::ListConstruct) ++result.aten_op_counts[kind];
    bool inputs_known = true;
    for (const jit::Value* input : node->inputs()) inputs_known = inputs_known && context.known(input);
    if (!inputs_known) continue;  // downstream of a break: already reported there
    try {
      if (node->kind() == jit::prim::Constant) {
        const auto value = torch::jit::toIValue(node->output());
        if (!value) throw Unsupported("a constant of type " + node->output()->type()->str());
        context.bind_constant(node->output(), *value);
        continue;
      }
      const auto builder = builders().find(kind);
      if (builder != builders().end()) {
        const std::vector<ValueId> outputs = builder->second(context, *node);
        std::size_t next = 0;
        for (const jit::Value* output : node->outputs()) {
          if (!produces_tensor(output)) continue;
          if (next >= outputs.size()) throw ir::IrError("import of " + kind + ": the builder returned too few values");
          const ValueId id = outputs[next++];
          const ir::TensorType traced_type = context.traced_type(output);
          if (context.type(id) != traced_type) {
            throw ir::IrError("import of " + kind + " gives " + context.type(id).str() + ", the trace says " + traced_type.str());
          }
          context.bind(output, id);
        }
        continue;
      }
      if (!fold_constant(context, *node)) throw Unsupported("no IR entry");
    } catch (const Unsupported& error) {
      if (reported.emplace(kind, error.what()).second) {
        result.breaks.push_back({kind, error.what(), nearest_module(node, parameter_names)});
      }
    } catch (const ir::IrError& error) {
      // A builder that does not agree with the trace: still a break, never a wrong program.
      if (reported.emplace(kind, error.what()).second) {
        result.breaks.push_back({kind, std::string("import error: ") + error.what(), nearest_module(node, parameter_names)});
      }
    }
  }

  for (const auto& [index, value] : context.buffer_updates()) {
    const StepInput& input = captured.inputs[static_cast<std::size_t>(index)];
    if (input.kind != StepInputKind::buffer) {
      result.breaks.push_back({"in-place update", "of the " + std::string(input.kind == StepInputKind::parameter ? "parameter" : "batch tensor") +
                                                      " " + input.name + "; only buffers may change inside a step",
                               input.name});
    }
  }
  if (!result.breaks.empty()) return result;
  if (traced.outputs().size() != 1) throw ir::IrError("import: the traced step must return exactly the loss");
  result.graph.mark_output(context.tensor(traced.outputs()[0]));
  for (const auto& [index, value] : std::map<int, ValueId>(context.buffer_updates().begin(), context.buffer_updates().end())) {
    result.updated_buffers.push_back(index);
    result.graph.mark_output(value);
  }
  ir::verify(result.graph);
  return result;
}

}  // namespace trainc
