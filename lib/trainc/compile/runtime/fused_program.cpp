#include "trainc/compile/runtime/fused_program.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "trainc/common/error.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compat/device_timing.h"
#include "trainc/compile/autotune/library_choice.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/kernel_cache.h"
#include "trainc/compile/runtime/kernel_profile.h"

namespace trainc {
namespace {

// The most workspace the column-sum finishes on the side stream may take, a part each (1024 blocks'
// partial sums of each column): the small GPT's nine take 27 MB; GPT-2's would take about 0.3 GB,
// and keep theirs in line, sharing one part.
constexpr int64_t kSideFinishWorkspaceBytes = int64_t{64} << 20;

}  // namespace

FusedProgram::FusedProgram(ir::Graph graph, Schedule schedule, MemoryPlan plan, const codegen::RenderedProgram& rendered,
                           KernelLauncher launcher, at::Device device, std::shared_ptr<Autotuner> tuner, LaunchVariants launch_variants,
                           StreamPlan streams)
    : graph_(std::move(graph)),
      schedule_(std::move(schedule)),
      plan_(std::move(plan)),
      launcher_(std::move(launcher)),
      device_(device),
      tuner_(std::move(tuner)),
      library_variants_(schedule_.steps.size()),
      decided_(schedule_.steps.size(), false),
      launch_variants_(std::move(launch_variants)),
      launch_shape_(rendered.kernels.size(), -1),
      streams_(std::move(streams)) {
  for (const codegen::RenderedKernel& kernel : rendered.kernels) {
    arguments_.push_back(kernel.arguments);
    reads_.push_back(kernel.reads);
    std::vector<bool> aligned(kernel.arguments.size(), false);
    for (int a : kernel.aligned_arguments) aligned[static_cast<std::size_t>(a)] = true;
    aligned_.push_back(std::move(aligned));
    finish_outputs_.push_back(kernel.finish_outputs);
    workspace_floats_.push_back(kernel.workspace_floats);
  }
  finish_launch_ = rendered.finish_launches();
  if (optimization_enabled(Optimization::grouped_casts)) {
    std::vector<ir::ValueId> aten_values;
    for (const ScheduleStep& step : schedule_.steps) {
      if (step.kind == ScheduleStep::Kind::aten) aten_values.push_back(step.index);
    }
    parameter_casts_ = ParameterCasts(graph_, aten_values);
  }
  // Release each value after the last step that reads it (through views too); outputs stay.
  const auto n = static_cast<std::size_t>(graph_.size());
  std::vector<int> last(n, -1);
  std::vector<std::set<ir::ValueId>> reads_through(n);  // a lazy value's tensor reads these
  const auto mark = [&](ir::ValueId v, int step) {
    last[static_cast<std::size_t>(v)] = std::max(last[static_cast<std::size_t>(v)], step);
    for (ir::ValueId r : reads_through[static_cast<std::size_t>(v)]) last[static_cast<std::size_t>(r)] = std::max(last[static_cast<std::size_t>(r)], step);
  };
  for (ir::ValueId id = 0; id < graph_.size(); ++id) {
    if (!is_lazy(graph_, schedule_, id)) continue;
    for (ir::ValueId in : graph_.node(id).inputs) {
      reads_through[static_cast<std::size_t>(id)].insert(in);
      reads_through[static_cast<std::size_t>(id)].insert(reads_through[static_cast<std::size_t>(in)].begin(),
                                                        reads_through[static_cast<std::size_t>(in)].end());
    }
  }
  for (std::size_t s = 0; s < schedule_.steps.size(); ++s) {
    for (ir::ValueId in : step_inputs(s)) mark(in, static_cast<int>(s));
  }
  for (ir::ValueId output : graph_.outputs()) mark(output, static_cast<int>(schedule_.steps.size()));
  if (kernel_profile_requested()) {
    step_seconds_.assign(schedule_.steps.size(), 0.0);
    for (const ScheduleStep& step : schedule_.steps) {
      if (step.kind == ScheduleStep::Kind::aten) {
        step_labels_.push_back(std::string("aten ") + ir::op_name(graph_.node(step.index).op) + " -> " + graph_.type(step.index).str());
      } else {
        const codegen::RenderedKernel& kernel = rendered.kernels[static_cast<std::size_t>(step.index)];
        const std::size_t begin = kernel.source.find("// kernel");
        int fresh = 0;
        for (std::size_t a = static_cast<std::size_t>(kernel.reads); a < kernel.arguments.size(); ++a) {
          fresh += plan_.slot_of[static_cast<std::size_t>(kernel.arguments[a])] < 0 ? 1 : 0;
        }
        step_labels_.push_back(kernel.source.substr(begin + 3, kernel.source.find('\n', begin) - begin - 3) + " [stores " +
                               std::to_string(kernel.arguments.size() - static_cast<std::size_t>(kernel.reads)) + ", " +
                               std::to_string(fresh) + " outside the arena]");
      }
    }
  }
  finish_on_side_.assign(rendered.kernels.size(), false);
  // Per-step timings (TRAINC_PROFILE_KERNELS) are taken outside captures, where nothing overlaps anyway.
  if (!streams_.batch.empty() && device_.is_cuda()) {
    side_stream_ = std::make_unique<SideStream>(device_);
    // The values some step reads, and the first step that reads a large parameter cast (a tied
    // embedding's table), which runs beside the steps before it.
    const std::vector<ir::ValueId> large_casts = parameter_casts_.large_casts(graph_);
    large_casts_on_side_ = !large_casts.empty();
    std::vector<bool> read(n, false);
    for (std::size_t s = 0; s < schedule_.steps.size(); ++s) {
      for (ir::ValueId in : step_inputs(s)) {
        read[static_cast<std::size_t>(in)] = true;
        for (ir::ValueId r : reads_through[static_cast<std::size_t>(in)]) read[static_cast<std::size_t>(r)] = true;
        for (ir::ValueId cast : large_casts) {
          const bool reads_cast = in == cast || reads_through[static_cast<std::size_t>(in)].count(cast) > 0;
          if (reads_cast && first_large_cast_reader_ < 0) first_large_cast_reader_ = static_cast<int>(s);
        }
      }
    }
    // A finish may run beside later steps when no step reads what it writes (the outputs are read
    // after the program's last wait) and that is not in the arena.
    int64_t side_floats = 0;
    for (std::size_t k = 0; k < finish_outputs_.size(); ++k) {
      finish_on_side_[k] = finish_launch_[k] >= 0 && std::none_of(finish_outputs_[k].begin(), finish_outputs_[k].end(), [&](ir::ValueId id) {
                             return read[static_cast<std::size_t>(id)] || plan_.slot_of[static_cast<std::size_t>(id)] >= 0;
                           });
      side_floats += finish_on_side_[k] ? workspace_floats_[k] : 0;
    }
    // Each such finish needs a part of the workspace to itself: past this, they stay in line.
    if (side_floats * static_cast<int64_t>(sizeof(float)) > kSideFinishWorkspaceBytes) finish_on_side_.assign(finish_on_side_.size(), false);
    // A batch is complete after its last step.
    computed_on_side_.assign(n, false);
    batch_ends_.assign(schedule_.steps.size(), -1);
    std::vector<bool> ended(static_cast<std::size_t>(streams_.batches), false);
    for (std::size_t s = schedule_.steps.size(); s-- > 0;) {
      const int32_t batch = streams_.batch[s];
      if (batch < 0) continue;
      computed_on_side_[static_cast<std::size_t>(schedule_.steps[s].index)] = true;  // an ATen step's value
      if (!ended[static_cast<std::size_t>(batch)]) batch_ends_[s] = batch;
      ended[static_cast<std::size_t>(batch)] = true;
    }
  }
  // The kernels whose finish runs in line share the workspace's first part, sized for the largest;
  // each finish on the side stream has a part of its own after it.
  int64_t shared_floats = 0;
  for (std::size_t k = 0; k < workspace_floats_.size(); ++k) {
    if (!finish_on_side_[k]) shared_floats = std::max(shared_floats, workspace_floats_[k]);
  }
  int64_t workspace_floats = (shared_floats + 15) / 16 * 16;  // 64-byte aligned parts
  workspace_offset_.assign(workspace_floats_.size(), 0);
  for (std::size_t k = 0; k < workspace_floats_.size(); ++k) {
    if (!finish_on_side_[k]) continue;
    workspace_offset_[k] = workspace_floats;
    workspace_floats += (workspace_floats_[k] + 15) / 16 * 16;
  }
  workspace_total_floats_ = workspace_floats;
  release_.resize(schedule_.steps.size());
  for (ir::ValueId id = 0; id < graph_.size(); ++id) {
    const int step = last[static_cast<std::size_t>(id)];
    if (step >= 0 && step < static_cast<int>(release_.size())) release_[static_cast<std::size_t>(step)].push_back(id);
  }
}

FusedProgram::~FusedProgram() {
  if (step_seconds_.empty()) return;
  std::vector<std::size_t> order(step_seconds_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return step_seconds_[a] > step_seconds_[b]; });
  double total = 0.0;
  for (double s : step_seconds_) total += s;
  std::map<std::string, double> by_kind;  // "kernels", "aten matmul", ...
  for (std::size_t i = 0; i < step_labels_.size(); ++i) {
    const std::string& label = step_labels_[i];
    by_kind[label.rfind("aten ", 0) == 0 ? label.substr(0, label.find(" ->")) : "generated kernels"] += step_seconds_[i];
  }
  std::fprintf(stderr, "profile: %zu steps, %.3f s in all;", order.size(), total);
  for (const auto& [kind, seconds] : by_kind) std::fprintf(stderr, " %s %.3f s,", kind.c_str(), seconds);
  std::fprintf(stderr, "\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(order.size(), 25); ++i) {
    std::fprintf(stderr, "  %8.3f s  %5.1f%%  %s\n", step_seconds_[order[i]], 100.0 * step_seconds_[order[i]] / total,
                 step_labels_[order[i]].c_str());
  }
  // The same ATen call once per layer adds up where no single call shows: totals per label.
  std::map<std::string, std::pair<double, int>> by_label;
  for (std::size_t i = 0; i < step_labels_.size(); ++i) {
    if (step_labels_[i].rfind("aten ", 0) != 0) continue;
    by_label[step_labels_[i]].first += step_seconds_[i];
    ++by_label[step_labels_[i]].second;
  }
  std::vector<std::pair<double, std::string>> labels;
  for (const auto& [label, seconds_and_count] : by_label) labels.emplace_back(seconds_and_count.first, label);
  std::sort(labels.rbegin(), labels.rend());
  std::fprintf(stderr, "profile: ATen calls by kind and result:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(labels.size(), 25); ++i) {
    std::fprintf(stderr, "  %8.3f s  %4dx  %s\n", labels[i].first, by_label[labels[i].second].second, labels[i].second.c_str());
  }
}

std::vector<ir::ValueId> FusedProgram::step_inputs(std::size_t s) const {
  const ScheduleStep& step = schedule_.steps[s];
  if (step.kind == ScheduleStep::Kind::aten) return graph_.node(step.index).inputs;
  const std::vector<ir::ValueId>& args = arguments_[static_cast<std::size_t>(step.index)];
  return {args.begin(), args.begin() + reads_[static_cast<std::size_t>(step.index)]};
}

const at::Tensor& FusedProgram::value(std::vector<at::Tensor>& values, ir::ValueId id) const {
  at::Tensor& slot = values[static_cast<std::size_t>(id)];
  if (slot.defined()) return slot;
  const ir::Node& node = graph_.node(id);
  TRAINC_CHECK(is_lazy(graph_, schedule_, id) && node.op != ir::Op::input, std::string("value %") + std::to_string(id) + " read before it is computed");
  std::vector<at::Tensor> inputs;
  for (ir::ValueId in : node.inputs) inputs.push_back(value(values, in));
  slot = ir::execute_node(node, inputs, device_);
  return slot;
}

int FusedProgram::choose_launch_shape(std::size_t k, const std::vector<void*>& pointers) {
  if (!tuner_ || launch_variants_.launchers.size() < 2) return -1;
  // Measured runs store into scratch buffers: the memory plan may give a store the slot of a value
  // the kernel reads, and measuring must leave the step's values as they are.
  std::vector<at::Tensor> scratch;
  std::vector<void*> measured = pointers;
  const std::vector<ir::ValueId>& args = arguments_[k];
  for (std::size_t a = static_cast<std::size_t>(reads_[k]); a < args.size(); ++a) {
    const ir::TensorType& type = graph_.type(args[a]);
    scratch.push_back(at::empty(type.shape, at::TensorOptions().dtype(ir::to_scalar_type(type.dtype)).device(device_)));
    measured[a] = scratch.back().data_ptr();
  }
  std::vector<TuningCandidate> candidates;
  std::set<std::string> seen;
  std::string listed;
  for (std::size_t shape = 0; shape < launch_variants_.launchers.size(); ++shape) {
    if (!seen.insert(launch_variants_.code[shape][k]).second) continue;
    candidates.push_back({launch_variants_.names[shape], [this, k, shape, &measured] {
                            launch_variants_.launchers[shape](k, measured.data(), measured.size());
                          }});
    listed += (listed.empty() ? "" : "; ") + launch_variants_.names[shape];
  }
  if (candidates.size() < 2) return -1;
  std::string code;
  for (const std::vector<std::string>& per_shape : launch_variants_.code) code += per_shape[k];
  const std::string key = device_identity(device_) + " | generated kernel " + content_hash({code}) + " | " + listed;
  const std::optional<std::string> chosen = tuner_->choose(key, candidates);
  for (std::size_t shape = 0; chosen && shape < launch_variants_.names.size(); ++shape) {
    if (launch_variants_.names[shape] == *chosen) return static_cast<int>(shape);
  }
  return -1;
}

at::Tensor FusedProgram::planned(ir::ValueId id) const {
  const ir::TensorType& type = graph_.type(id);
  const int slot = plan_.slot_of[static_cast<std::size_t>(id)];
  const auto options = at::TensorOptions().dtype(ir::to_scalar_type(type.dtype)).device(device_);
  return slot >= 0 ? at::from_blob(arena_[static_cast<std::size_t>(slot)].data_ptr(), type.shape, options) : at::empty(type.shape, options);
}

std::vector<at::Tensor> FusedProgram::run(std::vector<at::Tensor> inputs) {
  std::vector<at::Tensor> values(static_cast<std::size_t>(graph_.size()));
  std::size_t next_input = 0;
  for (ir::ValueId id = 0; id < graph_.size(); ++id) {
    if (graph_.node(id).op != ir::Op::input) continue;
    TRAINC_CHECK(next_input < inputs.size(), "fewer tensors than program inputs");
    const at::Device on = inputs[next_input].device();
    TRAINC_CHECK(on.type() == device_.type() && (!device_.has_index() || on.index() == device_.index()),
                 "kernels generated for " + device_.str() + " given a tensor on " + on.str());
    values[static_cast<std::size_t>(id)] = std::move(inputs[next_input++]);
  }
  TRAINC_CHECK(next_input == inputs.size(), "more tensors than program inputs");
  if (arena_.empty()) {
    for (int64_t bytes : plan_.slot_bytes) arena_.push_back(at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_)));
    if (workspace_total_floats_ > 0) workspace_ = at::empty({workspace_total_floats_}, at::TensorOptions().dtype(at::kFloat).device(device_));
  }

  // The side stream's steps read their inputs until the main stream waits for their batch: the
  // tensors are kept here until then, so that memory freed meanwhile is not reused under them.
  const bool use_side_stream = side_stream_ && cuda_stream_capturing();
  const int casts_mark = streams_.batches;  // the marks after the batches'
  SideStream* const casts_side = use_side_stream && large_casts_on_side_ ? side_stream_.get() : nullptr;
  std::vector<bool> computed_early(values.size(), false);  // by parameter_casts_: their steps are skipped
  std::vector<at::Tensor> cast_sources;                    // what the side stream's casts read, kept until their wait
  for (ir::ValueId id : parameter_casts_.run(graph_, values, device_, casts_side, casts_mark, &cast_sources)) {
    computed_early[static_cast<std::size_t>(id)] = true;
  }

  std::vector<std::vector<at::Tensor>> side_reads(static_cast<std::size_t>(streams_.batches));
  std::vector<at::Tensor> held;  // contiguous copies made for one kernel call
  std::vector<void*> pointers;
  for (std::size_t s = 0; s < schedule_.steps.size(); ++s) {
    const ScheduleStep& step = schedule_.steps[s];
    const bool profiling = !step_seconds_.empty();
    const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (casts_side != nullptr && static_cast<int>(s) == first_large_cast_reader_) {
      casts_side->wait_for_mark(casts_mark);
      cast_sources.clear();
    }
    if (use_side_stream && streams_.wait_before[s] >= 0) {
      side_stream_->wait_for_mark(streams_.wait_before[s]);
      for (int32_t b = 0; b <= streams_.wait_before[s]; ++b) side_reads[static_cast<std::size_t>(b)].clear();
    }
    if (step.kind == ScheduleStep::Kind::aten && computed_early[static_cast<std::size_t>(step.index)]) {
      // A parameter cast, computed before the first step.
    } else if (step.kind == ScheduleStep::Kind::aten) {
      const ir::Node& node = graph_.node(step.index);
      const int32_t batch = use_side_stream ? streams_.batch[s] : -1;
      std::vector<at::Tensor> args;
      for (ir::ValueId in : node.inputs) {
        args.push_back(value(values, in));  // on the main stream: a constant is a launch
        // A view made here of what the side stream computes must not copy it (on this stream, before it is done).
        const ir::ValueId base = schedule_.accesses[static_cast<std::size_t>(in)].base;
        if (batch >= 0 && base >= 0 && base != in && computed_on_side_[static_cast<std::size_t>(base)]) {
          TRAINC_CHECK(args.back().is_alias_of(values[static_cast<std::size_t>(base)]), "a view the second stream reads is a copy");
        }
      }
      // Decided outside a CUDA graph's capture, which cannot wait for a measurement; the warm-up
      // run before a capture decides.
      if (!decided_[s] && !cuda_stream_capturing()) {
        library_variants_[s] = choose_library_variant(node, args, device_, tuner_.get());
        decided_[s] = true;
      }
      at::Tensor& result = values[static_cast<std::size_t>(step.index)];
      if (batch >= 0) {
        side_stream_->run([&] { result = ir::execute_node(node, args, device_, library_variants_[s]); });
        std::vector<at::Tensor>& kept = side_reads[static_cast<std::size_t>(batch)];
        kept.insert(kept.end(), args.begin(), args.end());
      } else {
        result = ir::execute_node(node, args, device_, library_variants_[s]);
      }
    } else {
      const auto k = static_cast<std::size_t>(step.index);
      const std::vector<ir::ValueId>& args = arguments_[k];
      held.clear();
      pointers.clear();
      for (std::size_t a = 0; a < args.size(); ++a) {
        const ir::ValueId id = args[a];
        const ir::TensorType& type = graph_.type(id);
        if (static_cast<int>(a) < reads_[k]) {
          // Kernels read their bases as contiguous memory (the strides in the source assume it).
          const at::Tensor& tensor = value(values, id);
          TRAINC_CHECK(tensor.scalar_type() == ir::to_scalar_type(type.dtype), "kernel argument of the wrong dtype");
          held.push_back(tensor.is_contiguous() ? tensor : tensor.contiguous());
          // A kernel that loads 16 bytes at a time gets a fresh (aligned) copy of a view that
          // starts inside an element group.
          if (aligned_[k][a] && reinterpret_cast<std::uintptr_t>(held.back().data_ptr()) % 16 != 0) held.back() = held.back().clone();
        } else {
          values[static_cast<std::size_t>(id)] = planned(id);
          const at::Tensor& out = values[static_cast<std::size_t>(id)];
          TRAINC_CHECK(!aligned_[k][a] || reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 16 == 0, "a kernel's store is not 16-byte aligned");
          held.push_back(out);
        }
        pointers.push_back(held.back().data_ptr());
      }
      float* const workspace = workspace_floats_[k] > 0 ? workspace_.data_ptr<float>() + workspace_offset_[k] : nullptr;
      if (workspace != nullptr) pointers.push_back(workspace);  // the kernel's last argument
      if (!decided_[s] && !cuda_stream_capturing()) {
        launch_shape_[k] = choose_launch_shape(k, pointers);
        decided_[s] = true;
      }
      const int shape = launch_shape_[k];
      (shape < 0 ? launcher_ : launch_variants_.launchers[static_cast<std::size_t>(shape)])(k, pointers.data(), pointers.size());
      if (finish_launch_[k] >= 0) {
        // The column sums: the blocks' partial sums added up into each column member.
        pointers.assign(1, workspace);
        for (ir::ValueId id : finish_outputs_[k]) {
          values[static_cast<std::size_t>(id)] = planned(id);
          pointers.push_back(values[static_cast<std::size_t>(id)].data_ptr());
        }
        const auto finish = [&] { launcher_(static_cast<std::size_t>(finish_launch_[k]), pointers.data(), pointers.size()); };
        if (use_side_stream && finish_on_side_[k]) {
          side_stream_->run(finish);
        } else {
          finish();
        }
      }
    }
    if (use_side_stream && batch_ends_[s] >= 0) side_stream_->set_mark(batch_ends_[s]);
    if (profiling) {
      // A GPU runs steps asynchronously: a copy to the host waits for this one to finish (not
      // while a CUDA graph records the step: a capture cannot wait, and records no time anyway).
      if (!device_.is_cpu() && !cuda_stream_capturing()) at::empty({1}, at::TensorOptions().device(device_)).cpu();
      step_seconds_[s] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    for (ir::ValueId id : release_[s]) values[static_cast<std::size_t>(id)].reset();
  }
  if (use_side_stream) side_stream_->join();
  std::vector<at::Tensor> outputs;
  for (ir::ValueId output : graph_.outputs()) outputs.push_back(value(values, output));
  return outputs;
}

}  // namespace trainc
