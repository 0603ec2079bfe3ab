// defines: config_reference_markdown — docs/config.md, generated from the field tables
//
// `trainc --print-config-reference` prints it; a test fails when docs/config.md differs, so the
// reference can never drift from what the parser accepts.
#pragma once

#include <string>

namespace trainc {

std::string config_reference_markdown();

}  // namespace trainc
