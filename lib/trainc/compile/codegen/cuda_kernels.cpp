#include "trainc/compile/codegen/cuda_kernels.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "trainc/compile/codegen/cuda_prelude.h"
#include "trainc/compile/optimizations.h"

namespace trainc::codegen {
namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;

const TargetSpelling kCudaSpelling{"__int_as_float(0x7f800000)", "__longlong_as_double(0x7ff0000000000000LL)",
                                   "__int_as_float(0x7fc00000)", "__longlong_as_double(0x7ff8000000000000LL)"};

constexpr int64_t kMaxGrid = 65536;  // blocks; grid-stride loops cover the rest
// A kernel with column members runs at most this many blocks, each over a share of the rows: each
// block's partial sums are a row of the workspace its finish adds up (GPT-2's [16384, 768] rows:
// 16 rows a block, 3 MB of partials per sum).
constexpr int64_t kColumnSumBlocks = 1024;
constexpr int kFinishBlock = 1024;  // 32 columns x 32 threads down the blocks' partial sums
// Rows a warp covers alone (a row-sized block of 32 threads), this many of them or more, run a row
// a warp, kWarpRowsPerBlock warps a block (warp_rows): the small GPT's 2,048 rows of 256 make 256
// blocks instead of 2,048 one-warp blocks (1,024 with column sums, two rows each in turn), and a
// kernel with column sums writes a block's partial sums once for its eight rows. From 1,024 rows
// the 128 blocks or more still spread over an H200's 132 SMs; fewer rows keep a block a row.
constexpr int64_t kWarpRowsLeast = 1024;
constexpr int kWarpRowsPerBlock = 8;
// A vectorized pointwise kernel's thread computes this many consecutive elements of a row, and
// moves each contiguous bf16 or float32 operand 16 bytes at a time.
constexpr int kVectorWidth = 8;

// Threads for a row of `units` (columns, or groups of kVectorWidth columns): about `per_thread`
// units each, a power of two between 32 and 1024.
int reduction_block(int64_t units, int per_thread) {
  int block = 32;
  while (block < 1024 && block * per_thread < units) block *= 2;
  return block;
}

class CudaKernelRenderer : KernelLayout {
 public:
  CudaKernelRenderer(const ir::Graph& graph, const Schedule& schedule, int index, std::string symbol, const LaunchShape& shape)
      : KernelLayout(graph, schedule, index, kCudaSpelling), symbol_(std::move(symbol)), shape_(shape) {}

  RenderedKernel render() {
    RenderedKernel result;
    result.symbol = symbol_;
    // 32-bit indices when every index fits, also one grid-stride step past the end (a loop
    // counter steps by at most kMaxGrid blocks of a pointwise block's threads before its test).
    index_type_ = index_extent() + kMaxGrid * shape_.pointwise_block < (int64_t{1} << 31) ? "int" : "int64_t";
    const std::vector<ValueId> sums = column_members();
    // A kernel with column sums walks rows, as a reduction does, even without a row reduction.
    const bool by_rows = kernel_.has_reduction() || !sums.empty();
    record_arguments(result);
    const bool vectorized = plan_vector_accesses(result);
    // A reduction's block is sized to the row: four columns a thread, or two groups of
    // kVectorWidth (a GPT-2 row of 768 gets 256 threads, or 64 threads of 16-byte loads).
    // With column sums, one column (or group) a thread in whole warps: each thread's sums are
    // registers the last pass over the row adds into, once per column it owns, and owning one
    // keeps that pass as lean as a pointwise kernel's.
    const int64_t units = vectorized ? columns() / kVectorWidth : columns();
    const int row_sized = vectorized ? reduction_block(units, 2) : reduction_block(units, 4);
    const int row_threads = !sums.empty() ? column_sum_block(units, shape_.reduction_scale_log2)
                            : by_rows     ? shape_.reduction_block(row_sized)
                                          : shape_.pointwise_block;
    // Rows a warp covers at the default launch shape run a row a warp under each shape that keeps
    // a warp a row. A kernel with column sums makes kWarpRowsPerBlock rows a block of partial sums
    // under every shape, also one of 64 threads a row (which takes the block's rows in turn): the
    // shapes max-autotune measures share the default's finish and workspace. (Its block's partial
    // sums pass through shared memory: at most 8 warps x 256 columns, 8 KB.)
    const int default_threads = !sums.empty() ? column_sum_block(units, 0) : row_sized;
    const bool rows_together = by_rows && default_threads == 32 && rows() >= kWarpRowsLeast && optimization_enabled(Optimization::warp_rows);
    warp_rows_ = rows_together && row_threads == 32;
    result.block = warp_rows_ ? row_threads * kWarpRowsPerBlock : row_threads;
    const int64_t threads = by_rows ? 0 : rows() * columns() / (vectorized ? kVectorWidth : 1);
    const bool eight_rows_a_block = warp_rows_ || (rows_together && !sums.empty());
    const int64_t work = by_rows ? (eight_rows_a_block ? (rows() + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock : rows())
                                 : (threads + shape_.pointwise_block - 1) / shape_.pointwise_block;
    result.grid = std::max<int64_t>(1, std::min(work, sums.empty() ? kMaxGrid : kColumnSumBlocks));
    std::string parameter_list = parameters("__restrict__");
    if (!sums.empty()) parameter_list += std::string(parameter_list.empty() ? "" : ", ") + "float* __restrict__ ws";
    std::ostringstream out;
    out << "\n// kernel " << index_ << ": " << describe() << "\n";
    out << "extern \"C\" __global__ void __launch_bounds__(" << result.block << ") " << result.symbol << "(" << parameter_list << ") {\n";
    out << "  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();\n";
    if (by_rows) {
      reduction_body(out, row_threads, vectorized, result.grid);
    } else if (vectorized) {
      vectorized_pointwise_body(out);
    } else {
      pointwise_body(out);
    }
    out << "}\n";
    if (!sums.empty()) {
      result.finish_outputs = sums;
      result.workspace_floats = static_cast<int64_t>(sums.size()) * result.grid * columns();
      result.finish_symbol = result.symbol + "_finish";
      result.finish_block = kFinishBlock;
      result.finish_grid = static_cast<int64_t>(sums.size()) * ((columns() + 31) / 32);
      finish_kernel(out, result);
    }
    result.source = out.str();
    return result;
  }

 private:
  // j0, j1, ... of the flat column index `flat`, row-major over the column dimensions.
  void emit_column_indices(std::ostream& out, const std::string& indent, const std::string& flat) const {
    if (column_sizes_.size() == 1) {
      out << indent << "const " << index_type_ << " j0 = " << flat << ";\n";
      return;
    }
    out << indent << index_type_ << " rest = " << flat << ";\n";
    for (std::size_t c = column_sizes_.size(); c-- > 1;) {
      out << indent << "const " << index_type_ << " j" << c << " = rest % " << column_sizes_[c] << ";\n";
      out << indent << "rest /= " << column_sizes_[c] << ";\n";
    }
    out << indent << "const " << index_type_ << " j0 = rest;\n";
  }

  void pointwise_body(std::ostream& out) const {
    const std::string t = index_type_;
    out << "  for (" << t << " e = blockIdx.x * " << shape_.pointwise_block << " + threadIdx.x; e < " << rows() * columns() << "; e += gridDim.x * " << shape_.pointwise_block
        << ") {\n";
    const std::string indent = "    ";
    out << indent << "const " << t << " o = e / " << columns() << ";\n";
    out << indent << "const " << t << " j0 = e - o * " << columns() << ";\n";
    emit_row_offsets(out, indent, "o", t);
    int last_stage = 0;
    const std::map<ValueId, int> stage = stages(last_stage);
    emit_row_values(out, indent, stage, 0);
    const std::vector<ValueId> element_stores = stores_of(KernelRole::element);
    emit_elements(out, indent, element_closure(element_stores));
    for (ValueId m : element_stores) store(out, indent, m, true);
    const std::vector<ValueId> row_stores = stores_of(KernelRole::row);
    if (!row_stores.empty()) {
      out << indent << "if (j0 == 0) {\n";
      for (ValueId m : row_stores) store(out, indent + "  ", m, false);
      out << indent << "}\n";
    }
    out << "  }\n";
  }

  // A kernel over rows whose length is a multiple of kVectorWidth (a pointwise one without
  // per-row stores) moves each operand that walks its row contiguously (bf16 or float32, at an
  // offset that keeps 16-byte alignment in every row) kVectorWidth values at a time. Chooses those
  // accesses (register_reads_, vector_stores_) and records which of kernel.arguments need aligned
  // pointers; false when there is no such operand, or the kernel does not qualify.
  bool plan_vector_accesses(RenderedKernel& kernel) {
    if (columns() % kVectorWidth != 0 || column_sizes_.size() != 1) return false;
    if (!kernel_.has_reduction() && !stores_of(KernelRole::row).empty()) return false;
    const auto vectorizable = [&](int a) {
      const ir::DType dtype = graph_.type(accesses_[static_cast<std::size_t>(a)].base).dtype;
      if (dtype != ir::DType::bf16 && dtype != ir::DType::f32) return false;
      if (column_strides_[static_cast<std::size_t>(a)][0] != 1 || accesses_[static_cast<std::size_t>(a)].offset % kVectorWidth != 0) return false;
      for (int64_t stride : row_strides_[static_cast<std::size_t>(a)]) {
        if (stride % kVectorWidth != 0) return false;
      }
      return true;
    };
    std::set<ValueId> aligned;
    for (const auto& [m, ops] : operands_) {
      for (const Operand& op : ops) {
        if (op.member >= 0) continue;
        const ir::Op base_op = graph_.node(accesses_[static_cast<std::size_t>(op.access)].base).op;
        if (base_op == Op::constant || base_op == Op::iota || !vectorizable(op.access) || register_reads_.count(op.access)) continue;
        register_reads_[op.access] = "r" + std::to_string(op.access) + "[u]";
        aligned.insert(accesses_[static_cast<std::size_t>(op.access)].base);
      }
    }
    for (ValueId m : written_stores()) {
      if (vectorizable(store_access_.at(m))) {
        vector_stores_.insert(m);
        aligned.insert(m);
      }
    }
    if (register_reads_.empty() && vector_stores_.empty()) return false;
    for (std::size_t a = 0; a < kernel.arguments.size(); ++a) {
      if (aligned.count(kernel.arguments[a])) kernel.aligned_arguments.push_back(static_cast<int>(a));
    }
    return true;
  }

  void vectorized_pointwise_body(std::ostream& out) const {
    const std::string t = index_type_, w = std::to_string(kVectorWidth);
    out << "  for (" << t << " ev = blockIdx.x * " << shape_.pointwise_block << " + threadIdx.x; ev < " << rows() * columns() / kVectorWidth
        << "; ev += gridDim.x * " << shape_.pointwise_block << ") {\n";
    const std::string indent = "    ", inner = "      ";
    out << indent << "const " << t << " o = ev / " << columns() / kVectorWidth << ";\n";
    out << indent << "const " << t << " jv = (ev - o * " << columns() / kVectorWidth << ") * " << w << ";\n";
    emit_row_offsets(out, indent, "o", t);
    int last_stage = 0;
    emit_row_values(out, indent, stages(last_stage), 0);
    const std::vector<ValueId> element_stores = stores_of(KernelRole::element);
    const std::vector<ValueId> members = element_closure(element_stores);
    open_group(out, indent, members, {}, element_stores);
    emit_elements(out, inner, members);
    group_stores(out, inner, element_stores);
    close_group(out, indent, element_stores);
    out << "  }\n";
  }

  // A group of kVectorWidth columns from column jv: the registers of the loads `members` and
  // `reductions` read and of the vector stores among `stores`, then the unrolled loop over the
  // group (its body one level deeper than `indent`), ...
  // (`loaded`: the registers were filled before, once for the row.)
  void open_group(std::ostream& out, const std::string& indent, const std::vector<ValueId>& members, const std::vector<ValueId>& reductions,
                  const std::vector<ValueId>& stores, bool loaded = false) const {
    if (!loaded) emit_vector_loads(out, indent, vector_loads(members, reductions));
    for (ValueId m : stores) {
      if (vector_stores_.count(m)) out << indent << "float w" << m << "[" << kVectorWidth << "];\n";
    }
    out << indent << "#pragma unroll\n";
    out << indent << "for (int u = 0; u < " << kVectorWidth << "; ++u) {\n";
    out << indent << "  const " << index_type_ << " j0 = jv + u;\n";
  }
  // ... each element's stores (into a register, or one element at a time) ...
  void group_stores(std::ostream& out, const std::string& indent, const std::vector<ValueId>& stores) const {
    for (ValueId m : stores) {
      if (vector_stores_.count(m)) {
        out << indent << "w" << m << "[u] = v" << m << ";\n";
      } else {
        store(out, indent, m, true);
      }
    }
  }
  // ... and after the loop, the registers stored 16 bytes at a time.
  void close_group(std::ostream& out, const std::string& indent, const std::vector<ValueId>& stores) const {
    out << indent << "}\n";
    for (ValueId m : stores) {
      if (vector_stores_.count(m)) out << indent << "k_store8(s" << m << " + o" << store_access_.at(m) << " + jv, w" << m << ");\n";
    }
  }

  // The accesses loaded into registers that `members` (element members) and `reductions` read.
  std::vector<int> vector_loads(const std::vector<ValueId>& members, const std::vector<ValueId>& reductions) const {
    std::set<int> used;
    const auto note = [&](const Operand& op) {
      if (op.member < 0 && register_reads_.count(op.access)) used.insert(op.access);
    };
    for (ValueId m : members) {
      for (const Operand& op : operands_.at(m)) note(op);
    }
    for (ValueId r : reductions) note(operands_.at(r)[0]);
    return {used.begin(), used.end()};
  }

  void emit_vector_loads(std::ostream& out, const std::string& indent, const std::vector<int>& loads) const {
    for (int a : loads) {
      out << indent << "float r" << a << "[" << kVectorWidth << "];\n";
      out << indent << "k_load8(" << pointer(accesses_[static_cast<std::size_t>(a)].base) << " + o" << a << " + jv, r" << a << ");\n";
    }
  }

  // Threads for a kernel with column sums over rows of `units`: whole warps, one unit each (at
  // most 1024 threads), times 2^scale_log2 (max-autotune's scale).
  static int column_sum_block(int64_t units, int scale_log2) {
    const auto warps = [](int64_t threads) { return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (threads + 31) / 32 * 32))); };
    int block = warps(units);
    for (int s = 0; s < scale_log2; ++s) block = warps(2 * block);
    for (int s = 0; s > scale_log2; --s) block = warps(block / 2);
    return block;
  }

  // Adds up the blocks' partial column sums, in block order (the same result at every run): 32
  // columns a block, each column's blocks split over 32 threads, whose sums then add up in order.
  void finish_kernel(std::ostream& out, const RenderedKernel& kernel) const {
    const std::vector<ValueId>& sums = kernel.finish_outputs;
    const int64_t tiles = (columns() + 31) / 32;
    // (No kernel index here: a layer's repeat of this code must render the same text.)
    out << "\n// the column sums: " << kernel.grid << " blocks' partial sums added in order\n";
    out << "extern \"C\" __global__ void __launch_bounds__(" << kFinishBlock << ") " << kernel.finish_symbol << "(const float* __restrict__ ws";
    for (ValueId c : sums) out << ", float* __restrict__ s" << c;
    out << ") {\n";
    out << "  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();\n";
    out << "  __shared__ float part[32][33];\n";
    out << "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
    out << "  const int sum = blockIdx.x / " << tiles << ";\n";
    out << "  const int64_t j = (blockIdx.x - sum * " << tiles << ") * 32 + tx;\n";
    out << "  const float* partials = ws + sum * INT64_C(" << kernel.grid * columns() << ");\n";
    out << "  float total = 0.0f;\n";
    out << "  if (j < " << columns() << ") {\n";
    out << "    #pragma unroll 8\n";
    out << "    for (int b = ty; b < " << kernel.grid << "; b += 32) total += partials[b * INT64_C(" << columns() << ") + j];\n";
    out << "  }\n";
    out << "  part[ty][tx] = total;\n";
    out << "  __syncthreads();\n";
    out << "  if (ty != 0 || j >= " << columns() << ") return;\n";
    out << "  float column = 0.0f;\n";
    out << "  for (int y = 0; y < 32; ++y) column += part[y][tx];\n";
    for (std::size_t i = 0; i < sums.size(); ++i) out << "  if (sum == " << i << ") s" << sums[i] << "[j] = column;\n";
    out << "}\n";
  }

  // `block`: the threads of a row (a warp's lanes under warp_rows_, whose block holds
  // kWarpRowsPerBlock rows at a time; otherwise the block's).
  void reduction_body(std::ostream& out, int block, bool vectorized, int64_t grid) const {
    // A row's thread index in the source: the warp's lane, or the block's thread.
    const std::string t = index_type_, lane = warp_rows_ ? "lane" : "threadIdx.x";
    int last_stage = 0;
    const std::map<ValueId, int> stage = stages(last_stage);
    for (int s = 1; s <= last_stage && !warp_rows_; ++s) {
      for (ValueId r : reductions_in_stage(stage, s)) {
        out << "  __shared__ " << compute_type(graph_.type(r).dtype) << " shared" << r << "[33];\n";
      }
    }
    // Column sums: each thread adds, over the block's rows, the columns it owns (the same ones in
    // every row: `groups` of them, or of kVectorWidth-column groups) in registers.
    const std::vector<ValueId> sums = column_members();
    const int64_t units = vectorized ? columns() / kVectorWidth : columns();
    const int64_t groups = (units + block - 1) / block;
    for (ValueId c : sums) out << "  float col" << c << "[" << groups << "]" << (vectorized ? "[" + std::to_string(kVectorWidth) + "]" : "") << " = {};\n";
    if (warp_rows_) {
      // A row a warp: its reductions stay within the warp, so warps of a block never wait for each other.
      out << "  const int lane = threadIdx.x & 31;\n";
      out << "  for (" << t << " o = blockIdx.x * " << kWarpRowsPerBlock << " + (threadIdx.x >> 5); o < " << rows() << "; o += gridDim.x * "
          << kWarpRowsPerBlock << ") {\n";
    } else {
      out << "  for (" << t << " o = blockIdx.x; o < " << rows() << "; o += gridDim.x) {\n";
    }
    const std::string indent = "    ", inner = "      ";
    emit_row_offsets(out, indent, "o", t);
    emit_row_values(out, indent, stage, 0);
    // When a thread owns one group of the row (a row of at most `block` groups, in blocks of up to
    // 256 threads: up to 2,048 columns; the small GPT's layer norms, GPT-2's backward ones), its
    // operands are loaded once, all together, at the row's start: each pass after a reduction
    // would otherwise wait for its loads again, and a last pass's own operand (a layer norm
    // backward's residual gradient) for memory, after the reductions instead of beside them. Larger
    // blocks get fewer registers a thread, which the row's operands held throughout could exceed.
    const bool row_in_registers = vectorized && units <= block && block <= 256 && optimization_enabled(Optimization::row_registers);
    if (row_in_registers) {
      std::vector<ValueId> elements, reduced = sums;
      for (std::size_t i = 0; i < kernel_.members.size(); ++i) {
        const ValueId m = kernel_.members[i];
        if (kernel_.roles[i] == KernelRole::element) elements.push_back(m);
        if (kernel_.roles[i] == KernelRole::row && ir::op_kind(graph_.node(m).op) == ir::OpKind::kReduction) {
          reduced.push_back(m);
        }
      }
      const std::vector<int> loads = vector_loads(elements, reduced);
      out << indent << "const " << t << " jv = " << lane << " * " << kVectorWidth << ";\n";
      for (int a : loads) out << indent << "float r" << a << "[" << kVectorWidth << "];\n";
      out << indent << "if (" << lane << " < " << units << ") {\n";
      for (int a : loads) {
        out << inner << "k_load8(" << pointer(accesses_[static_cast<std::size_t>(a)].base) << " + o" << a << " + jv, r" << a << ");\n";
      }
      out << indent << "}\n";
    }
    // A pass over the row's columns: one column a thread at a time, or (vectorized) a group of
    // kVectorWidth, its operands loaded first and the group's elements computed in an unrolled loop.
    const std::string body = vectorized ? inner + "  " : inner;
    const auto open_columns = [&](const std::vector<ValueId>& members, const std::vector<ValueId>& reductions,
                                  const std::vector<ValueId>& stores) {
      if (!vectorized) {
        out << indent << "for (" << t << " column = " << lane << "; column < " << columns() << "; column += " << block << ") {\n";
        emit_column_indices(out, inner, "column");
        return;
      }
      out << indent << "for (" << t << " cv = " << lane << "; cv < " << columns() / kVectorWidth << "; cv += " << block << ") {\n";
      out << inner << "const " << t << " jv = cv * " << kVectorWidth << ";\n";
      open_group(out, inner, members, reductions, stores, row_in_registers);
    };
    const auto close_columns = [&](const std::vector<ValueId>& stores) {
      if (vectorized) close_group(out, inner, stores);
      out << indent << "}\n";
    };
    for (int s = 1; s <= last_stage; ++s) {
      const std::vector<ValueId> reductions = reductions_in_stage(stage, s);
      std::vector<ValueId> inputs;
      for (ValueId r : reductions) {
        inputs.push_back(graph_.node(r).inputs[0]);
        out << indent << compute_type(graph_.type(r).dtype) << " acc" << r << " = " << identity(r) << ";\n";
      }
      const std::vector<ValueId> members = element_closure(inputs);
      open_columns(members, reductions, {});
      emit_elements(out, body, members);
      for (ValueId r : reductions) out << body << accumulate(r) << "\n";
      close_columns({});
      for (ValueId r : reductions) {
        const std::string sum = graph_.node(r).op == Op::sum ? "true" : "false";
        out << indent << "const " << compute_type(graph_.type(r).dtype) << " v" << r << " = "
            << (warp_rows_ ? "k_warp_reduce<" + sum + ">(acc" + std::to_string(r) + ")"
                           : "k_block_reduce<" + sum + ">(acc" + std::to_string(r) + ", " + identity(r) + ", shared" + std::to_string(r) + ")")
            << ";\n";
      }
      emit_row_values(out, indent, stage, s);
    }
    const std::vector<ValueId> element_stores = stores_of(KernelRole::element);
    if (!element_stores.empty() && sums.empty()) {
      const std::vector<ValueId> members = element_closure(element_stores);
      open_columns(members, {}, element_stores);
      emit_elements(out, body, members);
      group_stores(out, body, element_stores);
      close_columns(element_stores);
    } else if (!sums.empty()) {
      // The last pass over the row, unrolled over the thread's column groups so that each adds
      // into its own registers.
      std::vector<ValueId> roots = element_stores;
      for (ValueId c : sums) roots.push_back(graph_.node(c).inputs[0]);  // a member's, or a load's (not a member)
      const std::vector<ValueId> members = element_closure(roots);
      const std::string group = inner + "  ", element = vectorized ? group + "  " : group;
      out << indent << "#pragma unroll\n";
      out << indent << "for (int k = 0; k < " << groups << "; ++k) {\n";
      out << inner << "const " << t << (vectorized ? " cv" : " column") << " = " << lane << " + k * " << block << ";\n";
      out << inner << "if (" << (vectorized ? "cv" : "column") << " < " << units << ") {\n";
      if (vectorized) {
        out << group << "const " << t << " jv = cv * " << kVectorWidth << ";\n";
        open_group(out, group, members, sums, element_stores, row_in_registers);
      } else {
        emit_column_indices(out, group, "column");
      }
      emit_elements(out, element, members);
      group_stores(out, element, element_stores);
      for (ValueId c : sums) {
        // A bf16 member holds its float value unrounded until stored: the sum adds it as stored.
        const Operand& addend = operands_.at(c)[0];
        const bool rounded = addend.member >= 0 && graph_.type(addend.member).dtype == ir::DType::bf16;
        const std::string term = rounded ? "k_round_bf16(" + read(addend, true) + ")" : read(addend, true);
        out << element << "col" << c << "[k]" << (vectorized ? "[u]" : "") << " += " << term << ";\n";
      }
      if (vectorized) close_group(out, group, element_stores);
      out << inner << "}\n";
      out << indent << "}\n";
    }
    const std::vector<ValueId> row_stores = stores_of(KernelRole::row);
    if (!row_stores.empty()) {
      out << indent << "if (" << lane << " == 0) {\n";
      for (ValueId m : row_stores) store(out, inner, m, false);
      out << indent << "}\n";
    }
    out << "  }\n";
    if (warp_rows_ && !sums.empty()) {
      block_partial_sums(out, sums, vectorized, grid);
      return;
    }
    // Each block's partial sums: row blockIdx.x of each column member's [grid, columns] partials.
    for (std::size_t i = 0; i < sums.size(); ++i) {
      const std::string row = "(INT64_C(" + std::to_string(static_cast<int64_t>(i) * grid) + ") + blockIdx.x) * " + std::to_string(columns());
      out << "  #pragma unroll\n";
      out << "  for (int k = 0; k < " << groups << "; ++k) {\n";
      if (vectorized) {
        out << "    const int cv = threadIdx.x + k * " << block << ";\n";
        out << "    if (cv < " << units << ") k_store8(ws + " << row << " + cv * " << kVectorWidth << ", col" << sums[i] << "[k]);\n";
      } else {
        out << "    const int column = threadIdx.x + k * " << block << ";\n";
        out << "    if (column < " << units << ") ws[" << row << " + column] = col" << sums[i] << "[k];\n";
      }
      out << "  }\n";
    }
  }

  // Under warp_rows_: each warp's column sums (register k of lane l holds unit l + 32 k) added over
  // the block's warps, in order, through shared memory, into row blockIdx.x of each column
  // member's [grid, columns] partials.
  void block_partial_sums(std::ostream& out, const std::vector<ValueId>& sums, bool vectorized, int64_t grid) const {
    const int64_t width = vectorized ? kVectorWidth : 1, units = columns() / width, groups = (units + 31) / 32;
    out << "  __shared__ float warp_sums[" << kWarpRowsPerBlock << "][" << columns() << "];\n";
    for (std::size_t i = 0; i < sums.size(); ++i) {
      const std::string row = "(INT64_C(" + std::to_string(static_cast<int64_t>(i) * grid) + ") + blockIdx.x) * " + std::to_string(columns());
      out << "  #pragma unroll\n";
      out << "  for (int k = 0; k < " << groups << "; ++k) {\n";
      out << "    const int unit = lane + k * 32;\n";
      if (vectorized) {
        out << "    if (unit < " << units << ") {\n";
        out << "      #pragma unroll\n";
        out << "      for (int u = 0; u < " << width << "; ++u) warp_sums[threadIdx.x >> 5][unit * " << width << " + u] = col" << sums[i] << "[k][u];\n";
        out << "    }\n";
      } else {
        out << "    if (unit < " << units << ") warp_sums[threadIdx.x >> 5][unit] = col" << sums[i] << "[k];\n";
      }
      out << "  }\n";
      out << "  __syncthreads();\n";
      out << "  for (int j = threadIdx.x; j < " << columns() << "; j += blockDim.x) {\n";
      out << "    float total = warp_sums[0][j];\n";
      out << "    for (int w = 1; w < " << kWarpRowsPerBlock << "; ++w) total += warp_sums[w][j];\n";
      out << "    ws[" << row << " + j] = total;\n";
      out << "  }\n";
      out << "  __syncthreads();  // warp_sums is free for the next member's\n";
    }
  }

  std::string symbol_;
  LaunchShape shape_;
  bool warp_rows_ = false;             // a row a warp, kWarpRowsPerBlock rows a block
  std::string index_type_ = "int64_t";
  std::set<ValueId> vector_stores_;  // stored kVectorWidth values at a time
};

// `code` with each name a value gives it (p12, s12: its pointers; v12, acc12, shared12, w12: its
// variables) numbered by first appearance instead: p0, s1, v2, ... Names of accesses (o3, r3)
// and dimensions (i0, j0) are numbered within the kernel already.
std::string canonical_names(const std::string& code) {
  static const std::regex value_name(R"(\b(p|s|v|acc|shared|w|col)([0-9]+)\b)");
  std::map<std::string, int> number;
  std::string out;
  auto last = code.cbegin();
  for (std::sregex_iterator it(code.begin(), code.end(), value_name), end; it != end; ++it) {
    const std::smatch& match = *it;
    out.append(last, match[0].first);
    const auto [found, inserted] = number.emplace(match[2].str(), static_cast<int>(number.size()));
    out += match[1].str() + std::to_string(found->second);
    last = match[0].second;
  }
  out.append(last, code.cend());
  return out;
}

}  // namespace

int LaunchShape::reduction_block(int row_sized) const {
  int block = row_sized;
  for (int s = 0; s < reduction_scale_log2 && block < 1024; ++s) block *= 2;
  for (int s = 0; s > reduction_scale_log2 && block > 32; --s) block /= 2;
  return block;
}

std::string LaunchShape::name() const {
  return "pointwise " + std::to_string(pointwise_block) + ", reductions x" +
         (reduction_scale_log2 >= 0 ? std::to_string(1 << reduction_scale_log2) : "1/" + std::to_string(1 << -reduction_scale_log2));
}

const std::vector<LaunchShape>& tuned_launch_shapes() {
  static const std::vector<LaunchShape> shapes = {{128, -1}, LaunchShape{}, {512, 1}};
  return shapes;
}

RenderedProgram render_cuda_kernels(const ir::Graph& graph, const Schedule& schedule, const std::string& program_name, const LaunchShape& shape) {
  RenderedProgram program;
  program.prelude = cuda_prelude();
  const std::string prefix = program_name.empty() ? "trainc_kernel_" : "trainc_kernel_" + program_name + "_";
  std::map<std::string, std::size_t> first_with_code;  // canonical code -> the kernel that has it
  for (std::size_t k = 0; k < schedule.kernels.size(); ++k) {
    const int index = static_cast<int>(k);
    RenderedKernel kernel = CudaKernelRenderer(graph, schedule, index, prefix + std::to_string(index), shape).render();
    // Each layer's kernels repeat the previous layer's but for the values they name: with names
    // numbered within the kernel, the code is compiled once and the repeats launch it.
    const std::size_t header_end = kernel.source.find('\n', 1) + 1;
    const std::string header = kernel.source.substr(0, header_end);
    const std::string code = canonical_names(kernel.source.substr(header_end));
    std::string key = code;  // the code with the kernel's name (and its finish's) left out
    for (std::size_t at = key.find(kernel.symbol); at != std::string::npos; at = key.find(kernel.symbol, at)) key.replace(at, kernel.symbol.size(), "KERNEL");
    const auto [first, inserted] = first_with_code.emplace(key, k);
    if (inserted) {
      kernel.source = header + code;
    } else {
      kernel.symbol = program.kernels[first->second].symbol;
      kernel.finish_symbol = program.kernels[first->second].finish_symbol;
      kernel.source = header.substr(0, header.size() - 1) + " (the code of kernel " + std::to_string(first->second) + ")\n";
    }
    program.kernels.push_back(std::move(kernel));
  }
  return program;
}

}  // namespace trainc::codegen
