#pragma once
// The message of an exception for a user: LibTorch's c10::Error carries a C++ stack
// trace in what(), which would bury the one line that says what went wrong.

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace sb {

inline std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace sb
