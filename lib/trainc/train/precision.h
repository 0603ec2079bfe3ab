// defines: Precision, resolve_precision
//
// bf16 and fp16 follow Hugging Face: autocast around the forward pass and the loss, weights and
// optimizer state in float32. fp16 also scales the loss (train/loss_scaler).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "trainc/config/training_arguments.h"

namespace trainc {

struct Precision {
  bool autocast = false;
  c10::ScalarType dtype = c10::kFloat;
  c10::DeviceType device = c10::DeviceType::CPU;
  std::string name = "fp32";
  std::string tf32_note;  // set when TF32 was turned on without being asked for (Hugging Face's compile rule)
};

// UserError when the device cannot run the requested precision (fp16 or tf32 on the CPU).
// As Hugging Face's TrainingArguments: compiling on an Ampere or newer GPU with tf32 unset (and
// not fp16) turns TF32 matmuls and convolutions on.
Precision resolve_precision(const TrainingArguments& args, c10::Device device);

}  // namespace trainc
