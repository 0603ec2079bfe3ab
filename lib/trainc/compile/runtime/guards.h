// defines: input_signature
//
// The guard of a compiled step: the batch's shapes, dtypes and device. A batch with another
// signature (say, the last, partial batch of an epoch) needs its own compiled step.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace trainc {

// "inputs f32[64, 784] cpu, targets i64[64] cpu"
std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets);
// The same for the batch once it is on `device` (a batch still in host memory, bound for it).
std::string input_signature(const at::Tensor& inputs, const at::Tensor& targets, c10::Device device);

}  // namespace trainc
