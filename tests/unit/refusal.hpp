#pragma once
// What a reader of peer input said when it refused (its ProtocolError's text), or "accepted":
// the unit tests compare refusals by their words, which are what a user reads.

#include <functional>
#include <string>

#include "lib/base/error.hpp"

namespace rdmakit::test {

inline std::string refusal(const std::function<void()>& read) {
  try {
    read();
  } catch (const ProtocolError& refused) {
    return refused.what();
  }
  return "accepted";
}

}  // namespace rdmakit::test
