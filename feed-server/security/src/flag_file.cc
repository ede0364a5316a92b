#include "security/flag_file.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace feed::security {

absl::StatusOr<std::string> ReadFlagFile(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(fmt::format("{}: cannot read '{}'", flag, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace feed::security
