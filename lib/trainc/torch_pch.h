// The LibTorch headers precompiled once per target (CMake's TRAINC_PCH). Sources still include
// the narrowest headers they need, so they also build with TRAINC_PCH=OFF.
#pragma once

#include <torch/torch.h>
