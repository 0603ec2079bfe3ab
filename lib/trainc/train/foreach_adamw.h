// defines: ForeachAdamW — LibTorch's AdamW with a multi-tensor update
//
// The same arithmetic, options and per-parameter state as torch::optim::AdamW (so checkpoints
// and resumes are interchangeable), but each group is updated with ATen's _foreach_* ops: on a GPU
// a handful of multi-tensor kernels per step instead of about ten kernels per parameter tensor,
// which is what torch.optim.AdamW's foreach path does for Hugging Face's adamw_torch.
#pragma once

#include <torch/optim/adamw.h>

namespace trainc {

class ForeachAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace trainc
