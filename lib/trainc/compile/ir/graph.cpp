#include "trainc/compile/ir/graph.h"

#include <sstream>

namespace trainc::ir {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::b8: return "b8";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

bool is_half_precision(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::b8:
      return 1;
  }
  return 8;
}

namespace {

// The packed buffers' parts start on 64-byte boundaries (aligned loads, aligned GEMM operands).
constexpr int64_t kPartAlignment = 64;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The first element at or after `elements` elements of `bytes` bytes that starts a 64-byte boundary.
int64_t aligned_offset(int64_t elements, int64_t bytes) { return round_up(elements * bytes, kPartAlignment) / bytes; }

}  // namespace

int64_t padded_vocabulary(int64_t vocabulary) { return round_up(vocabulary, 64); }

bool linear_cross_entropy_layout(int64_t rows, int64_t width, int64_t vocabulary, int64_t x_bytes, int64_t loss_bytes,
                                 LinearCrossEntropyLayout& layout) {
  if ((rows * loss_bytes) % x_bytes != 0) return false;
  layout.loss_elements = rows * loss_bytes / x_bytes;
  layout.dlogits_offset = aligned_offset(layout.loss_elements, x_bytes);
  layout.padded_vocabulary = padded_vocabulary(vocabulary);
  layout.weight_offset = aligned_offset(layout.dlogits_offset + rows * layout.padded_vocabulary, x_bytes);
  layout.total = layout.weight_offset + (vocabulary == layout.padded_vocabulary ? 0 : layout.padded_vocabulary * width);
  return true;
}

HeadGradients head_gradients(const Attributes& attrs) {
  if (attrs.ints.empty()) return HeadGradients::both;
  switch (attrs.ints[0]) {
    case 0: return HeadGradients::input;
    case 1: return HeadGradients::weight;
    default: return HeadGradients::weight_float;
  }
}

bool embedding_grad_add_in_place(const Attributes& attrs) { return attrs.ints.size() == 2 && attrs.ints[1] == 1; }

bool attention_grad_sums_layout(const std::vector<int64_t>& q_shape, int64_t q_bytes, AttentionGradSumsLayout& layout) {
  if (q_shape.size() != 4) return false;
  const int64_t columns = 3 * q_shape[1] * q_shape[3];
  if ((columns * 4) % q_bytes != 0) return false;
  layout.grads_elements = columns * q_shape[0] * q_shape[2];
  layout.sums_offset = aligned_offset(layout.grads_elements, q_bytes);
  layout.sums_elements = columns * 4 / q_bytes;
  layout.total = layout.sums_offset + layout.sums_elements;
  return true;
}

int64_t TensorType::numel() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

std::string TensorType::str() const {
  std::ostringstream text;
  text << dtype_name(dtype) << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << "]";
  return text.str();
}

Graph Graph::from_nodes(std::vector<Node> nodes, std::vector<ValueId> outputs) {
  Graph graph;
  graph.nodes_ = std::move(nodes);
  graph.outputs_ = std::move(outputs);
  return graph;
}

ValueId Graph::add_input(const std::string& name, TensorType type) {
  Node node;
  node.op = Op::input;
  node.type = std::move(type);
  node.name = name;
  nodes_.push_back(std::move(node));
  return size() - 1;
}

ValueId Graph::add(Op op, std::vector<ValueId> inputs, Attributes attrs) {
  if (op == Op::input) throw IrError("Graph::add: use add_input for graph inputs");
  std::vector<TensorType> types;
  for (ValueId input : inputs) types.push_back(node(input).type);
  Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  try {
    node.type = infer_type(op, types, node.attrs);
  } catch (const IrError& error) {
    throw IrError("%" + std::to_string(size()) + " = " + op_name(op) + ": " + error.what());
  }
  nodes_.push_back(std::move(node));
  return size() - 1;
}

void Graph::mark_output(ValueId value) {
  node(value);  // checks the id
  outputs_.push_back(value);
}

const Node& Graph::node(ValueId value) const {
  if (value < 0 || value >= size()) throw IrError("no value %" + std::to_string(value));
  return nodes_[static_cast<std::size_t>(value)];
}

void verify(const Graph& graph) {
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const std::string where = "%" + std::to_string(id) + " = " + op_name(node.op);
    const int arity = op_arity(node.op);
    if (arity >= 0 && static_cast<int>(node.inputs.size()) != arity) {
      throw IrError(where + ": " + std::to_string(node.inputs.size()) + " inputs, the op takes " + std::to_string(arity));
    }
    std::vector<TensorType> types;
    for (ValueId input : node.inputs) {
      if (input < 0 || input >= id) throw IrError(where + ": input %" + std::to_string(input) + " is not defined before use");
      types.push_back(graph.node(input).type);
    }
    if (node.op == Op::input) continue;
    TensorType expected;
    try {
      expected = infer_type(node.op, types, node.attrs);
    } catch (const IrError& error) {
      throw IrError(where + ": " + error.what());
    }
    if (expected != node.type) throw IrError(where + ": typed " + node.type.str() + ", its inputs give " + expected.str());
  }
  for (ValueId output : graph.outputs()) {
    if (output < 0 || output >= graph.size()) throw IrError("graph output %" + std::to_string(output) + " does not exist");
  }
}

std::string to_text(const Graph& graph) {
  std::ostringstream text;
  std::vector<std::string> inputs;
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::input) inputs.push_back("%" + std::to_string(id) + ": " + node.type.str() + " " + node.name);
  }
  text << "graph(";
  for (std::size_t i = 0; i < inputs.size(); ++i) text << (i ? ", " : "") << inputs[i];
  text << ") {\n";
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::input) continue;
    text << "  %" << id << ": " << node.type.str() << " = " << op_name(node.op) << "(";
    for (std::size_t i = 0; i < node.inputs.size(); ++i) text << (i ? ", " : "") << "%" << node.inputs[i];
    text << ")";
    const Attributes& a = node.attrs;
    std::vector<std::string> details;
    if (!a.ints.empty()) {
      std::string ints = "[";
      for (std::size_t i = 0; i < a.ints.size(); ++i) ints += (i ? ", " : "") + std::to_string(a.ints[i]);
      details.push_back("ints=" + ints + "]");
    }
    if (node.op == Op::constant) {
      std::ostringstream scalar;
      scalar << a.scalar;
      details.push_back("value=" + scalar.str());
    }
    if (a.keepdim) details.push_back("keepdim");
    if (a.causal) details.push_back("causal");
    if (!details.empty()) {
      text << " {";
      for (std::size_t i = 0; i < details.size(); ++i) text << (i ? ", " : "") << details[i];
      text << "}";
    }
    text << "\n";
  }
  text << "  return (";
  for (std::size_t i = 0; i < graph.outputs().size(); ++i) text << (i ? ", " : "") << "%" << graph.outputs()[i];
  text << ")\n}\n";
  return text.str();
}

}  // namespace trainc::ir
