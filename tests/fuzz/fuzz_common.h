// Small helpers shared by the libFuzzer targets.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace feed::fuzz {

// A fuzz target's assertion: prints what broke and aborts, so libFuzzer saves the input.
[[noreturn]] inline void Fail(const char* file, int line, const char* cond,
                              const std::string& detail) {
  std::fprintf(stderr, "\n*** FUZZ CHECK FAILED at %s:%d: %s\n    %s\n", file, line, cond,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string ToString(const absl::Status& s) { return std::string(s.ToString()); }

}  // namespace feed::fuzz

#define FUZZ_CHECK(cond, detail)                                          \
  do {                                                                    \
    if (!(cond)) ::feed::fuzz::Fail(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)
