#include "stock_csv.h"

#include <charconv>
#include <cstdint>
#include <unordered_map>

#include "fmt/format.h"

namespace feedctl {
namespace {

// FNV-1a, 64 bits: the same in every process and build, so the keys of a re-run match.
uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits one CSV record; false (with `error`) on an unterminated quote.
bool SplitFields(std::string_view line, std::vector<std::string>* fields, std::string* error) {
  fields->clear();
  std::string field;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"' && Trim(field).empty()) {
      quoted = was_quoted = true;
      field.clear();
    } else if (c == ',') {
      fields->push_back(was_quoted ? field : std::string(Trim(field)));
      field.clear();
      was_quoted = false;
    } else {
      field += c;
    }
  }
  if (quoted) {
    *error = "a quoted field is not closed";
    return false;
  }
  fields->push_back(was_quoted ? field : std::string(Trim(field)));
  return true;
}

}  // namespace

std::string KeySafe(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 48)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "import" : out;
}

ParsedStockCsv ParseStockCsv(std::string_view text, inventory::v1::AdjustMode mode,
                             std::string_view import_id, std::string_view default_reason) {
  ParsedStockCsv out;
  std::vector<std::string> fields;
  std::string error;
  int line_number = 0;
  bool header_seen = false;
  const std::string id = KeySafe(import_id);
  std::unordered_map<uint64_t, int> seen;  // occurrences of each line's content so far
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    if (Trim(line).empty()) continue;
    auto problem = [&](std::string message) {
      out.problems.push_back({line_number, std::move(message)});
    };
    if (!SplitFields(line, &fields, &error)) {
      problem(error);
      continue;
    }
    if (!header_seen) {
      header_seen = true;
      const bool ok = (fields.size() == 3 || fields.size() == 4) && fields[0] == "sku" &&
                      fields[1] == "location" && fields[2] == "quantity" &&
                      (fields.size() == 3 || fields[3] == "reason");
      if (!ok) {
        problem(
            fmt::format("the header must be sku,location,quantity[,reason], got '{}'", Trim(line)));
        return out;
      }
      continue;
    }
    if (fields.size() < 3 || fields.size() > 4) {
      problem(fmt::format("expected 3 or 4 fields (sku,location,quantity[,reason]), got {}",
                          fields.size()));
      continue;
    }
    if (fields[0].empty()) {
      problem("sku is empty");
      continue;
    }
    int64_t quantity = 0;
    const std::string& q = fields[2];
    auto [ptr, ec] = std::from_chars(q.data(), q.data() + q.size(), quantity);
    if (q.empty() || ec != std::errc() || ptr != q.data() + q.size()) {
      problem(fmt::format("quantity '{}' is not a whole number", q));
      continue;
    }
    if (mode == inventory::v1::ADJUST_MODE_SET && quantity < 0) {
      problem(fmt::format("quantity {} is negative: a stock count (--mode set) is 0 or more",
                          quantity));
      continue;
    }
    if (mode == inventory::v1::ADJUST_MODE_DELTA && quantity == 0) {
      problem("quantity 0 changes nothing (--mode delta)");
      continue;
    }
    CsvAdjustment a;
    a.line = line_number;
    a.request.set_sku(fields[0]);
    a.request.set_location(fields[1]);
    a.request.set_mode(mode);
    a.request.set_quantity(quantity);
    a.request.set_reason(fields.size() == 4 && !fields[3].empty() ? fields[3]
                                                                  : std::string(default_reason));
    // The content's hash and its occurrence: lines moved or added elsewhere in a corrected
    // file keep their keys; two identical lines (two equal receipts) get two.
    const uint64_t hash = Fnv1a(Trim(line));
    const int occurrence = seen[hash]++;
    a.request.set_idempotency_key(fmt::format("csv:{}:{:016x}:{}", id, hash, occurrence));
    out.adjustments.push_back(std::move(a));
  }
  if (!header_seen) out.problems.push_back({0, "the file is empty (no header)"});
  return out;
}

std::string StockCsvHeader() {
  return "sku,location,on_hand,reserved,available,allow_backorder,version,sequence";
}

std::string CsvField(std::string_view value) {
  if (value.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(value);
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string StockCsvRow(const inventory::v1::StockLevel& l) {
  return fmt::format("{},{},{},{},{},{},{},{}", CsvField(l.sku()), CsvField(l.location()),
                     l.on_hand(), l.reserved(), l.available(),
                     l.allow_backorder() ? "true" : "false", l.version(), l.sequence());
}

}  // namespace feedctl
