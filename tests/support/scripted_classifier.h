// defines: scripted_classifier, write_classifier_rows
//
// A TorchScript classifier scripted by the GPU machine's Python, and rows for it, for the CUDA
// tests that train a model whose forward is theirs to write (trainer_graphs_test, fp16_training_test).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/posix_scratch_dir.h"
#include "support/posix_trainc_runs.h"

namespace trainc::test {

// A classifier of 5 features and 3 classes, scripted into <scratch>/<name>.pt, whose forward is
// `body` over y = proj(tanh(x)); its path. The script is <name>.py, run from its folder: `name`
// must not be a module torch imports ("copy").
inline std::string scripted_classifier(const PosixScratchDir& scratch, const std::string& name, const std::string& body) {
  const std::string module = scratch.file(name + ".pt");
  write_text_file(scratch.file(name + ".py"), "import torch\n"
                                              "class Net(torch.nn.Module):\n"
                                              "    def __init__(self):\n"
                                              "        super().__init__()\n"
                                              "        self.proj = torch.nn.Linear(5, 3)\n"
                                              "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                                              "        y = self.proj(torch.tanh(x))\n" +
                                                  body +
                                                  "torch.manual_seed(0)\n"
                                                  "torch.jit.save(torch.jit.script(Net()), '" +
                                                  module + "')\n");
  REQUIRE(std::system(("python3 " + scratch.file(name + ".py")).c_str()) == 0);
  return module;
}

// 64 rows of 5 features, whose first feature takes both signs, and a class each, as
// <scratch>/train.csv; its path.
inline std::string write_classifier_rows(const PosixScratchDir& scratch) {
  std::string text = "f0,f1,f2,f3,f4,label\n";
  for (int row = 0; row < 64; ++row) {
    double features[5];
    for (int k = 0; k < 5; ++k) features[k] = std::sin(1.7 * row + 0.9 * k + 0.3 * row * k);
    char line[160];
    std::snprintf(line, sizeof(line), "%.6f,%.6f,%.6f,%.6f,%.6f,%d\n", features[0], features[1], features[2], features[3], features[4],
                  features[1] + features[2] > 0 ? (features[3] > 0 ? 2 : 1) : 0);
    text += line;
  }
  write_text_file(scratch.file("train.csv"), text);
  return scratch.file("train.csv");
}

}  // namespace trainc::test
