#include "trainc/models/checkpointed.h"

#include <ATen/Context.h>
#include <torch/autograd.h>

#include "trainc/compat/torch_compat.h"

namespace trainc {
namespace {

struct AutocastState {
  bool enabled = false;
  c10::DeviceType device = c10::DeviceType::CPU;
  at::ScalarType dtype = at::kBFloat16;
};

AutocastState current_autocast(c10::DeviceType device) {
  AutocastState state;
  state.device = device;
#if TRAINC_TORCH_2
  state.enabled = at::autocast::is_autocast_enabled(device);
  state.dtype = at::autocast::get_autocast_dtype(device);
#else
  state.enabled = device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
  state.dtype = device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
  return state;
}

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor input,
                                                const TensorFunction* function) {
    ctx->saved_data["function"] = reinterpret_cast<int64_t>(function);
    ctx->saved_data["rng_state"] = at::globalContext().defaultGenerator(input.device()).get_state();
    const AutocastState autocast = current_autocast(input.device().type());
    ctx->saved_data["autocast"] = autocast.enabled;
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(autocast.dtype);
    ctx->save_for_backward({input});
    torch::NoGradGuard no_grad;
    return {(*function)(input)};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto* function = reinterpret_cast<const TensorFunction*>(ctx->saved_data["function"].toInt());
    const torch::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Generator generator = at::globalContext().defaultGenerator(input.device());
    const torch::Tensor rng_after_forward = generator.get_state();
    generator.set_state(ctx->saved_data["rng_state"].toTensor());
    torch::Tensor output;
    {
      torch::AutoGradMode grad_on(true);
      AutocastScope autocast(input.device().type(), ctx->saved_data["autocast"].toBool(),
                             static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      output = (*function)(input);
    }
    generator.set_state(rng_after_forward);
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {input.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(const TensorFunction* function, const torch::Tensor& input) {
  return CheckpointFunction::apply(input, function)[0];
}

}  // namespace trainc
