// A google.api.http path template, e.g. "/v1/reservations/{reservation_id}:commit": literal
// segments, variables bound to a request field ("{field}" or "{field=*}", one segment;
// dotted field paths allowed) and an optional ":verb" after the last segment.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace feed::http {

class PathTemplate {
 public:
  // INVALID_ARGUMENT for what this gateway does not support ("**", nested templates).
  static absl::StatusOr<PathTemplate> Parse(std::string_view text);

  // The variables' values (percent-decoded), in template order, when `path` matches.
  std::optional<std::vector<std::pair<std::string, std::string>>> Match(
      std::string_view path) const;

  const std::string& text() const { return text_; }
  // Field paths bound by the template's variables.
  std::vector<std::string> variables() const;
  // The template's literal prefix before its first variable, without a verb
  // ("/v1/reservations/{reservation_id}" -> "/v1/reservations"), and whether the template
  // is exactly that prefix plus one variable segment (a resource under a collection).
  bool IsMemberOf(const PathTemplate& collection, std::string* field) const;

 private:
  struct Segment {
    std::string literal;   // when not a variable
    std::string variable;  // field path, when a variable
  };
  std::string text_;
  std::vector<Segment> segments_;
  std::string verb_;
};

// Decodes %XX escapes (and '+' as a space in query strings); nullopt for a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space = false);

}  // namespace feed::http
