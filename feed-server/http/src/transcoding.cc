#include "transcoding.h"

#include "fmt/format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "path_template.h"
#include "server/core_router.h"
#include "text.h"

namespace feed::http {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const FieldDescriptor* FindField(const google::protobuf::Descriptor* type, std::string_view name) {
  if (const auto* f = type->FindFieldByName(std::string(name))) return f;
  return type->FindFieldByCamelcaseName(std::string(name));
}

absl::Status Bad(std::string_view where, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where, problem));
}

// Sets (or, for a repeated field, appends) one scalar field from its text form.
absl::Status SetScalar(Message* message, const FieldDescriptor* field, std::string_view text,
                       std::string_view where) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      if (field->type() == FieldDescriptor::TYPE_STRING && !IsValidUtf8(text)) {
        return Bad(where, "not valid UTF-8");
      }
      repeated ? r->AddString(message, field, std::string(text))
               : r->SetString(message, field, std::string(text));
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!ParseNumber(text, &v))
        return Bad(where, fmt::format("'{}' is not a 64-bit integer", text));
      repeated ? r->AddInt64(message, field, v) : r->SetInt64(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!ParseNumber(text, &v)) {
        return Bad(where, fmt::format("'{}' is not an unsigned 64-bit integer", text));
      }
      repeated ? r->AddUInt64(message, field, v) : r->SetUInt64(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!ParseNumber(text, &v))
        return Bad(where, fmt::format("'{}' is not a 32-bit integer", text));
      repeated ? r->AddInt32(message, field, v) : r->SetInt32(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!ParseNumber(text, &v)) {
        return Bad(where, fmt::format("'{}' is not an unsigned 32-bit integer", text));
      }
      repeated ? r->AddUInt32(message, field, v) : r->SetUInt32(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v = 0;
      if (!ParseNumber(text, &v)) return Bad(where, fmt::format("'{}' is not a number", text));
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        repeated ? r->AddDouble(message, field, v) : r->SetDouble(message, field, v);
      } else {
        repeated ? r->AddFloat(message, field, static_cast<float>(v))
                 : r->SetFloat(message, field, static_cast<float>(v));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = false;
      if (text == "true" || text == "1") {
        v = true;
      } else if (text != "false" && text != "0") {
        return Bad(where, fmt::format("'{}' is not true or false", text));
      }
      repeated ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value = field->enum_type()->FindValueByName(std::string(text));
      int number = 0;
      if (value == nullptr && ParseNumber(text, &number)) {
        value = field->enum_type()->FindValueByNumber(number);
      }
      if (value == nullptr) {
        return Bad(where,
                   fmt::format("'{}' is not a value of {}", text, field->enum_type()->name()));
      }
      repeated ? r->AddEnum(message, field, value) : r->SetEnum(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return Bad(where, "a message field cannot be given as text; send it in the JSON body");
  }
  return Bad(where, "unsupported field type");
}

// Sets the field at a dotted path ("a.b.c") from text. `where` names the source in errors.
absl::Status SetPath(Message* message, std::string_view path, std::string_view text,
                     std::string_view where, bool ignore_unknown) {
  std::vector<std::string_view> parts = Split(path, '.');
  Message* target = message;
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field = FindField(target->GetDescriptor(), parts[i]);
    if (field == nullptr) {
      if (ignore_unknown) return absl::OkStatus();
      return Bad(where, fmt::format("{} has no field '{}'", target->GetDescriptor()->full_name(),
                                    parts[i]));
    }
    if (i + 1 == parts.size()) return SetScalar(target, field, text, where);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
      return Bad(where, fmt::format("'{}' is not a singular message field", parts[i]));
    }
    target = target->GetReflection()->MutableMessage(target, field);
  }
  return absl::OkStatus();
}

std::string JsonProblem(const absl::Status& status) {
  std::string text(status.message());
  // protobuf's parser appends the input around the error position on further lines.
  if (size_t nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text.empty() ? "not valid JSON for this request" : text;
}

}  // namespace

absl::Status BuildRequest(const Route& route,
                          const std::vector<std::pair<std::string, std::string>>& variables,
                          std::string_view query, std::string_view body,
                          const TranscodeOptions& options, Message* request) {
  if (route.body.empty()) {
    if (!body.empty())
      return Bad("request body", "this route takes no body; send the fields as query parameters");
  } else if (!body.empty()) {
    Message* target = request;
    if (route.body != "*") {
      const FieldDescriptor* field = request->GetDescriptor()->FindFieldByName(route.body);
      target = request->GetReflection()->MutableMessage(request, field);
    }
    google::protobuf::util::JsonParseOptions json;
    json.ignore_unknown_fields = options.ignore_unknown_fields;
    auto parsed = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(body.data(), body.size()), target, json);
    if (!parsed.ok()) {
      return Bad("request body",
                 JsonProblem(absl::Status(static_cast<absl::StatusCode>(parsed.code()),
                                          std::string(parsed.message()))));
    }
  }
  for (const auto& [field, value] : variables) {
    if (absl::Status s =
            SetPath(request, field, value, fmt::format("path variable '{}'", field), false);
        !s.ok()) {
      return s;
    }
  }
  if (query.empty()) return absl::OkStatus();
  for (std::string_view pair : Split(query, '&', true)) {
    size_t eq = pair.find('=');
    auto name = PercentDecode(pair.substr(0, eq), true);
    auto value = PercentDecode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!name || !value) return Bad("query string", fmt::format("malformed escape in '{}'", pair));
    std::string where = fmt::format("query parameter '{}'", *name);
    if (route.body == "*") {
      if (options.ignore_unknown_fields) continue;
      return Bad(where, "not allowed here: the JSON body carries the whole request");
    }
    bool bound = false;
    for (const auto& [field, unused] : variables) bound = bound || field == *name;
    if (bound) return Bad(where, "already given in the path");
    if (absl::Status s = SetPath(request, *name, *value, where, options.ignore_unknown_fields);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::string ToJson(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string out;
  auto printed = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!printed.ok()) return "{}";
  return out;
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnknown:
      return 500;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kInternal:
      return 500;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDataLoss:
      return 500;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    default:
      return 500;
  }
}

std::string StatusJson(const absl::Status& status) {
  nlohmann::json body = {{"code", static_cast<int>(status.code())},
                         {"message", std::string(status.message())},
                         {"details", nlohmann::json::array()}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Response ErrorResponse(const absl::Status& status, int http_status) {
  Response response(static_cast<boost::beast::http::status>(
                        http_status ? http_status : HttpStatusOf(status.code())),
                    11);
  response.set(boost::beast::http::field::content_type, "application/json");
  // Cluster mode: another node serves the request's shard (its gRPC address).
  if (auto owner = server::ShardOwnerOf(status)) response.set("Feed-Shard-Owner", *owner);
  response.body() = StatusJson(status);
  return response;
}

std::string FindStringField(const Message& message, std::string_view name) {
  const auto* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  if (const auto* f = descriptor->FindFieldByName(std::string(name));
      f && f->cpp_type() == FieldDescriptor::CPPTYPE_STRING && !f->is_repeated()) {
    return r->GetString(message, f);
  }
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* f = descriptor->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) continue;
    if (!r->HasField(message, f)) continue;
    const Message& inner = r->GetMessage(message, f);
    const auto* g = inner.GetDescriptor()->FindFieldByName(std::string(name));
    if (g && g->cpp_type() == FieldDescriptor::CPPTYPE_STRING && !g->is_repeated()) {
      return inner.GetReflection()->GetString(inner, g);
    }
  }
  return "";
}

bool IsReplayed(const Message& message) {
  const auto* f = message.GetDescriptor()->FindFieldByName("replayed");
  return f && f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !f->is_repeated() &&
         message.GetReflection()->GetBool(message, f);
}

}  // namespace feed::http
