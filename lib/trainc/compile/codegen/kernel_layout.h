// defines: RenderedKernel, RenderedProgram, KernelLayout
//
// What the CPU renderer (cpp_kernels) and the CUDA renderer (cuda_kernels) share about one fused
// kernel of a schedule: its accesses (each value it reads, as strides over the kernel's domain),
// the domain split into rows (the dimensions it keeps) and columns (the dimensions it reduces; for
// a pointwise kernel, the innermost one) with neighbouring dimensions merged, and each member's
// expression. The two renderers differ only in how they walk rows and columns: loops and OpenMP
// on the CPU, threads and blocks on a GPU. Both preludes define the same helpers (k_exp,
// k_bf16_load, ...), so an expression reads the same for either target.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "trainc/compile/passes/fusion.h"

namespace trainc::codegen {

struct RenderedKernel {
  std::string symbol;                   // trainc_kernel_<i>
  std::string source;                   // the function's definition
  std::vector<ir::ValueId> arguments;   // the values read (contiguous bases), then the values stored
  int reads = 0;                        // how many of `arguments` are read
  // Arguments (positions in `arguments`) the kernel reads or writes 16 bytes at a time: their
  // data pointers must be 16-byte aligned.
  std::vector<int> aligned_arguments;
  // CUDA only: the launch (threads per block, and blocks).
  int block = 0;
  int64_t grid = 0;
  // CUDA only, a kernel with column members: each block writes its partial column sums to a
  // workspace of `workspace_floats` floats (its last argument), and the kernel `finish_symbol`
  // (defined in `source` too), launched right after it on (workspace, finish_outputs...), adds
  // the blocks' sums in block order into the column members' values.
  std::vector<ir::ValueId> finish_outputs;
  int64_t workspace_floats = 0;
  std::string finish_symbol;
  int finish_block = 0;
  int64_t finish_grid = 0;
};

struct RenderedProgram {
  std::string prelude;  // what every kernel needs: math declarations, bf16 conversions
  std::vector<RenderedKernel> kernels;  // one per FusedKernel, in the schedule's kernel order
  std::string text() const;             // prelude and every kernel: one translation unit
  // The functions a CUDA module loads, in launch-index order: each kernel's symbol, then each
  // finish symbol in kernel order; and per kernel, the launch index of its finish (-1: none).
  std::vector<std::string> symbols() const;
  std::vector<int> finish_launches() const;
};

// How a target spells what C++ has no portable literal for.
struct TargetSpelling {
  std::string infinity_f, infinity_d, nan_f, nan_d;
};

class KernelLayout {
 public:
  KernelLayout(const ir::Graph& graph, const Schedule& schedule, int index, TargetSpelling spelling);

 protected:
  // An access over the kernel's domain: strides per domain dimension (0 where it does not move).
  struct DomainAccess {
    ir::ValueId base;
    std::vector<int64_t> strides;
    int64_t offset;
    bool operator<(const DomainAccess& o) const;
  };
  // One operand of a member: a member's variable, or a read through access `access`.
  struct Operand {
    ir::ValueId member = -1;  // >= 0: in the kernel
    int access = -1;
    ir::ValueId value = -1;  // the value read (for its dtype)
  };

  int rank() const { return static_cast<int>(kernel_.domain.size()); }
  bool is_member(ir::ValueId v) const { return schedule_.kernel_of[static_cast<std::size_t>(v)] == index_; }
  KernelRole role(ir::ValueId v) const { return role_.at(v); }
  static std::string pointer(ir::ValueId base) { return "p" + std::to_string(base); }
  std::string describe() const;  // "reduction over [6, 37], reducing from dim 1; exp sum ..."
  std::string literal(double value, ir::DType dtype) const;

  int64_t rows() const;
  int64_t columns() const;
  // The largest element index any access reaches, plus one.
  int64_t index_extent() const;
  // The element index of access `a`: its row offset o<a> plus, in the columns, j<c> times strides.
  std::string index(int a, bool in_columns) const;
  std::string read(const Operand& operand, bool in_columns) const;
  std::string expression(ir::ValueId m, bool in_columns) const;
  // The element members `roots` need, in topological order.
  std::vector<ir::ValueId> element_closure(const std::vector<ir::ValueId>& roots) const;
  void emit_elements(std::ostream& out, const std::string& indent, const std::vector<ir::ValueId>& members) const;
  void store(std::ostream& out, const std::string& indent, ir::ValueId m, bool in_columns) const;
  // Declares o<a> for every access, from the row indices i<d> (emitted first, from `row`).
  void emit_row_offsets(std::ostream& out, const std::string& indent, const std::string& row, const std::string& index_type) const;
  // Per member, the reduction stage it follows (a reduction runs after every row value its input needs).
  std::map<ir::ValueId, int> stages(int& last_stage) const;
  std::vector<ir::ValueId> reductions_in_stage(const std::map<ir::ValueId, int>& stage, int s) const;
  void emit_row_values(std::ostream& out, const std::string& indent, const std::map<ir::ValueId, int>& stage, int s) const;
  std::vector<ir::ValueId> stores_of(KernelRole role) const;
  // The column members (sums over the rows), in member order; a column member is a store, but the
  // kernel writes each block's partial sums to a workspace, and a second kernel adds them up.
  std::vector<ir::ValueId> column_members() const;
  // The stores the kernel writes itself: all but the column members, whose values its finish writes.
  std::vector<ir::ValueId> written_stores() const;
  // A reduction over the row (the kernel's stages), not a column member.
  bool row_reduction(ir::ValueId m) const;
  // A reduction's starting value (0 or -inf), and the statement adding the element its input reads
  // in the column loop into acc<r>.
  std::string identity(ir::ValueId reduction) const;
  std::string accumulate(ir::ValueId reduction) const;
  // The kernel's arguments, in the order both targets take them: each base read, then each store
  // (RenderedKernel::arguments and ::reads).
  void record_arguments(RenderedKernel& kernel) const;
  // The parameter list of the arguments' pointers (CUDA's kernels take them as parameters).
  std::string parameters(const std::string& restrict_keyword) const;

  const ir::Graph& graph_;
  const Schedule& schedule_;
  const FusedKernel& kernel_;
  int index_;
  TargetSpelling spelling_;
  std::map<ir::ValueId, KernelRole> role_;
  std::map<ir::ValueId, std::vector<Operand>> operands_;
  std::map<ir::ValueId, int> store_access_;
  std::vector<DomainAccess> accesses_;
  std::map<DomainAccess, int> access_index_;
  std::vector<ir::ValueId> bases_;
  std::vector<int64_t> row_sizes_, column_sizes_;
  std::vector<std::vector<int64_t>> row_strides_, column_strides_;  // per access, per dimension
  // Accesses a renderer has loaded into registers ahead of the expressions: read() gives the
  // register's spelling instead of a load (CUDA's vectorized pointwise kernels).
  std::map<int, std::string> register_reads_;

 private:
  int add_access(DomainAccess access, bool read = true);
  DomainAccess domain_access(ir::ValueId value, const std::vector<int64_t>& shape, KernelRole role) const;
  void collect();
  void coalesce();
};

// The C++ type a value computes in, and the type it is stored as (bool as bytes, 16-bit floats as
// their bits).
const char* compute_type(ir::DType dtype);
const char* storage_type(ir::DType dtype);

}  // namespace trainc::codegen
