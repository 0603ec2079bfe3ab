#include "trainc/train/foreach_adamw.h"

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "trainc/common/error.h"
#include "trainc/compat/torch_compat.h"

namespace trainc {

torch::Tensor ForeachAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = closure_loss(closure);
  for (auto& group : param_groups()) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
    TRAINC_CHECK(!options.amsgrad(), "ForeachAdamW does not implement amsgrad");
    const double lr = options.lr();
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    // Parameters advance together, but one that missed a gradient has a different step count:
    // bucket by step so every bucket shares its bias corrections, and by device and dtype, which
    // one fused kernel call needs to share.
    struct Bucket {
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    };
    std::map<std::tuple<int64_t, std::string, at::ScalarType>, Bucket> buckets;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = adamw_state(state_, p);
      state.step(state.step() + 1);
      Bucket& bucket = buckets[{state.step(), p.device().str(), p.scalar_type()}];
      bucket.params.push_back(p);
      bucket.grads.push_back(p.grad());
      bucket.exp_avgs.push_back(state.exp_avg());
      bucket.exp_avg_sqs.push_back(state.exp_avg_sq());
    }
    for (auto& [key, bucket] : buckets) {
      const int64_t step = std::get<0>(key);
      if (fused_ && bucket.params.front().is_cuda()) {
        // The kernel reads each parameter's step count from a tensor; one shared by the bucket.
        const at::Tensor count = at::full({}, static_cast<double>(step), bucket.params.front().options().dtype(at::kFloat));
        const std::vector<at::Tensor> steps(bucket.params.size(), count);
        if (fused_adamw_update(bucket.params, bucket.grads, bucket.exp_avgs, bucket.exp_avg_sqs, steps, lr, beta1, beta2,
                               options.weight_decay(), options.eps())) {
          continue;
        }
      }
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
      if (options.weight_decay() != 0) at::_foreach_mul_(bucket.params, 1 - lr * options.weight_decay());
      at::_foreach_mul_(bucket.exp_avgs, beta1);
      at::_foreach_add_(bucket.exp_avgs, bucket.grads, 1 - beta1);
      at::_foreach_mul_(bucket.exp_avg_sqs, beta2);
      at::_foreach_addcmul_(bucket.exp_avg_sqs, bucket.grads, bucket.grads, 1 - beta2);
      std::vector<torch::Tensor> denom = at::_foreach_sqrt(bucket.exp_avg_sqs);
      at::_foreach_div_(denom, std::sqrt(bias_correction2));
      at::_foreach_add_(denom, options.eps());
      at::_foreach_addcdiv_(bucket.params, bucket.exp_avgs, denom, -lr / bias_correction1);
    }
  }
  return loss;
}

}  // namespace trainc
