#include "trainc/compile/codegen/kernel_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "trainc/compile/passes/memory_plan.h"

namespace trainc::codegen {

using ir::DType;
using ir::Op;
using ir::ValueId;

const char* compute_type(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return "double";
    case DType::i64:
      return "int64_t";
    case DType::b8:
      return "bool";
    default:
      return "float";
  }
}

// Bool as bytes: GCC does not vectorize loads of bool.
const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::b8:
      return "uint8_t";
    case DType::bf16:
    case DType::f16:
      return "uint16_t";
    default:
      return compute_type(dtype);
  }
}

namespace {

// `value` rounded to nearest even at the precision of a 16-bit float type (bf16: 8 significant
// bits, f16: 11), as a constant of that dtype holds it.
double representable(double value, DType dtype) {
  if (!std::isfinite(value) || value == 0.0) return value;
  const int bits = dtype == DType::bf16 ? 8 : 11;
  int exponent = 0;
  const double mantissa = std::frexp(static_cast<double>(static_cast<float>(value)), &exponent);
  return std::ldexp(std::nearbyint(std::ldexp(mantissa, bits)), exponent - bits);
}

}  // namespace

std::string RenderedProgram::text() const {
  std::string all = prelude;
  for (const RenderedKernel& kernel : kernels) all += kernel.source;
  return all;
}

std::vector<std::string> RenderedProgram::symbols() const {
  std::vector<std::string> names;
  for (const RenderedKernel& kernel : kernels) names.push_back(kernel.symbol);
  for (const RenderedKernel& kernel : kernels) {
    if (!kernel.finish_symbol.empty()) names.push_back(kernel.finish_symbol);
  }
  return names;
}

std::vector<int> RenderedProgram::finish_launches() const {
  std::vector<int> launches;
  int next = static_cast<int>(kernels.size());
  for (const RenderedKernel& kernel : kernels) launches.push_back(kernel.finish_symbol.empty() ? -1 : next++);
  return launches;
}

bool KernelLayout::DomainAccess::operator<(const DomainAccess& o) const {
  return std::tie(base, strides, offset) < std::tie(o.base, o.strides, o.offset);
}

KernelLayout::KernelLayout(const ir::Graph& graph, const Schedule& schedule, int index, TargetSpelling spelling)
    : graph_(graph),
      schedule_(schedule),
      kernel_(schedule.kernels[static_cast<std::size_t>(index)]),
      index_(index),
      spelling_(std::move(spelling)) {
  collect();
  coalesce();
}

std::string KernelLayout::literal(double value, DType dtype) const {
  if (dtype == DType::b8) return value != 0 ? "true" : "false";
  if (dtype == DType::i64) return "INT64_C(" + std::to_string(static_cast<int64_t>(value)) + ")";
  const bool single = dtype != DType::f64;
  if (dtype == DType::bf16 || dtype == DType::f16) value = representable(value, dtype);  // the constant the IR means
  if (std::isnan(value)) return single ? spelling_.nan_f : spelling_.nan_d;
  if (std::isinf(value)) return std::string(value < 0 ? "(-" : "(") + (single ? spelling_.infinity_f : spelling_.infinity_d) + ")";
  char text[64];
  std::snprintf(text, sizeof text, single ? "%.9gf" : "%.17g", single ? static_cast<double>(static_cast<float>(value)) : value);
  std::string s = text;
  if (s.find_first_of(".en") == std::string::npos) s.insert(single ? s.size() - 1 : s.size(), ".0");
  return s;
}

std::string KernelLayout::describe() const {
  std::ostringstream text;
  text << (kernel_.has_reduction() ? "reduction" : "pointwise") << " over [";
  for (std::size_t i = 0; i < kernel_.domain.size(); ++i) text << (i ? ", " : "") << kernel_.domain[i];
  text << "]";
  if (kernel_.has_reduction()) text << ", reducing from dim " << kernel_.reduce_from;
  text << ";";
  for (ValueId m : kernel_.members) text << " " << ir::op_name(graph_.node(m).op);
  // What it moves at most (each base read whole, each store written once): a profile divides
  // it by the kernel's time to see how near memory bandwidth the kernel runs.
  const auto bytes = [&](ValueId v) { return graph_.type(v).numel() * dtype_bytes(graph_.type(v).dtype); };
  int64_t read = 0, written = 0;
  for (ValueId base : bases_) read += bytes(base);
  for (ValueId store : kernel_.stores) written += bytes(store);
  char moved[96];
  std::snprintf(moved, sizeof moved, "; reads %.2f MB, writes %.2f MB", static_cast<double>(read) / 1e6, static_cast<double>(written) / 1e6);
  text << moved;
  return text.str();
}

int KernelLayout::add_access(DomainAccess access, bool read) {
  const auto found = access_index_.find(access);
  if (found != access_index_.end()) return found->second;
  const ir::Op base_op = graph_.node(access.base).op;
  if (read && base_op != Op::constant && base_op != Op::iota && std::find(bases_.begin(), bases_.end(), access.base) == bases_.end()) {
    bases_.push_back(access.base);
  }
  accesses_.push_back(access);
  access_index_[access] = static_cast<int>(accesses_.size()) - 1;
  return static_cast<int>(accesses_.size()) - 1;
}

// The access of `value` read by a member shaped `shape` with role `role`, over the domain.
KernelLayout::DomainAccess KernelLayout::domain_access(ValueId value, const std::vector<int64_t>& shape, KernelRole role) const {
  const StridedAccess& own = schedule_.accesses[static_cast<std::size_t>(value)];
  StridedAccess broadcast = broadcast_access(own, graph_.type(value).shape, shape);
  std::vector<int64_t> strides = broadcast.strides;
  if (role == KernelRole::row) {
    strides.resize(static_cast<std::size_t>(rank()), 0);  // a row shape without kept dims gets its columns back
    for (int d = kernel_.reduce_from; d < rank(); ++d) strides[static_cast<std::size_t>(d)] = 0;
  }
  return {broadcast.base, strides, broadcast.offset};
}

void KernelLayout::collect() {
  for (std::size_t i = 0; i < kernel_.members.size(); ++i) role_[kernel_.members[i]] = kernel_.roles[i];
  for (ValueId m : kernel_.members) {
    const ir::Node& node = graph_.node(m);
    std::vector<Operand> ops;
    for (ValueId in : node.inputs) {
      if (is_member(in)) {
        ops.push_back({in, -1, in});
        continue;
      }
      // A reduction (a column sum too) reads its input over the whole domain; everything else at
      // its own shape.
      const bool reduction = ir::op_kind(node.op) == ir::OpKind::kReduction || role(m) == KernelRole::column;
      const KernelRole as = reduction ? KernelRole::element : role(m);
      ops.push_back({-1, add_access(domain_access(in, reduction ? kernel_.domain : node.type.shape, as)), in});
    }
    operands_[m] = ops;
  }
  for (ValueId store : written_stores()) {
    std::vector<int64_t> strides = contiguous_strides(kernel_.domain);
    if (role(store) == KernelRole::row) {
      std::vector<int64_t> rows(kernel_.domain.begin(), kernel_.domain.begin() + kernel_.reduce_from);
      strides = contiguous_strides(rows);
      strides.resize(static_cast<std::size_t>(rank()), 0);
    }
    store_access_[store] = add_access({store, strides, 0}, false);
  }
}

// Drops size-1 dimensions and merges neighbours every access walks as one (as TensorIterator
// does), within rows and within columns. A pointwise kernel's columns are its last dimension.
void KernelLayout::coalesce() {
  struct Dim {
    int64_t size;
    std::vector<int64_t> strides;  // per access
  };
  const auto merge = [&](int from, int to) {
    std::vector<Dim> dims;
    for (int d = from; d < to; ++d) {
      const int64_t size = kernel_.domain[static_cast<std::size_t>(d)];
      if (size == 1) continue;
      Dim dim{size, {}};
      for (const DomainAccess& a : accesses_) dim.strides.push_back(a.strides[static_cast<std::size_t>(d)]);
      if (!dims.empty()) {
        Dim& last = dims.back();
        bool joins = true;
        for (std::size_t a = 0; a < accesses_.size(); ++a) joins = joins && last.strides[a] == dim.strides[a] * dim.size;
        if (joins) {
          last.size *= dim.size;
          last.strides = dim.strides;
          continue;
        }
      }
      dims.push_back(dim);
    }
    return dims;
  };
  const auto unpack = [&](const std::vector<Dim>& dims, std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides) {
    strides.assign(accesses_.size(), {});
    for (const Dim& dim : dims) {
      sizes.push_back(dim.size);
      for (std::size_t a = 0; a < accesses_.size(); ++a) strides[a].push_back(dim.strides[a]);
    }
  };
  std::vector<Dim> rows, columns;
  if (kernel_.has_reduction() || kernel_.column_split > 0) {
    const int split = kernel_.has_reduction() ? kernel_.reduce_from : kernel_.column_split;
    rows = merge(0, split);
    columns = merge(split, rank());
  } else {
    rows = merge(0, rank());
    if (!rows.empty()) {
      columns.push_back(rows.back());
      rows.pop_back();
    }
  }
  if (columns.empty()) columns.push_back({1, std::vector<int64_t>(accesses_.size(), 0)});
  unpack(rows, row_sizes_, row_strides_);
  unpack(columns, column_sizes_, column_strides_);
}

int64_t KernelLayout::rows() const {
  int64_t n = 1;
  for (int64_t s : row_sizes_) n *= s;
  return n;
}

int64_t KernelLayout::columns() const {
  int64_t n = 1;
  for (int64_t s : column_sizes_) n *= s;
  return n;
}

int64_t KernelLayout::index_extent() const {
  int64_t extent = rows() * columns();
  for (std::size_t a = 0; a < accesses_.size(); ++a) {
    int64_t last = accesses_[a].offset;
    for (std::size_t d = 0; d < row_sizes_.size(); ++d) last += (row_sizes_[d] - 1) * std::abs(row_strides_[a][d]);
    for (std::size_t c = 0; c < column_sizes_.size(); ++c) last += (column_sizes_[c] - 1) * std::abs(column_strides_[a][c]);
    extent = std::max(extent, last + 1);
  }
  return extent;
}

std::string KernelLayout::index(int a, bool in_columns) const {
  std::string text = "o" + std::to_string(a);
  if (!in_columns) return text;
  for (std::size_t c = 0; c < column_sizes_.size(); ++c) {
    const int64_t stride = column_strides_[static_cast<std::size_t>(a)][c];
    if (stride == 1) text += " + j" + std::to_string(c);
    else if (stride != 0) text += " + j" + std::to_string(c) + " * " + std::to_string(stride);
  }
  return text;
}

std::string KernelLayout::read(const Operand& operand, bool in_columns) const {
  if (operand.member >= 0) return "v" + std::to_string(operand.member);
  if (in_columns) {
    const auto loaded = register_reads_.find(operand.access);
    if (loaded != register_reads_.end()) return loaded->second;
  }
  const DomainAccess& access = accesses_[static_cast<std::size_t>(operand.access)];
  const ir::Node& base = graph_.node(access.base);
  const DType dtype = graph_.type(operand.value).dtype;
  if (base.op == Op::constant) return literal(base.attrs.scalar, dtype);
  if (base.op == Op::iota) return std::string("static_cast<") + compute_type(dtype) + ">(" + index(operand.access, in_columns) + ")";
  const std::string element = pointer(access.base) + "[" + index(operand.access, in_columns) + "]";
  if (dtype == DType::b8) return "(" + element + " != 0)";
  return dtype == DType::bf16 ? "k_bf16_load(" + element + ")" : element;
}

std::string KernelLayout::expression(ValueId m, bool in_columns) const {
  const ir::Node& node = graph_.node(m);
  const std::vector<Operand>& ops = operands_.at(m);
  std::vector<std::string> x;
  for (const Operand& op : ops) x.push_back(read(op, in_columns));
  const std::string t = compute_type(node.type.dtype);
  switch (node.op) {
    case Op::neg: return "(-" + x[0] + ")";
    case Op::exp: return "k_exp(" + x[0] + ")";
    case Op::log: return "k_log(" + x[0] + ")";
    case Op::tanh: return "k_tanh(" + x[0] + ")";
    case Op::erf: return "k_erf(" + x[0] + ")";
    case Op::sqrt: return "k_sqrt(" + x[0] + ")";
    case Op::rsqrt: return "(" + t + "(1) / k_sqrt(" + x[0] + "))";
    case Op::reciprocal: return "(" + t + "(1) / " + x[0] + ")";
    case Op::relu: return "(" + x[0] + " < 0 ? " + t + "(0) : " + x[0] + ")";
    case Op::sigmoid: return "(" + t + "(1) / (" + t + "(1) + k_exp(-" + x[0] + ")))";
    case Op::detach: return x[0];
    case Op::cast:
      if (node.type.dtype == DType::b8) return "(" + x[0] + " != 0)";
      if (node.type.dtype == DType::bf16) return "k_round_bf16(static_cast<float>(" + x[0] + "))";
      return "static_cast<" + t + ">(" + x[0] + ")";
    case Op::add: return "(" + x[0] + " + " + x[1] + ")";
    case Op::sub: return "(" + x[0] + " - " + x[1] + ")";
    case Op::mul: return "(" + x[0] + " * " + x[1] + ")";
    case Op::div: return "(" + x[0] + " / " + x[1] + ")";
    case Op::pow: {
      const Operand& e = ops[1];
      if (e.member < 0 && graph_.node(accesses_[static_cast<std::size_t>(e.access)].base).op == Op::constant &&
          graph_.node(accesses_[static_cast<std::size_t>(e.access)].base).attrs.scalar == 2.0) {
        return "(" + x[0] + " * " + x[0] + ")";
      }
      return "k_pow(" + x[0] + ", " + x[1] + ")";
    }
    case Op::maximum: return "k_max<" + t + ">(" + x[0] + ", " + x[1] + ")";
    case Op::gt: return "(" + x[0] + " > " + x[1] + ")";
    case Op::eq: return "(" + x[0] + " == " + x[1] + ")";
    case Op::where: return "(" + x[0] + " ? " + x[1] + " : " + x[2] + ")";
    default:
      throw ir::IrError(std::string("kernel renderer: no expression for ") + ir::op_name(node.op));
  }
}

std::vector<ValueId> KernelLayout::element_closure(const std::vector<ValueId>& roots) const {
  std::set<ValueId> needed;
  std::vector<ValueId> stack = roots;
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (!is_member(v) || role(v) != KernelRole::element || !needed.insert(v).second) continue;
    for (ValueId in : graph_.node(v).inputs) stack.push_back(in);
  }
  std::vector<ValueId> ordered;
  for (ValueId m : kernel_.members) {
    if (needed.count(m)) ordered.push_back(m);
  }
  return ordered;
}

void KernelLayout::emit_elements(std::ostream& out, const std::string& indent, const std::vector<ValueId>& members) const {
  for (ValueId m : members) out << indent << "const " << compute_type(graph_.type(m).dtype) << " v" << m << " = " << expression(m, true) << ";\n";
}

void KernelLayout::store(std::ostream& out, const std::string& indent, ValueId m, bool in_columns) const {
  const std::string target = "s" + std::to_string(m) + "[" + index(store_access_.at(m), in_columns) + "]";
  const std::string value = "v" + std::to_string(m);
  const DType dtype = graph_.type(m).dtype;
  out << indent << target << " = "
      << (dtype == DType::bf16 ? "k_bf16_store(" + value + ")" : dtype == DType::b8 ? "static_cast<uint8_t>(" + value + ")" : value) << ";\n";
}

void KernelLayout::emit_row_offsets(std::ostream& out, const std::string& indent, const std::string& row, const std::string& index_type) const {
  if (row_sizes_.empty()) {
    for (std::size_t a = 0; a < accesses_.size(); ++a) out << indent << "const " << index_type << " o" << a << " = " << accesses_[a].offset << ";\n";
    return;
  }
  // The row's index in each kept dimension, then each access's row offset.
  int64_t inner = 1;
  for (std::size_t d = row_sizes_.size(); d-- > 0;) {
    out << indent << "const " << index_type << " i" << d << " = (" << row << " / " << inner << ") % " << row_sizes_[d] << ";\n";
    inner *= row_sizes_[d];
  }
  for (std::size_t a = 0; a < accesses_.size(); ++a) {
    out << indent << "const " << index_type << " o" << a << " = " << accesses_[a].offset;
    for (std::size_t d = 0; d < row_sizes_.size(); ++d) {
      if (row_strides_[a][d] != 0) out << " + i" << d << " * " << row_strides_[a][d];
    }
    out << ";\n";
  }
}

std::map<ValueId, int> KernelLayout::stages(int& last_stage) const {
  std::map<ValueId, int> stage;
  last_stage = 0;
  for (ValueId m : kernel_.members) {
    const ir::Node& node = graph_.node(m);
    int s = 0;
    for (ValueId in : node.inputs) {
      if (is_member(in)) s = std::max(s, stage[in]);
    }
    if (row_reduction(m)) {
      s += 1;
      last_stage = std::max(last_stage, s);
    }
    stage[m] = s;
  }
  return stage;
}

std::vector<ValueId> KernelLayout::reductions_in_stage(const std::map<ValueId, int>& stage, int s) const {
  std::vector<ValueId> reductions;
  for (ValueId m : kernel_.members) {
    if (stage.at(m) == s && row_reduction(m)) reductions.push_back(m);
  }
  return reductions;
}

void KernelLayout::emit_row_values(std::ostream& out, const std::string& indent, const std::map<ValueId, int>& stage, int s) const {
  for (ValueId m : kernel_.members) {
    if (role(m) == KernelRole::row && stage.at(m) == s && ir::op_kind(graph_.node(m).op) != ir::OpKind::kReduction) {
      out << indent << "const " << compute_type(graph_.type(m).dtype) << " v" << m << " = " << expression(m, false) << ";\n";
    }
  }
}

std::vector<ValueId> KernelLayout::stores_of(KernelRole wanted) const {
  std::vector<ValueId> stores;
  for (ValueId m : kernel_.stores) {
    if (role(m) == wanted) stores.push_back(m);
  }
  return stores;
}

std::string KernelLayout::identity(ValueId reduction) const {
  const ir::Node& node = graph_.node(reduction);
  return node.op == Op::sum ? std::string(compute_type(node.type.dtype)) + "(0)" : literal(-INFINITY, node.type.dtype);
}

std::string KernelLayout::accumulate(ValueId reduction) const {
  const std::string acc = "acc" + std::to_string(reduction), x = read(operands_.at(reduction)[0], true);
  if (graph_.node(reduction).op == Op::sum) return acc + " += " + x + ";";
  return acc + " = " + x + " > " + acc + " ? " + x + " : " + acc + ";";
}

std::vector<ValueId> KernelLayout::column_members() const {
  std::vector<ValueId> columns;
  for (ValueId m : kernel_.members) {
    if (role(m) == KernelRole::column) columns.push_back(m);
  }
  return columns;
}

std::vector<ValueId> KernelLayout::written_stores() const {
  std::vector<ValueId> stores;
  for (ValueId store : kernel_.stores) {
    if (role(store) != KernelRole::column) stores.push_back(store);
  }
  return stores;
}

bool KernelLayout::row_reduction(ValueId m) const {
  return role(m) != KernelRole::column && ir::op_kind(graph_.node(m).op) == ir::OpKind::kReduction;
}

void KernelLayout::record_arguments(RenderedKernel& kernel) const {
  kernel.arguments = bases_;
  kernel.reads = static_cast<int>(bases_.size());
  const std::vector<ValueId> stores = written_stores();
  kernel.arguments.insert(kernel.arguments.end(), stores.begin(), stores.end());
}

std::string KernelLayout::parameters(const std::string& restrict_keyword) const {
  std::ostringstream out;
  std::string separator;
  for (ValueId base : bases_) {
    out << separator << "const " << storage_type(graph_.type(base).dtype) << "* " << restrict_keyword << " " << pointer(base);
    separator = ", ";
  }
  for (ValueId store : written_stores()) {
    out << separator << storage_type(graph_.type(store).dtype) << "* " << restrict_keyword << " s" << store;
    separator = ", ";
  }
  return out.str();
}

}  // namespace trainc::codegen
