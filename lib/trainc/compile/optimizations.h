// defines: Optimization, optimization_enabled, disabled_optimizations, disabled_optimizations_warning,
//          check_disabled_optimizations, kDisableOptimizationsVariable
//
// Switches that turn one of the compiler's optimizations off, to measure what it contributes (a run
// with it against a run without, docs/benchmarks.md) or to rule it out when a compiled step
// misbehaves: TRAINC_DISABLE_OPTIMIZATIONS=bias_epilogue,column_sums (spaces around the names are
// allowed). The variable is read when a step is compiled and, for the library choices
// (attention_choice, column_sums, gemm_algorithms), at the compiled step's first run, and for
// adamw_kernel when the capturable AdamW is made, for grad_norm_kernel at each step, and for
// graph_memsets at each CUDA graph capture, for stream_priorities when a signature's graph is made
// (at its warm-up), for dependent_launch when a module of kernels is loaded, for input_copies when a
// signature's graph is captured, for head_grad_sms and side_product_sms when a product is recorded on the
// side stream, for device_step_start when training starts; an unknown name stops the run at start (exit 2).
// Each switch leaves the step correct: what it turns off is how the work is done, not what is
// computed (up to rounding).
#pragma once

#include <string>
#include <vector>

namespace trainc {

inline constexpr const char* kDisableOptimizationsVariable = "TRAINC_DISABLE_OPTIMIZATIONS";

enum class Optimization {
  fused_head,          // import: a linear layer's logits and their cross-entropy as one op (runtime/linear_cross_entropy)
  dlogits_in_forward,  // planner: the head's logit gradient made in the forward (passes/dlogits_in_forward)
  bias_epilogue,       // import: a linear layer's bias added inside its GEMM (matmul_bias) instead of by a kernel
  attention_choice,    // GPU: attention's backend picked once per compiled step and called directly
  column_sums,         // GPU: bf16 sums over leading dimensions, and float32 ones over few rows, split over rows (runtime/column_sums)
  sum_to_float,        // inductor: sums of widened bf16 values read the bf16 values (passes/sums_of_widened)
  rematerialize,       // inductor, GPU: stored pointwise values recomputed by their readers (passes/rematerialize)
  attention_lse,       // planner, GPU: attention's output and log-sum-exp kept for its backward (passes/attention_lse_in_forward;
                       // off with attention_choice too, since it calls the kernels directly)
  matmul_to_float,     // inductor: float32 casts of bf16 products made by the GEMM (passes/products_to_float), the
                       // head's weight gradient's too where it is a step of its own (passes/head_weight_grad_to_float)
  saved_casts,         // partition: parameters cast to bf16 by the forward saved for the backward, not cast again
  normalization_grad,  // autodiff: a layer norm's input gradient in closed form (two sums over its rows)
  fused_column_sums,   // inductor, GPU: sums over leading dimensions computed by the kernel that makes what they sum
  recompute_cost,      // partition: pointwise values that are per-row statistics, or that cost more to recompute than
                       // to keep, saved for the backward instead of recomputed
  saved_operands,      // partition: pointwise values an ATen call reads in the forward and in the backward (an MLP's
                       // activation, a GEMM's operand both ways) saved, not recomputed and written again
  grouped_casts,       // inductor: a program's casts of float32 inputs into bf16 run as one multi-tensor copy at its start
                       // (runtime/parameter_casts)
  attention_bias_sums,  // inductor, GPU: a fused q-k-v projection's bias gradient summed by the kernel that stacks
                        // attention's dq, dk and dv (passes/attention_bias_sums)
  embedding_grad_add,   // inductor: a tied embedding's gradient added into the head's by a scatter into a copy of it
                        // (passes/embedding_grad_add)
  adamw_kernel,         // GPU: the captured step's AdamW update by trainc's multi-tensor kernel, which does not write the
                        // clipped gradients back as ATen's fused AdamW does (train/adamw_kernel)
  gemm_algorithms,      // max-autotune, GPU: cuBLASLt's first-ranked algorithms for each product measured along with
                        // ATen's cuBLAS and cuBLASLt calls (compat/cublaslt_algorithms)
  gelu_epilogue,        // planner, GPU: a linear layer's tanh GELU applied by its GEMM's epilogue, which keeps the
                        // product for the backward (passes/gelu_epilogue)
  gelu_grad_epilogue,   // planner, GPU: that GELU's backward applied by the epilogue of the GEMM that makes the GELU's
                        // incoming gradient, where the layers are not small (passes/gelu_grad_epilogue)
  grad_norm_kernel,     // GPU: gradient clipping's global norm and coefficient by trainc's kernels, ceil(n / 128) + 1
                        // launches, instead of ATen's ten (train/grad_norm_kernel)
  graph_memsets,        // GPU: a captured step's small memset nodes (cuBLASLt's, cuDNN's) made kernel nodes, after
                        // which the next kernel starts sooner (runtime/graph_memsets)
  side_stream,          // inductor, GPU: a captured program's ATen steps that only its outputs wait for (a backward's
                        // weight gradients) recorded on a second stream, overlapping the rest (passes/stream_plan)
  cast_kernel,          // inductor, GPU: grouped_casts' float32 -> bf16 copies by trainc's multi-tensor kernel, 4096
                        // elements a block, instead of ATen's foreach copy, 65536 (runtime/cast_kernel)
  parameter_shadows,    // GPU, trainc's AdamW kernel: parameters' bf16 copies written by the update and read by the
                        // next step's programs instead of cast at its start, the head's in its padded buffer
                        // (runtime/parameter_shadows)
  head_grad_sms,        // GPU, side_stream: the head's weight-gradient GEMM on the second stream aimed at half the SMs
                        // (cuBLASLt's SM count target) where the layers' products are too small to fill the GPU, leaving
                        // the rest to the layers' backward (runtime/linear_cross_entropy)
  stream_priorities,    // GPU: a captured step's main stream of high priority, its second stream's (side_stream) of
                        // ordinary priority, so that freed SMs take the main stream's waiting blocks first
                        // (runtime/step_graphs, compat/cuda_graph)
  row_registers,        // inductor, GPU: a row kernel whose threads (256 at most) own one 8-column group of a row each
                        // loads the row's operands once, at its start, instead of again in every pass after a
                        // reduction (codegen/cuda_kernels)
  dependent_launch,     // GPU from Hopper on: trainc's kernels launched as programmatic dependents of the kernel before
                        // them in their stream, so that each is launched while that one finishes and waits for it
                        // on the GPU, instead of being launched after it (runtime/cuda_modules)
  input_copies,         // GPU: a replay's batch copied from host memory into its graph's buffers on a copy stream,
                        // once the replay before has done its gradients, beside that replay's update, instead of in
                        // line between the two replays (runtime/step_graphs, compat/cuda_graph)
  side_product_sms,     // GPU, side_stream, matmul_to_float: the layers' weight-gradient GEMMs on the second stream aimed at
                        // half the SMs where the layers' products are too small to fill the GPU, as head_grad_sms aims the
                        // head's (runtime/side_product_sms)
  warp_rows,            // inductor, GPU: a row kernel whose rows a warp covers, 1,024 rows or more, runs a row a warp,
                        // eight warps a block, where it ran a row a one-warp block (codegen/cuda_kernels)
  main_stream_tail,     // inductor, GPU, side_stream: a program's ATen steps after its last step on the main stream (a
                        // backward's embedding gradients) kept on the main stream, which would be idle, instead of queued
                        // on the second stream behind its weight-gradient GEMMs (passes/stream_plan)
  device_step_start,    // GPU, whole-step graphs: each step starts on the device, as its graph's first node (the learning rate
                        // from a table of the schedule, the step counts advanced), and tracks its loss on a branch of its
                        // graph, so that nothing is launched between two replays (train/device_step_start)
};

// The names TRAINC_DISABLE_OPTIMIZATIONS takes, comma-separated, in the order of the enum.
std::string optimization_names();

// False when the variable names `optimization`; UserError (exit 2) when it names an unknown one.
bool optimization_enabled(Optimization optimization);

// The names the variable lists, known or not, each once, in the order first given.
std::vector<std::string> disabled_optimizations();

// What a run's log says when the variable turns optimizations off ("compile: running without the
// optimizations TRAINC_DISABLE_OPTIMIZATIONS names: a, b"); empty when it turns none off.
std::string disabled_optimizations_warning();

// UserError (exit 2) naming the variable, the unknown name and the known ones.
void check_disabled_optimizations();

}  // namespace trainc
