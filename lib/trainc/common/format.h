// defines: format_number — a number for the run's messages, to a few significant digits
//
// Shared by the trainer's log lines and `trainc explain`. Config values are written with
// config/value_codec's format_double instead, which reads back as the same double.
#pragma once

#include <sstream>
#include <string>

namespace trainc {

inline std::string format_number(double value, int precision = 4) {
  std::ostringstream text;
  text.precision(precision);
  text << value;
  return text.str();
}

}  // namespace trainc
