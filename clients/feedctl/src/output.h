// What feedctl prints: human lines by default, one JSON object per result with --json
// (proto3's JSON mapping, every field present), errors on stderr with the gRPC code name.
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "events/v1/events.pb.h"
#include "google/protobuf/message.h"
#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feedctl {

class Output {
 public:
  explicit Output(bool json) : json_(json) {}
  bool json() const { return json_; }

  // `message` as one JSON line, or `human` (a line or several, without a final newline).
  void Print(const google::protobuf::Message& message, const std::string& human) const;
  // A JSON line or a human line of text that is not a message.
  void Line(const std::string& text) const;
  // The call failed: prints "<what>: <CODE>: <message>" (JSON: {"error":...}) on stderr;
  // returns the exit code for it.
  int Error(std::string_view what, const grpc::Status& status) const;

 private:
  bool json_;
};

// One JSON line of `message` (lowerCamelCase names, every field present).
std::string ToJson(const google::protobuf::Message& message);

// Human forms.
std::string Describe(const inventory::v1::StockLevel& level);
std::string Describe(const inventory::v1::Reservation& reservation);
std::string Describe(const order::v1::Order& order);
std::string Describe(const events::v1::Event& event);
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace feedctl
