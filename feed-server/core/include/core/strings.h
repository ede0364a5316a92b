// StrCat for std::string_view. Debian's abseil is built with its own absl::string_view, so
// absl::StrCat does not take std::string_view; this small one does.
#pragma once

#include <concepts>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace feed {

namespace strings_internal {
inline void Append(std::string& out, std::string_view s) { out.append(s); }
inline void Append(std::string& out, const char* s) { out.append(s); }
inline void Append(std::string& out, const std::string& s) { out.append(s); }
inline void Append(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void Append(std::string& out, char c) { out.push_back(c); }
inline void Append(std::string& out, bool b) { out.append(b ? "true" : "false"); }
template <std::integral T>
  requires(!std::same_as<T, char> && !std::same_as<T, bool>)
void Append(std::string& out, T v) {
  out.append(std::to_string(v));
}
inline void Append(std::string& out, double v) { out.append(std::to_string(v)); }
}  // namespace strings_internal

template <class... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::Append(out, args), ...);
  return out;
}

}  // namespace feed
