#include "lib/tool/cli_checks.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

namespace rdmakit {

FiniteNumber::FiniteNumber() : CLI::Validator("") {
  func_ = [](std::string& text) {
    // Read as CLI11 reads a double (strtold), wide enough that "1e400" is a finite long double
    // to be refused here, before anything converts it to a double.
    long double value = 0;
    if (!CLI::detail::lexical_cast(text, value)) {
      return std::string();
    }
    const bool finite = std::isfinite(value) && std::fabs(value) <= std::numeric_limits<double>::max();
    return finite ? std::string() : "'" + text + "' is not a finite number";
  };
}

WritableFile::WritableFile() : CLI::Validator("FILE") {
  func_ = [](const std::string& text) {
    namespace fs = std::filesystem;
    std::error_code error;
    const fs::path file(text);
    if (fs::is_directory(file, error)) return "'" + text + "' is a directory";
    if (fs::exists(file, error)) {
      return ::access(text.c_str(), W_OK) == 0 ? std::string()
                                               : "'" + text + "' cannot be written: " + std::strerror(errno);
    }
    const auto folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, error)) return "'" + text + "': no folder " + folder.string();
    return ::access(folder.c_str(), W_OK | X_OK) == 0
               ? std::string()
               : "'" + text + "': folder " + folder.string() + " cannot be written to: " + std::strerror(errno);
  };
}

}  // namespace rdmakit
