// defines: DType, is_half_precision, dtype_bytes, TensorType, ValueId, Attributes, Node, Graph, IrError, LinearCrossEntropyLayout,
//          linear_cross_entropy_layout, HeadGradients, head_gradients, embedding_grad_add_in_place,
//          AttentionGradSumsLayout, attention_grad_sums_layout
//
// The compile planner's IR: a graph in SSA form where every node produces one tensor value, and
// every value carries its shape and dtype. Nodes are appended in topological order (inputs
// before users), so a value's id is its node's position. Graph::add infers the result type from
// the op's shape rule and refuses an ill-typed node at once; verify() re-checks a whole graph
// between planner stages.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainc/compile/ir/op_table.h"

namespace trainc::ir {

enum class DType : uint8_t { f32, f64, bf16, f16, i64, b8 };
const char* dtype_name(DType dtype);
bool is_floating(DType dtype);
bool is_half_precision(DType dtype);  // bf16, f16: stored in 16 bits, computed in float32
int64_t dtype_bytes(DType dtype);

struct TensorType {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  std::string str() const;  // "f32[8, 16]"
  bool operator==(const TensorType& other) const { return dtype == other.dtype && shape == other.shape; }
  bool operator!=(const TensorType& other) const { return !(*this == other); }
};

using ValueId = int32_t;

// Per-op parameters; each op reads only the fields its shape rule documents (shape_rules.cpp).
struct Attributes {
  std::vector<int64_t> ints;  // reductions: axes; reshape/expand/constant/bernoulli: shape;
                              // permute: order; slice: {dim, start, end, step}; iota: {n};
                              // the extern ops: see shape_rules.cpp
  double scalar = 0.0;        // constant: the value; bernoulli: P(1); attention: scale (0: 1/sqrt(dim))
  bool keepdim = false;       // reductions
  DType dtype = DType::f32;   // cast and constant: the result dtype
  bool causal = false;        // attention
};

struct Node {
  Op op = Op::input;
  std::vector<ValueId> inputs;
  Attributes attrs;
  TensorType type;
  std::string name;  // graph inputs: the parameter or batch name
};

// A malformed graph: a bug in the stage that built it, reported with the node and the rule broken.
class IrError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class Graph {
 public:
  // Assembles a graph from nodes as given, unchecked: for passes that rewrite node lists; run
  // verify() on the result.
  static Graph from_nodes(std::vector<Node> nodes, std::vector<ValueId> outputs);

  ValueId add_input(const std::string& name, TensorType type);
  ValueId add(Op op, std::vector<ValueId> inputs, Attributes attrs = {});
  void mark_output(ValueId value);

  const Node& node(ValueId value) const;
  const TensorType& type(ValueId value) const { return node(value).type; }
  int32_t size() const { return static_cast<int32_t>(nodes_.size()); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }

 private:
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
};

// The result type of `op` applied to `inputs` (IrError when the rule does not hold).
TensorType infer_type(Op op, const std::vector<TensorType>& inputs, const Attributes& attrs);

// The one buffer linear_cross_entropy_and_dlogits returns, in x's dtype (an IR value has one dtype):
// the rows' losses, as the bytes of the loss dtype (read back through a bitcast), then from a 64-byte
// boundary each row's gradient of its loss over its logits, rows of the vocabulary rounded up to a
// multiple of 64 (aligned GEMM operands; the padding columns hold 0), then from a 64-byte boundary
// the weight [P, C] the logits were computed with: its V rows, then zero rows up to the padded
// vocabulary P (the backward's x gradient reads it, where it would otherwise pad the weight again);
// nothing when V is P already (the weight itself serves).
struct LinearCrossEntropyLayout {
  int64_t loss_elements = 0;      // x-dtype elements holding the losses' bytes
  int64_t dlogits_offset = 0;     // where the gradient rows start, in elements
  int64_t padded_vocabulary = 0;  // the gradient's row length
  int64_t weight_offset = 0;      // where the padded weight starts, in elements
  int64_t total = 0;              // elements in all
  bool keeps_weight() const { return total > weight_offset; }
};

// A language model head's vocabulary rounded up to a multiple of 64: the rows of its padded weight
// and of its logit gradients (aligned GEMM operands on a GPU).
int64_t padded_vocabulary(int64_t vocabulary);

// The layout for `rows` rows of `width` features over `vocabulary` words; false when the losses'
// bytes do not fill whole elements of x's dtype (float64 x, float32 losses, an odd number of rows).
bool linear_cross_entropy_layout(int64_t rows, int64_t width, int64_t vocabulary, int64_t x_bytes, int64_t loss_bytes,
                                 LinearCrossEntropyLayout& layout);

// Which gradients a linear_cross_entropy_grad_from_dlogits node makes, from its attrs.ints: none
// for both (x's, then the weight's), {0} for x's alone, {1} for the weight's alone
// (passes/head_gradients_apart: two steps, so that the weight's need not hold up x's), {2} for the
// weight's alone in float32, the GEMM's accumulator not rounded to x's dtype
// (passes/head_weight_grad_to_float, as matmul_to_float is to a cast matmul).
enum class HeadGradients { both, input, weight, weight_float };
HeadGradients head_gradients(const Attributes& attrs);

// Whether an embedding_grad_add node adds into its base's own memory (attrs.ints {vocab, 1}).
bool embedding_grad_add_in_place(const Attributes& attrs);

// The one buffer attention_grad_and_bias_sums returns, in q's dtype: dq, dk and dv stacked as
// attention_grad's [3, B, H, T, D] laid out as [B, T, 3, H, D] (a fused q-k-v projection's output
// gradient, rows of 3 * H * D), then from a 64-byte boundary the bytes of that gradient's float32
// column sums, [3 * H * D]: the projection's bias gradient.
struct AttentionGradSumsLayout {
  int64_t grads_elements = 0;  // 3 * B * H * T * D
  int64_t sums_offset = 0;     // where the column sums' bytes start, in elements
  int64_t sums_elements = 0;   // q-dtype elements holding 3 * H * D float32 values
  int64_t total = 0;
};

// The layout for q [B, H, T, D] with `q_bytes`-byte elements; false when the sums' bytes do not
// fill whole elements (float64 with an odd 3 * H * D).
bool attention_grad_sums_layout(const std::vector<int64_t>& q_shape, int64_t q_bytes, AttentionGradSumsLayout& layout);

// Checks SSA order, arity and every node's type against its shape rule; IrError naming the node.
void verify(const Graph& graph);

// Readable text, one node a line:  %2: f32[8, 4] = mul(%0, %1)
std::string to_text(const Graph& graph);

}  // namespace trainc::ir
