// defines: ParameterCasts
//
// A program's casts of float32 inputs into bf16 or float16 (autocast's weights and biases, directly
// or through permutes and reshapes) run together, before the program's first step, as one
// multi-tensor copy per target dtype (foreach_copy_, or on a GPU for bf16 trainc's kernel with more
// blocks, runtime/cast_kernel) instead of one ATen kernel each where the
// program reads them: GPT-2's forward has 98 of them, each a launch of a few microseconds, in a
// CUDA graph too. Each cast is the whole input converted in its own memory order with the same
// views applied after, which is what ATen's cast of the view gives (it keeps the view's strides).
//
// Only casts that cost no memory by starting early are taken: those the program returns (kept to
// its end anyway: the forward saves its weight casts for the backward) and small ones (a bias).
// A cast of a saved activation in the backward stays at its step. So do casts whose input is not
// contiguous at run time. Given a side stream (a CUDA graph's capture), the large ones without
// views after them (a tied embedding's table, which only the head reads, at the forward's end) run
// there, after the main stream's casts and beside the steps before their first reader.
//
// A bf16 cast of a parameter the optimizer keeps a shadow of (runtime/parameter_shadows) is that
// shadow, cast into only when stale; the head's weight's is asked with the head's padded rows.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "trainc/compat/side_stream.h"
#include "trainc/compile/ir/graph.h"

namespace trainc {

class ParameterCasts {
 public:
  ParameterCasts() = default;
  // The casts among `aten_values` (the values `graph`'s ATen steps compute) taken together.
  ParameterCasts(const ir::Graph& graph, const std::vector<ir::ValueId>& aten_values);

  // Computes the casts whose inputs allow it into values[cast] (`values` holds the program's
  // inputs) and returns those it computed. With `side`, the large ones go on it, followed by its
  // mark `side_mark`, which the caller waits for before a step reads them; until then it keeps
  // what they read, which this adds to `side_sources`.
  std::vector<ir::ValueId> run(const ir::Graph& graph, std::vector<at::Tensor>& values, at::Device device, SideStream* side = nullptr,
                               int side_mark = 0, std::vector<at::Tensor>* side_sources = nullptr) const;
  std::size_t size() const { return casts_.size(); }
  // The casts that go on a side stream when there is one (large, no views after them: a view made
  // on the main stream could be a copy, reading the cast before it is done).
  std::vector<ir::ValueId> large_casts(const ir::Graph& graph) const;

 private:
  struct Cast {
    ir::ValueId value;                // the cast
    ir::ValueId input;                // the program input it converts
    std::vector<ir::ValueId> views;   // the views between them, input side first
    int64_t padded_rows = 0;          // the head's padded vocabulary when the cast is its weight
  };
  std::vector<Cast> casts_;
  bool cast_kernel_ = false;  // bf16 casts by runtime/cast_kernel where it takes them (switch cast_kernel)
};

}  // namespace trainc
