#include "core/validation.h"

#include <cmath>
#include <optional>
#include <string>

#include "fmt/format.h"

namespace feed::core {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '/' || c == '@' || c == '+' || c == '=' ||
         c == '#';
}

absl::Status Invalid(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", field, problem));
}

absl::Status ValidateText(std::string_view field, std::string_view value, const Limits& l) {
  if (value.size() > l.max_text_length) {
    return Invalid(field, fmt::format("at most {} bytes, got {}", l.max_text_length, value.size()));
  }
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      return Invalid(field, "must not contain control characters");
    }
  }
  return absl::OkStatus();
}

// What is wrong with an identifier, or nothing: the caller names the field only when there
// is a problem (a request's lines are checked on every call, their names built on failure).
std::optional<std::string> IdProblem(std::string_view value, const Limits& limits, bool required) {
  if (value.empty()) return required ? std::optional<std::string>("is required") : std::nullopt;
  if (value.size() > limits.max_id_length) {
    return fmt::format("at most {} characters, got {}", limits.max_id_length, value.size());
  }
  for (char c : value) {
    if (!IsIdChar(c)) return "may contain only letters, digits and . _ - : / @ + = #";
  }
  return std::nullopt;
}

std::optional<std::string> QuantityProblem(int64_t q, const Limits& l) {
  if (q < 1 || q > l.max_quantity) {
    return fmt::format("must be between 1 and {}, got {}", l.max_quantity, q);
  }
  return std::nullopt;
}

absl::Status ValidateKey(const std::string& key, const Limits& l) {
  return ValidateId("idempotency_key", key, l, /*required=*/false);
}

template <class LineT>
absl::Status ValidateLines(std::string_view field, google::protobuf::RepeatedPtrField<LineT>* lines,
                           const CoreOptions& o, bool allow_empty) {
  if (lines->empty() && !allow_empty) return Invalid(field, "at least one line is required");
  if (static_cast<size_t>(lines->size()) > o.limits.max_lines_per_request) {
    return Invalid(field, fmt::format("at most {} lines per request, got {}",
                                      o.limits.max_lines_per_request, lines->size()));
  }
  for (int i = 0; i < lines->size(); ++i) {
    LineT& line = *lines->Mutable(i);
    if (line.location().empty()) line.set_location(o.default_location);
    auto line_field = [&](std::string_view leaf) {
      return fmt::format("{}[{}].{}", field, i, leaf);
    };
    if (auto p = IdProblem(line.sku(), o.limits, true)) return Invalid(line_field("sku"), *p);
    if (auto p = IdProblem(line.location(), o.limits, true)) {
      return Invalid(line_field("location"), *p);
    }
    if (auto p = QuantityProblem(line.quantity(), o.limits)) {
      return Invalid(line_field("quantity"), *p);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTtl(std::string_view field, int64_t ttl_ms, const Limits& l) {
  if (ttl_ms == 0) return absl::OkStatus();
  if (ttl_ms < l.min_hold_ttl_ms || ttl_ms > l.max_hold_ttl_ms) {
    return Invalid(field, fmt::format("must be 0 (server default) or between {} and {}, got {}",
                                      l.min_hold_ttl_ms, l.max_hold_ttl_ms, ttl_ms));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateId(std::string_view field, std::string_view value, const Limits& limits,
                        bool required) {
  if (auto p = IdProblem(value, limits, required)) return Invalid(field, *p);
  return absl::OkStatus();
}

absl::Status ValidateAdjust(inventory::v1::AdjustStockRequest& r, const CoreOptions& o) {
  if (r.location().empty()) r.set_location(o.default_location);
  if (auto s = ValidateId("sku", r.sku(), o.limits); !s.ok()) return s;
  if (auto s = ValidateId("location", r.location(), o.limits); !s.ok()) return s;
  switch (r.mode()) {
    case inventory::v1::ADJUST_MODE_DELTA:
      if (r.quantity() == 0 && !r.has_allow_backorder()) {
        return Invalid("quantity", "a DELTA adjustment must not be 0");
      }
      if (r.quantity() > o.limits.max_quantity || r.quantity() < -o.limits.max_quantity) {
        return Invalid("quantity", fmt::format("|quantity| must be at most {}, got {}",
                                               o.limits.max_quantity, r.quantity()));
      }
      break;
    case inventory::v1::ADJUST_MODE_SET:
      if (r.quantity() < 0 || r.quantity() > o.limits.max_quantity) {
        return Invalid("quantity", fmt::format("a SET adjustment must be between 0 and {}, got {}",
                                               o.limits.max_quantity, r.quantity()));
      }
      break;
    default:
      return Invalid("mode", "must be ADJUST_MODE_DELTA or ADJUST_MODE_SET");
  }
  if (auto s = ValidateText("reason", r.reason(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateReserve(inventory::v1::ReserveRequest& r, const CoreOptions& o) {
  if (auto s = ValidateLines("lines", r.mutable_lines(), o, false); !s.ok()) return s;
  if (auto s = ValidateTtl("ttl_ms", r.ttl_ms(), o.limits); !s.ok()) return s;
  if (auto s = ValidateId("reservation_id", r.reservation_id(), o.limits, false); !s.ok()) {
    return s;
  }
  if (r.reservation_id().starts_with(kGeneratedReservationPrefix)) {
    return Invalid("reservation_id",
                   fmt::format("the prefix '{}' is reserved for ids the server generates",
                               kGeneratedReservationPrefix));
  }
  if (auto s = ValidateId("order_id", r.order_id(), o.limits, false); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateCommit(const inventory::v1::CommitRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("reservation_id", r.reservation_id(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateRelease(const inventory::v1::ReleaseRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("reservation_id", r.reservation_id(), o.limits); !s.ok()) return s;
  if (auto s = ValidateText("reason", r.reason(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateStockKeys(
    std::string_view field, const google::protobuf::RepeatedPtrField<inventory::v1::StockKey>& keys,
    const CoreOptions& o) {
  if (static_cast<size_t>(keys.size()) > o.limits.max_keys_per_read) {
    return Invalid(field,
                   fmt::format("at most {} keys, got {}", o.limits.max_keys_per_read, keys.size()));
  }
  for (int i = 0; i < keys.size(); ++i) {
    std::string prefix = fmt::format("{}[{}]", field, i);
    if (auto s = ValidateId(fmt::format("{}.sku", prefix), keys[i].sku(), o.limits); !s.ok()) {
      return s;
    }
    if (auto s =
            ValidateId(fmt::format("{}.location", prefix), keys[i].location(), o.limits, false);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateGetStock(const inventory::v1::GetStockRequest& r, const CoreOptions& o) {
  if (HasSkuShorthand(r)) {
    inventory::v1::GetStockRequest expanded = r;
    if (absl::Status s = ExpandSkuShorthand(&expanded); !s.ok()) return s;
    return ValidateGetStock(expanded, o);
  }
  if (r.keys().empty()) return Invalid("keys", "at least one key is required (or sku)");
  return ValidateStockKeys("keys", r.keys(), o);
}

absl::Status ValidateCreateOrder(order::v1::CreateOrderRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("customer_id", r.customer_id(), o.limits); !s.ok()) return s;
  if (r.item_ids().empty() && r.lines().empty()) {
    return Invalid("item_ids", "at least one item (item_ids or lines) is required");
  }
  if (static_cast<size_t>(r.item_ids_size() + r.lines_size()) > o.limits.max_lines_per_request) {
    return Invalid("item_ids",
                   fmt::format("at most {} items and lines per order, got {}",
                               o.limits.max_lines_per_request, r.item_ids_size() + r.lines_size()));
  }
  for (int i = 0; i < r.item_ids_size(); ++i) {
    if (auto s = ValidateId(fmt::format("item_ids[{}]", i), r.item_ids(i), o.limits); !s.ok()) {
      return s;
    }
  }
  if (auto s = ValidateLines("lines", r.mutable_lines(), o, true); !s.ok()) return s;
  if (!std::isfinite(r.total_amount()) || r.total_amount() < 0) {
    return Invalid("total_amount", "must be a finite amount >= 0");
  }
  if (auto s = ValidateTtl("hold_ttl_ms", r.hold_ttl_ms(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidatePayOrder(const order::v1::PayOrderRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("order_id", r.order_id(), o.limits); !s.ok()) return s;
  if (auto s = ValidateText("payment_reference", r.payment_reference(), o.limits); !s.ok()) {
    return s;
  }
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateAdvanceOrder(const order::v1::AdvanceOrderRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("order_id", r.order_id(), o.limits); !s.ok()) return s;
  switch (r.target()) {
    case order::v1::ORDER_STATUS_PACKING:
    case order::v1::ORDER_STATUS_DISPATCHED:
    case order::v1::ORDER_STATUS_DELIVERED:
      break;
    default:
      return Invalid("target",
                     "must be ORDER_STATUS_PACKING, ORDER_STATUS_DISPATCHED or "
                     "ORDER_STATUS_DELIVERED (use PayOrder and CancelOrder for the others)");
  }
  if (auto s = ValidateText("details", r.details(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

absl::Status ValidateCancelOrder(const order::v1::CancelOrderRequest& r, const CoreOptions& o) {
  if (auto s = ValidateId("order_id", r.order_id(), o.limits); !s.ok()) return s;
  if (auto s = ValidateText("reason", r.reason(), o.limits); !s.ok()) return s;
  return ValidateKey(r.idempotency_key(), o.limits);
}

namespace {

template <class Request>
absl::Status ExpandShorthand(Request* r) {
  if (r->sku().empty()) {
    if (!r->location().empty()) return Invalid("location", "given without any sku");
    return absl::OkStatus();
  }
  for (const std::string& sku : r->sku()) {
    auto* key = r->add_keys();
    key->set_sku(sku);
    key->set_location(r->location());
  }
  r->clear_sku();
  r->clear_location();
  return absl::OkStatus();
}

}  // namespace

bool HasSkuShorthand(const inventory::v1::GetStockRequest& r) {
  return !r.sku().empty() || !r.location().empty();
}
bool HasSkuShorthand(const inventory::v1::WatchStockRequest& r) {
  return !r.sku().empty() || !r.location().empty();
}
absl::Status ExpandSkuShorthand(inventory::v1::GetStockRequest* r) { return ExpandShorthand(r); }
absl::Status ExpandSkuShorthand(inventory::v1::WatchStockRequest* r) { return ExpandShorthand(r); }

}  // namespace feed::core
