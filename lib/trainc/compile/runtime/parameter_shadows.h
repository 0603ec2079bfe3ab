// defines: ParameterShadows
//
// bf16 copies of float32 parameters kept current by the optimizer's update, so a bf16 step's
// programs read them instead of casting the parameters at every step. On the small GPT the casts
// at a captured step's start kept the GPU from the forward for about 30 us (3.2M layer elements
// and the 12.9M-element embedding table, whose blocks held the SMs the first layer wanted), and
// the head then copied the bf16 table into a buffer padded to an aligned vocabulary (23 us).
// trainc's AdamW kernel writes a parameter's bf16 copy as it writes the parameter (2 bytes more an
// element where a separate cast reads 4 and writes 2), and the table's copy lives in its padded
// buffer, so neither the casts nor the padding copy remain.
//
// The optimizer tracks its parameters (switch parameter_shadows, on a GPU with trainc's AdamW
// kernel); a program's grouped casts (runtime/parameter_casts) give a tracked parameter its shadow
// on first use, cast into it, and afterwards read it as it is while it is fresh. A shadow is fresh
// while nothing else has written its parameter since the cast or the update that wrote both: the
// parameter's version counter (every ATen write in place advances it; trainc's kernel, which
// writes through raw pointers, does not) and data pointer are what they were then. A write that
// bypasses the version counter must be followed by mark_stale (the trainer's one, a collective's
// broadcast of the first weights, comes before the optimizer tracks anything). An update that
// does not write the shadows (ATen's fused AdamW, where trainc's kernel does not take the
// tensors) casts them after it (cast_shadows), which a capture records as well. A CUDA graph's
// capture freezes whether a program casts: before each replay the step casts whatever is stale
// (refresh_stale), outside the graph, and a graph captured before a shadow existed, whose update
// does not write it, leaves every shadow stale after its replay (generation).
//
// A shadow asked for with more rows (the head's padded vocabulary) is the first rows of a buffer
// whose other rows are zero and stay so: padded_base gives the head that buffer.
//
// One registry per process: parameters are tracked by their TensorImpl, weakly, so a parameter
// freed and another made at its address are never confused.
#pragma once

#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace trainc {

class ParameterShadows {
 public:
  static ParameterShadows& instance();

  // `parameters` (float32, on a GPU) get shadows where a program casts them to bf16.
  void track(at::TensorList parameters);
  bool tracked(const at::Tensor& parameter) const;
  // The optimizer that tracked them is gone: their shadows with it.
  void untrack(at::TensorList parameters);

  // The bf16 shadows of tracked `parameters` (undefined for the others), cast now into those that
  // are not fresh, made on first use: a shadow of a parameter of R rows asked with padded_rows[i]
  // > R is the first R rows of a [padded_rows[i], ...] buffer whose other rows are zero.
  std::vector<at::Tensor> shadows(at::TensorList parameters, const std::vector<int64_t>& padded_rows);

  // For the optimizer's update: the shadows that exist for `parameters` (undefined where none).
  // The update writes each parameter and its shadow together; updated() then marks them fresh.
  std::vector<at::Tensor> shadows_to_update(at::TensorList parameters);
  void updated(at::TensorList parameters);
  // After an update that wrote `parameters` but not their shadows: casts into those that exist.
  void cast_shadows(at::TensorList parameters);
  // How many shadows have been made so far in the process.
  int64_t generation() const;
  void mark_all_stale();

  // Casts every stale shadow (before a CUDA graph replay, whose programs read them uncast).
  void refresh_stale();
  // After a write to `parameters` that their version counters do not see.
  void mark_stale(at::TensorList parameters);

  // The zero-padded [padded_rows, ...] buffer whose first rows `tensor` is (a shadow asked with
  // padding), undefined otherwise.
  at::Tensor padded_base(const at::Tensor& tensor, int64_t padded_rows) const;

 private:
  struct Entry {
    explicit Entry(const at::Tensor& tracked) : parameter(tracked.getIntrusivePtr()) {}
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> parameter;
    at::Tensor shadow;  // undefined until a program asks for it
    at::Tensor base;    // the padded buffer the shadow starts, or the shadow
    bool fresh = false;
    const void* data = nullptr;  // the parameter's data and version when the shadow was written
    int64_t version = -1;
  };
  // The entry of a tracked, live `parameter`, or null.
  Entry* find(const at::Tensor& parameter);
  const Entry* find(const at::Tensor& parameter) const;
  static bool is_fresh(const Entry& entry, const at::Tensor& parameter);
  static void record_written(Entry& entry, const at::Tensor& parameter);
  // Casts `parameters` into the shadows of `entries` (one multi-tensor launch where it can).
  static void cast_into(const std::vector<Entry*>& entries, const std::vector<at::Tensor>& parameters);
  void drop_expired();

  mutable std::mutex mutex_;
  std::unordered_map<const c10::TensorImpl*, Entry> entries_;
  int64_t generation_ = 0;
};

}  // namespace trainc
