#pragma once
// A closed table of names, one for each value of an enum in the enum's order (the outcomes,
// rdma_mesh's tests): the one place a value's name is looked up either way, so that what a
// report writes and what its reader accepts cannot drift apart.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace rdmakit {

// The name of `value` in `table`; `otherwise` for a value past the table's end.
template <typename Enum, std::size_t count>
std::string_view name_in(const std::array<std::string_view, count>& table, Enum value, std::string_view otherwise) {
  const auto index = static_cast<std::size_t>(value);
  return index < table.size() ? table[index] : otherwise;
}

// The value `name` names in `table`; none for a name outside the table.
template <typename Enum, std::size_t count>
std::optional<Enum> value_named(const std::array<std::string_view, count>& table, std::string_view name) {
  for (std::size_t index = 0; index < table.size(); ++index) {
    if (table[index] == name) return static_cast<Enum>(index);
  }
  return std::nullopt;
}

}  // namespace rdmakit
