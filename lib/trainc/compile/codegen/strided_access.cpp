#include "trainc/compile/codegen/strided_access.h"

namespace trainc::codegen {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(shape[i], 1);
  return strides;
}

std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& new_shape) {
  // ATen's computeStride: walk both shapes from the innermost dimension, matching chunks of
  // dimensions that are contiguous with each other in memory.
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0 || shape.empty()) return contiguous_strides(new_shape);
  std::vector<int64_t> result(new_shape.size(), 1);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    const auto d = static_cast<std::size_t>(tensor_d);
    tensor_numel *= shape[d];
    if (tensor_d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[static_cast<std::size_t>(view_d)] == 1)) {
        result[static_cast<std::size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[static_cast<std::size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return result;
}

StridedAccess broadcast_access(const StridedAccess& access, const std::vector<int64_t>& shape, const std::vector<int64_t>& target) {
  StridedAccess result{access.base, std::vector<int64_t>(target.size(), 0), access.offset};
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == target[lead + i]) result.strides[lead + i] = access.strides[i];
  }
  return result;
}

std::vector<StridedAccess> strided_accesses(const ir::Graph& graph) {
  std::vector<StridedAccess> accesses;
  accesses.reserve(static_cast<std::size_t>(graph.size()));
  for (ir::ValueId id = 0; id < graph.size(); ++id) {
    const ir::Node& node = graph.node(id);
    const std::vector<int64_t>& shape = node.type.shape;
    StridedAccess own{id, contiguous_strides(shape), 0};
    if (ir::op_kind(node.op) != ir::OpKind::kView) {
      accesses.push_back(own);
      continue;
    }
    const StridedAccess& in = accesses[static_cast<std::size_t>(node.inputs[0])];
    const std::vector<int64_t>& in_shape = graph.type(node.inputs[0]).shape;
    const std::vector<int64_t>& ints = node.attrs.ints;
    StridedAccess view = in;
    switch (node.op) {
      case ir::Op::permute:
        for (std::size_t i = 0; i < ints.size(); ++i) view.strides[i] = in.strides[static_cast<std::size_t>(ints[i])];
        break;
      case ir::Op::expand:
        view = broadcast_access(in, in_shape, shape);
        break;
      case ir::Op::slice: {
        const auto dim = static_cast<std::size_t>(ints[0] < 0 ? ints[0] + static_cast<int64_t>(in_shape.size()) : ints[0]);
        view.offset += ints[1] * in.strides[dim];
        view.strides[dim] *= ints[3];
        break;
      }
      case ir::Op::reshape: {
        const auto strides = view_strides(in_shape, in.strides, shape);
        if (!strides) {
          view = own;  // ATen copies: the result owns its memory
        } else {
          view.strides = *strides;
        }
        break;
      }
      default:
        throw ir::IrError(std::string("strided_accesses: no rule for view ") + ir::op_name(node.op));
    }
    accesses.push_back(view);
  }
  return accesses;
}

}  // namespace trainc::codegen
