#include "core/message_parsing.h"

#include <mutex>
#include <string>

#include "fmt/format.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

namespace feed::core {
namespace {

// What protobuf logged on this thread while a parse was under way.
thread_local std::string* capture = nullptr;

void OnProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                   const std::string& message) {
  if (capture != nullptr) {
    if (!capture->empty()) capture->append("; ");
    capture->append(message);
    return;
  }
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spdlog::info("protobuf: {} ({}:{})", message, filename, line);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      spdlog::warn("protobuf: {} ({}:{})", message, filename, line);
      break;
    default:
      spdlog::error("protobuf: {} ({}:{})", message, filename, line);
      break;
  }
}

void InstallLogHandler() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&OnProtobufLog); });
}

}  // namespace

absl::Status ParseMessage(google::protobuf::io::ZeroCopyInputStream* input,
                          google::protobuf::Message* message) {
  InstallLogHandler();
  std::string reported;
  capture = &reported;
  const bool ok = message->ParseFromZeroCopyStream(input);
  capture = nullptr;
  if (ok) return absl::OkStatus();
  // Protobuf names the field when a string is not UTF-8; otherwise the wire format is bad.
  if (reported.empty()) reported = "not valid protobuf wire format";
  return absl::InvalidArgumentError(
      fmt::format("the request could not be parsed as {}: {}", message->GetTypeName(), reported));
}

absl::Status ParseMessage(std::string_view bytes, google::protobuf::Message* message) {
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  return ParseMessage(&input, message);
}

}  // namespace feed::core
