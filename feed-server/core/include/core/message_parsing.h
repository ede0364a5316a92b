// Requests arrive as bytes: parsing them is the first check every transport makes. A
// message that is not valid protobuf, or that carries invalid UTF-8 in a string field, is
// refused with INVALID_ARGUMENT saying what could not be parsed (the field, for UTF-8).
//
// Protobuf reports such failures through its global log handler ("[libprotobuf ERROR]
// ..."); while ParseMessage runs, what it reports on that thread is captured into the
// error instead of being logged. Other protobuf log lines go to spdlog.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/message.h"

namespace feed::core {

absl::Status ParseMessage(google::protobuf::io::ZeroCopyInputStream* input,
                          google::protobuf::Message* message);
absl::Status ParseMessage(std::string_view bytes, google::protobuf::Message* message);

}  // namespace feed::core
