// Stateless validation and normalization of requests: runs on the caller's thread before a
// command reaches the writer. Errors are INVALID_ARGUMENT and name the field
// ("lines[2].quantity: must be between 1 and 1000000, got 0").
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "core/options.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feed::core {

// Reservation ids the server generates start with this; client-chosen ids may not, so a
// generated id can never collide with one a client picked.
inline constexpr std::string_view kGeneratedReservationPrefix = "rsv-";

// Checks an identifier (sku, location, ids, keys). `field` names it in the error.
absl::Status ValidateId(std::string_view field, std::string_view value, const Limits& limits,
                        bool required = true);

// Each Validate* fills empty locations with options.default_location and then validates.
absl::Status ValidateAdjust(inventory::v1::AdjustStockRequest& r, const CoreOptions& o);
absl::Status ValidateReserve(inventory::v1::ReserveRequest& r, const CoreOptions& o);
absl::Status ValidateCommit(const inventory::v1::CommitRequest& r, const CoreOptions& o);
absl::Status ValidateRelease(const inventory::v1::ReleaseRequest& r, const CoreOptions& o);
absl::Status ValidateGetStock(const inventory::v1::GetStockRequest& r, const CoreOptions& o);

// The `sku` / `location` shorthand of GetStock and WatchStock (what HTTP query parameters
// carry: ?sku=a&sku=b&location=w1) turned into keys: each SKU at `location`, after the
// request's own keys; the shorthand fields are cleared. INVALID_ARGUMENT for a location
// without any sku.
bool HasSkuShorthand(const inventory::v1::GetStockRequest& r);
bool HasSkuShorthand(const inventory::v1::WatchStockRequest& r);
absl::Status ExpandSkuShorthand(inventory::v1::GetStockRequest* r);
absl::Status ExpandSkuShorthand(inventory::v1::WatchStockRequest* r);
absl::Status ValidateStockKeys(
    std::string_view field, const google::protobuf::RepeatedPtrField<inventory::v1::StockKey>& keys,
    const CoreOptions& o);
absl::Status ValidateCreateOrder(order::v1::CreateOrderRequest& r, const CoreOptions& o);
absl::Status ValidatePayOrder(const order::v1::PayOrderRequest& r, const CoreOptions& o);
absl::Status ValidateAdvanceOrder(const order::v1::AdvanceOrderRequest& r, const CoreOptions& o);
absl::Status ValidateCancelOrder(const order::v1::CancelOrderRequest& r, const CoreOptions& o);

}  // namespace feed::core
