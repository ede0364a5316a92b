// Stock as CSV: the import file (header "sku,location,quantity[,reason]", one adjustment per
// line) parsed into AdjustStock requests, each with an idempotency key of its own; and the
// export rows. Pure: no network, unit-tested on its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inventory/v1/inventory.pb.h"

namespace feedctl {

struct CsvAdjustment {
  int line = 0;  // 1-based line number in the file (the header is line 1)
  inventory::v1::AdjustStockRequest request;
};

struct CsvProblem {
  int line = 0;  // 0: the file as a whole
  std::string message;
};

struct ParsedStockCsv {
  std::vector<CsvAdjustment> adjustments;
  std::vector<CsvProblem> problems;
};

// Parses an import file. `mode` is SET (a count: quantity >= 0) or DELTA (a receipt or a
// correction: any non-zero quantity). Fields may be quoted ("a,b", "" for a quote); blank lines
// are skipped; a missing reason becomes `default_reason`. Each line's idempotency key is
// "csv:<import_id>:<hash of the line>:<occurrence>", so running the same file again (after a
// failure half-way, or with lines added or corrected) applies no line twice, while a corrected
// line is a new one and two identical lines are two adjustments.
ParsedStockCsv ParseStockCsv(std::string_view text, inventory::v1::AdjustMode mode,
                             std::string_view import_id, std::string_view default_reason);

// A name usable inside an idempotency key (letters, digits, . _ - kept; the rest '_'), at most
// 48 characters.
std::string KeySafe(std::string_view name);

// `value` as one CSV field: quoted (quotes doubled) when it holds a comma, quote or newline.
std::string CsvField(std::string_view value);

// Export: "sku,location,on_hand,reserved,available,allow_backorder,version,sequence".
std::string StockCsvHeader();
std::string StockCsvRow(const inventory::v1::StockLevel& level);

}  // namespace feedctl
