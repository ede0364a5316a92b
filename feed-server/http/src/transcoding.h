// JSON <-> protobuf for the gateway, by protobuf's canonical JSON mapping: a request
// message from a route's path variables, query parameters and JSON body; a response message
// as JSON; a status as the google.rpc.Status JSON body with its HTTP status code (mapped as
// grpc-gateway and Envoy's transcoder map them).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "http_server.h"
#include "route_table.h"

namespace feed::http {

struct TranscodeOptions {
  // Unknown JSON fields and query parameters are an error unless this is set.
  bool ignore_unknown_fields = false;
};

// Fills `request` (of the route's input type). INVALID_ARGUMENT naming the field, the
// query parameter or the JSON problem.
absl::Status BuildRequest(const Route& route,
                          const std::vector<std::pair<std::string, std::string>>& variables,
                          std::string_view query, std::string_view body,
                          const TranscodeOptions& options, google::protobuf::Message* request);

// The canonical JSON form of `message` (lowerCamelCase names, every field printed).
std::string ToJson(const google::protobuf::Message& message);

// 200 for OK, else the HTTP status grpc-gateway gives the code (400, 404, 409, 429, 503...).
int HttpStatusOf(absl::StatusCode code);
// {"code":3,"message":"...","details":[]}: google.rpc.Status in JSON.
std::string StatusJson(const absl::Status& status);
// That body as a response, with `http_status` (0: HttpStatusOf the code).
Response ErrorResponse(const absl::Status& status, int http_status = 0);

// The value of a string field at a dotted path of `message` (one level of nesting is
// searched when the top level has no such field); empty when there is none.
std::string FindStringField(const google::protobuf::Message& message, std::string_view name);
// Whether the message has a bool field `replayed` set (an idempotent replay).
bool IsReplayed(const google::protobuf::Message& message);

}  // namespace feed::http
