#include "trainc/compile/ir/op_table.h"

#include <array>

namespace trainc::ir {
namespace {

struct OpInfo {
  const char* name;
  OpKind kind;
  int arity;
};

constexpr std::array<OpInfo, kOpCount> kOps = {{
#define TRAINC_IR_OP_INFO(op, kind, arity) {#op, OpKind::kind, arity},
    TRAINC_IR_OPS(TRAINC_IR_OP_INFO)
#undef TRAINC_IR_OP_INFO
}};
static_assert(kOps.size() == kOpCount, "one OpInfo per op");

}  // namespace

const char* op_name(Op op) { return kOps[static_cast<int>(op)].name; }
OpKind op_kind(Op op) { return kOps[static_cast<int>(op)].kind; }
int op_arity(Op op) { return kOps[static_cast<int>(op)].arity; }
bool is_comparison(Op op) { return op == Op::gt || op == Op::eq; }

}  // namespace trainc::ir
