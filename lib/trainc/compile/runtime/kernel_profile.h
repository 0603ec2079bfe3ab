// defines: kernel_profile_requested — whether TRAINC_PROFILE_KERNELS asks for the per-kernel profile
//
// "1" turns it on; unset, empty or "0" leaves it off. Any other value is a UserError naming the
// variable: a typo ("yes", "true") must not read as "off" without a word. The command checks it at
// start; each fused program reads it when it is built (docs/debugging.md).
#pragma once

namespace trainc {

bool kernel_profile_requested();

}  // namespace trainc
