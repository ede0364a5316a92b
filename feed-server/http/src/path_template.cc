#include "path_template.h"

#include "fmt/format.h"
#include "text.h"

namespace feed::http {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits "/a/b:verb" into segments and the verb (the part after the last ':' of the last
// segment).
std::pair<std::vector<std::string_view>, std::string_view> SplitPath(std::string_view path,
                                                                     bool has_verb) {
  std::string_view verb;
  if (has_verb) {
    size_t slash = path.rfind('/');
    size_t colon = path.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
      verb = path.substr(colon + 1);
      path = path.substr(0, colon);
    }
  }
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  std::vector<std::string_view> segments = Split(path, '/');
  return {segments, verb};
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (plus_is_space && text[i] == '+') {
      out.push_back(' ');
      continue;
    }
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    int hi = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
    int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

absl::StatusOr<PathTemplate> PathTemplate::Parse(std::string_view text) {
  if (text.empty() || text.front() != '/') {
    return absl::InvalidArgumentError(fmt::format("path template '{}': must start with '/'", text));
  }
  PathTemplate t;
  t.text_ = std::string(text);
  std::string_view rest = text.substr(1);
  // The verb follows the last segment, outside any braces.
  size_t close = rest.rfind('}');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
    t.verb_ = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  for (std::string_view segment : Split(rest, '/')) {
    Segment s;
    if (segment.size() >= 2 && segment.front() == '{' && segment.back() == '}') {
      std::string_view inner = segment.substr(1, segment.size() - 2);
      if (size_t eq = inner.find('='); eq != std::string_view::npos) {
        if (inner.substr(eq + 1) != "*") {
          return absl::InvalidArgumentError(
              fmt::format("path template '{}': only single-segment variables are supported", text));
        }
        inner = inner.substr(0, eq);
      }
      if (inner.empty()) {
        return absl::InvalidArgumentError(fmt::format("path template '{}': empty variable", text));
      }
      s.variable = std::string(inner);
    } else if (segment.find_first_of("{}*") != std::string_view::npos || segment.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("path template '{}': unsupported segment '{}'", text, segment));
    } else {
      s.literal = std::string(segment);
    }
    t.segments_.push_back(std::move(s));
  }
  return t;
}

std::optional<std::vector<std::pair<std::string, std::string>>> PathTemplate::Match(
    std::string_view path) const {
  auto [segments, verb] = SplitPath(path, !verb_.empty());
  if (verb != verb_ || segments.size() != segments_.size()) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> bound;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments_[i];
    if (s.variable.empty()) {
      if (segments[i] != s.literal) return std::nullopt;
      continue;
    }
    auto value = PercentDecode(segments[i]);
    if (!value || value->empty()) return std::nullopt;
    bound.emplace_back(s.variable, std::move(*value));
  }
  return bound;
}

std::vector<std::string> PathTemplate::variables() const {
  std::vector<std::string> out;
  for (const Segment& s : segments_) {
    if (!s.variable.empty()) out.push_back(s.variable);
  }
  return out;
}

bool PathTemplate::IsMemberOf(const PathTemplate& collection, std::string* field) const {
  if (!verb_.empty() || !collection.verb_.empty()) return false;
  if (segments_.size() != collection.segments_.size() + 1) return false;
  for (size_t i = 0; i < collection.segments_.size(); ++i) {
    if (!collection.segments_[i].variable.empty() || !segments_[i].variable.empty() ||
        segments_[i].literal != collection.segments_[i].literal) {
      return false;
    }
  }
  if (segments_.back().variable.empty()) return false;
  *field = segments_.back().variable;
  return true;
}

}  // namespace feed::http
