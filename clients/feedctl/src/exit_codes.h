// feedctl's exit codes, which scripts can rely on.
#pragma once

#include <grpcpp/support/status.h>

namespace feedctl {

enum ExitCode : int {
  kOk = 0,
  kUsage = 1,        // bad arguments or input (nothing was sent)
  kRejected = 2,     // the server answered with an error (its gRPC code is printed)
  kUnavailable = 3,  // no answer: the server is unreachable, shutting down, or too slow
  kViolations = 4,   // `check`: the audit ran and found broken invariants
};

inline int ExitFor(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return kOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kUnavailable;
    default:
      return kRejected;
  }
}

}  // namespace feedctl
