#include "trainc/compile/autotune/library_choice.h"

#include <sstream>
#include <stdexcept>

#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/device_timing.h"
#include "trainc/compat/library_variants.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/column_sums.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"

namespace trainc {
namespace {

// cuBLASLt's algorithms measured for a product: the heuristic's first twelve. On an H200 GPT-2's
// products had 8 to 16 ranked.
constexpr int kGemmAlgorithmsMeasured = 12;

std::string join_ints(at::IntArrayRef ints) {
  std::string text;
  for (int64_t i : ints) text += (text.empty() ? "" : ",") + std::to_string(i);
  return text;
}

// The implementations that can run these inputs: attention backends ATen's rules accept (one
// called directly does not always check its inputs itself), BLAS libraries.
std::vector<std::string> candidate_names(const ir::Node& node, const std::vector<at::Tensor>& inputs, at::Device device) {
  std::vector<std::string> names;
  // A switched-off optimization offers no candidates, so max-autotune cannot choose it either.
  if ((node.op == ir::Op::attention || node.op == ir::Op::attention_grad) && optimization_enabled(Optimization::attention_choice)) {
    const double scale = ir::attention_scale(node.attrs, inputs[0].size(-1));
    const bool training = node.op == ir::Op::attention_grad;
    for (AttentionBackend backend : attention_backends(device)) {
      if (attention_backend_accepts(backend, inputs[0], inputs[1], inputs[2], scale, node.attrs.causal, training)) {
        names.push_back(attention_backend_name(backend));
      }
    }
  } else if (ir::is_matrix_product(node.op)) {
    // Only cuBLASLt has the GELU epilogues: its ranked algorithms alone (without measuring, the first).
    if (node.op != ir::Op::matmul_bias_gelu && node.op != ir::Op::matmul_gelu_grad) names = blas_libraries(device);
    if (optimization_enabled(Optimization::gemm_algorithms)) {
      const int algorithms = ir::gemm_algorithm_count(node, inputs, kGemmAlgorithmsMeasured);
      for (int i = 0; i < algorithms; ++i) names.push_back(lt_algorithm_name(i));
    }
  } else if ((node.op == ir::Op::sum || node.op == ir::Op::sum_to_float) && optimization_enabled(Optimization::column_sums) &&
             column_sums_supported(inputs[0], node.attrs.ints)) {
    names = {"aten", "split_rows"};
  }
  return names;
}

// " bf16[16,1024]/[1024,1] ...": dtypes, shapes and strides, as tuning keys spell them.
std::string describe_tensors(const std::vector<at::Tensor>& tensors) {
  std::string text;
  for (const at::Tensor& t : tensors) {
    text += " " + std::string(ir::dtype_name(ir::to_dtype(t.scalar_type()))) + "[" + join_ints(t.sizes()) + "]/[" + join_ints(t.strides()) + "]";
  }
  return text;
}

// The head's training pair (runtime/linear_cross_entropy): each of its products measured on its
// own, ATen's mm against cuBLASLt's ranked algorithms, on operands laid out as the op's. A float32
// product (the weight's gradient in float32) has no ATen mm to measure: its default is cuBLASLt's
// first algorithm, measured among the others.
std::string choose_head_gemms(const ir::Node& node, const std::vector<at::Tensor>& inputs, at::Device device, Autotuner& tuner) {
  std::vector<int> chosen;
  for (const HeadGemm& gemm : head_gemms(node.op, inputs, ir::to_scalar_type(node.attrs.dtype), ir::head_gradients(node.attrs))) {
    std::vector<TuningCandidate> candidates;
    std::string listed;
    if (gemm.out.scalar_type() == gemm.a.scalar_type()) {
      candidates.push_back({"aten", [&gemm] { head_product_into(gemm.out, gemm.a, gemm.b, -1); }});
      listed = "aten";
    }
    const int algorithms = lt_algorithm_count(gemm.a, gemm.b, at::Tensor(), gemm.out.scalar_type(), kGemmAlgorithmsMeasured);
    for (int i = 0; i < algorithms; ++i) {
      candidates.push_back({lt_algorithm_name(i), [&gemm, i] {
                              if (!lt_matmul_out(gemm.out, gemm.a, gemm.b, at::Tensor(), i)) throw std::runtime_error("cuBLASLt did not run");
                            }});
      listed += (listed.empty() ? "" : ",") + lt_algorithm_name(i);
    }
    if (candidates.empty()) {
      chosen.push_back(-1);
      continue;
    }
    const std::string key = device_identity(device) + " | mm cublasLt " + cublaslt_version() + " |" + describe_tensors({gemm.a, gemm.b, gemm.out}) +
                            " | " + listed;
    chosen.push_back(lt_algorithm_index(tuner.choose(key, candidates).value_or("aten")).value_or(-1));
  }
  return lt_algorithm_list_name(chosen);
}

}  // namespace

std::string describe_call(const ir::Node& node, const std::vector<at::Tensor>& inputs) {
  std::ostringstream text;
  text << ir::op_name(node.op);
  if (node.op == ir::Op::attention || node.op == ir::Op::attention_grad) {
    text << (node.attrs.causal ? " causal" : "") << " scale " << node.attrs.scalar;
  }
  if (!node.attrs.ints.empty()) text << " axes [" << join_ints(node.attrs.ints) << "]";
  if (node.attrs.keepdim) text << " keepdim";
  // float32 products run on tensor cores or not as TF32 is allowed: a different measurement.
  if (node.op == ir::Op::matmul || node.op == ir::Op::matmul_bias) text << (at::globalContext().allowTF32CuBLAS() ? " tf32" : "");
  // An algorithm's index in cuBLASLt's ranking means something for one version of it only.
  if (ir::is_matrix_product(node.op)) {
    const std::string lt_version = cublaslt_version();
    if (!lt_version.empty()) text << " cublasLt " << lt_version;
  }
  if (node.op == ir::Op::sum || node.op == ir::Op::sum_to_float) text << " split_rows " << column_sums_version();
  text << " |" << describe_tensors(inputs);
  return text.str();
}

std::string choose_library_variant(const ir::Node& node, const std::vector<at::Tensor>& inputs, at::Device device, Autotuner* tuner) {
  if (tuner != nullptr && device.is_cuda() && optimization_enabled(Optimization::gemm_algorithms) &&
      (node.op == ir::Op::linear_cross_entropy_and_dlogits || node.op == ir::Op::linear_cross_entropy_grad_from_dlogits)) {
    return choose_head_gemms(node, inputs, device, *tuner);
  }
  const bool sum = node.op == ir::Op::sum || node.op == ir::Op::sum_to_float;
  const std::vector<std::string> names = tuner != nullptr || sum ? candidate_names(node, inputs, device) : std::vector<std::string>{};
  if (tuner != nullptr && names.size() > 1) {
    std::vector<TuningCandidate> candidates;
    std::string listed;
    for (const std::string& name : names) {
      candidates.push_back({name, [&node, &inputs, device, name] { (void)ir::execute_node(node, inputs, device, name); }});
      listed += (listed.empty() ? "" : ",") + name;
    }
    const std::string key = device_identity(device) + " | " + describe_call(node, inputs) + " | " + listed;
    return tuner->choose(key, candidates).value_or("");
  }
  if (device.is_cuda() && (node.op == ir::Op::attention || node.op == ir::Op::attention_grad) &&
      optimization_enabled(Optimization::attention_choice)) {
    // Without a kernel to call directly (ATen's math fallback, or flash whose heads ATen pads), ATen's call.
    const double scale = ir::attention_scale(node.attrs, inputs[0].size(-1));
    const std::optional<AttentionBackend> backend =
        direct_attention_backend(inputs[0], inputs[1], inputs[2], scale, node.attrs.causal, node.op == ir::Op::attention_grad);
    if (backend) return attention_backend_name(*backend);
  }
  // The kernel attention's kept-statistics pair calls, decided here once instead of at every run.
  if (node.op == ir::Op::attention_and_lse || node.op == ir::Op::attention_grad_from_lse || node.op == ir::Op::attention_grad_and_bias_sums) {
    const std::optional<AttentionBackend> backend = ir::lse_pair_backend(inputs, node.attrs);
    return backend ? attention_backend_name(*backend) : "aten";
  }
  // A bf16 sum over the leading dimensions: split over the rows, which on an H200 took 0.020-0.041 ms
  // where ATen's reduction took 0.033-0.049 ms (GPT-2's gradients of biases). Float32 sums stay
  // ATen's, which read them faster (0.022 against 0.029 ms), unless the rows are few enough for one
  // kernel without a finish at any width (a position table's gradient summed over the batch: 2 us
  // against ATen's 5 in the small GPT's step).
  if (names.size() == 2 && names[1] == "split_rows" &&
      (inputs[0].scalar_type() == at::kBFloat16 ||
       column_sums_rows_in_one_split(inputs[0], static_cast<int64_t>(node.attrs.ints.size())))) {
    return "split_rows";
  }
  return "";
}

}  // namespace trainc
