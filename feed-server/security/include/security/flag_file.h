// The whole content of a file a flag names (certificates, keys, token and password lists),
// read when it is loaded or reloaded.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace feed::security {

// The file's bytes; INVALID_ARGUMENT "<flag>: cannot read '<path>'" when it cannot be opened.
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, std::string_view flag);

}  // namespace feed::security
