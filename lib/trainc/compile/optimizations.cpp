#include "trainc/compile/optimizations.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "trainc/common/error.h"

namespace trainc {
namespace {

const std::vector<std::pair<Optimization, std::string>>& named() {
  static const std::vector<std::pair<Optimization, std::string>> names = {
      {Optimization::fused_head, "fused_head"},       {Optimization::dlogits_in_forward, "dlogits_in_forward"},
      {Optimization::bias_epilogue, "bias_epilogue"}, {Optimization::attention_choice, "attention_choice"},
      {Optimization::column_sums, "column_sums"},     {Optimization::sum_to_float, "sum_to_float"},
      {Optimization::rematerialize, "rematerialize"},   {Optimization::attention_lse, "attention_lse"},
      {Optimization::matmul_to_float, "matmul_to_float"}, {Optimization::saved_casts, "saved_casts"},
      {Optimization::normalization_grad, "normalization_grad"}, {Optimization::fused_column_sums, "fused_column_sums"},
      {Optimization::recompute_cost, "recompute_cost"},         {Optimization::saved_operands, "saved_operands"},
      {Optimization::grouped_casts, "grouped_casts"},           {Optimization::attention_bias_sums, "attention_bias_sums"},
      {Optimization::embedding_grad_add, "embedding_grad_add"}, {Optimization::adamw_kernel, "adamw_kernel"},
      {Optimization::gemm_algorithms, "gemm_algorithms"},       {Optimization::gelu_epilogue, "gelu_epilogue"},
      {Optimization::gelu_grad_epilogue, "gelu_grad_epilogue"}, {Optimization::grad_norm_kernel, "grad_norm_kernel"},
      {Optimization::graph_memsets, "graph_memsets"},
      {Optimization::side_stream, "side_stream"},               {Optimization::cast_kernel, "cast_kernel"},
      {Optimization::parameter_shadows, "parameter_shadows"},
      {Optimization::head_grad_sms, "head_grad_sms"},
      {Optimization::stream_priorities, "stream_priorities"},
      {Optimization::row_registers, "row_registers"},
      {Optimization::dependent_launch, "dependent_launch"},
      {Optimization::input_copies, "input_copies"},
      {Optimization::side_product_sms, "side_product_sms"},
      {Optimization::warp_rows, "warp_rows"},
      {Optimization::main_stream_tail, "main_stream_tail"},
      {Optimization::device_step_start, "device_step_start"},
  };
  return names;
}

}  // namespace

std::vector<std::string> disabled_optimizations() {
  std::vector<std::string> names;
  const char* value = std::getenv(kDisableOptimizationsVariable);
  if (value == nullptr) return names;
  std::stringstream list(value);
  std::string name;
  while (std::getline(list, name, ',')) {
    const std::size_t first = name.find_first_not_of(" \t");
    if (first == std::string::npos) continue;  // an empty entry, as after a trailing comma
    const std::string trimmed = name.substr(first, name.find_last_not_of(" \t") - first + 1);
    if (std::find(names.begin(), names.end(), trimmed) == names.end()) names.push_back(trimmed);  // a name given twice, once
  }
  return names;
}

std::string optimization_names() {
  std::string text;
  for (const auto& [optimization, name] : named()) text += (text.empty() ? "" : ", ") + name;
  return text;
}

std::string disabled_optimizations_warning() {
  std::string names;
  for (const std::string& name : disabled_optimizations()) names += (names.empty() ? "" : ", ") + name;
  if (names.empty()) return names;
  return std::string("compile: running without the optimizations ") + kDisableOptimizationsVariable + " names: " + names;
}

bool optimization_enabled(Optimization optimization) {
  check_disabled_optimizations();
  for (const std::string& name : disabled_optimizations()) {
    for (const auto& [known, known_name] : named()) {
      if (known == optimization && known_name == name) return false;
    }
  }
  return true;
}

void check_disabled_optimizations() {
  for (const std::string& name : disabled_optimizations()) {
    bool known = false;
    for (const auto& entry : named()) known = known || entry.second == name;
    if (!known) {
      throw UserError(std::string(kDisableOptimizationsVariable) + "=" + std::getenv(kDisableOptimizationsVariable) + ": unknown optimization '" +
                      name + "' (expected a comma-separated list of: " + optimization_names() + ")");
    }
  }
}

}  // namespace trainc
