#pragma once
// This host's name, as reports, JUnit files and pinglists name it.

#include <string>

namespace rdmakit {

// gethostname(); empty when it cannot be read.
std::string host_name();

}  // namespace rdmakit
