#include "lib/topology/hostlist.hpp"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

namespace rdmakit::mesh {
namespace {

constexpr std::size_t kMostHosts = 1'000'000;

bool is_hostlist_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view without_spaces_around(std::string_view text) {
  while (!text.empty() && is_hostlist_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_hostlist_space(text.back())) text.remove_suffix(1);
  return text;
}

[[noreturn]] void refuse_item(std::string_view why, std::string_view item) {
  throw HostlistError(fmt::format("{} in '{}'", why, item));
}

// The numbers one bracket stands for, each already padded: "08-10" keeps the width of its
// start, as Slurm does, so node[08-10] is node08 node09 node10 and node[8-10] is node8 .. node10.
struct NumberRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::size_t width = 0;
};

std::uint64_t range_bound(std::string_view digits, std::string_view item) {
  if (digits.empty()) refuse_item("a range bound is empty", item);
  // 18 digits keep every count and sum below overflow; no host name needs more.
  if (digits.size() > 18) refuse_item(fmt::format("number '{}' is too long", digits), item);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size()) {
    refuse_item(fmt::format("'{}' is not a number", digits), item);
  }
  return value;
}

std::vector<NumberRange> ranges_in_brackets(std::string_view inside, std::string_view item) {
  std::vector<NumberRange> ranges;
  if (without_spaces_around(inside).empty()) refuse_item("empty '[]'", item);
  while (true) {
    const std::size_t comma = inside.find(',');
    const std::string_view part = without_spaces_around(inside.substr(0, comma));
    if (part.empty()) refuse_item("an empty range", item);
    const std::size_t dash = part.find('-');
    NumberRange range;
    const std::string_view start = without_spaces_around(part.substr(0, dash));
    range.first = range_bound(start, item);
    range.width = start.size();
    range.last =
        dash == std::string_view::npos ? range.first : range_bound(without_spaces_around(part.substr(dash + 1)), item);
    if (range.last < range.first) refuse_item(fmt::format("range {} ends below its start", part), item);
    ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    inside.remove_prefix(comma + 1);
  }
  return ranges;
}

// One item ("r[1-2]n[01-04]") as its pieces: text between brackets and the brackets' ranges.
struct ItemPiece {
  std::string text;                 // used when ranges is empty
  std::vector<NumberRange> ranges;  // a bracket group
};

std::vector<ItemPiece> pieces_of_item(std::string_view item) {
  std::vector<ItemPiece> pieces;
  std::string_view rest = item;
  while (!rest.empty()) {
    const std::size_t open = rest.find_first_of("[]");
    if (open != std::string_view::npos && rest[open] == ']') refuse_item("']' without '['", item);
    if (open != 0) {
      const std::string_view text = rest.substr(0, open);
      for (const char c : text) {
        if (is_hostlist_space(c)) refuse_item("a space inside a host name", item);
      }
      pieces.push_back(ItemPiece{std::string(text), {}});
    }
    if (open == std::string_view::npos) break;
    const std::size_t close = rest.find_first_of("[]", open + 1);
    if (close == std::string_view::npos) refuse_item("unclosed '['", item);
    if (rest[close] == '[') refuse_item("nested '['", item);
    pieces.push_back(ItemPiece{{}, ranges_in_brackets(rest.substr(open + 1, close - open - 1), item)});
    rest.remove_prefix(close + 1);
  }
  return pieces;
}

std::size_t hosts_in_ranges(const std::vector<NumberRange>& ranges) {
  std::size_t count = 0;
  for (const NumberRange& range : ranges) {
    const std::uint64_t span = range.last - range.first + 1;
    if (span > kMostHosts) return kMostHosts + 1;
    count += span;
  }
  return count;
}

void expand_item(std::string_view item, std::size_t hosts_before, std::vector<std::string>& hosts) {
  const std::vector<ItemPiece> pieces = pieces_of_item(item);
  std::size_t count = 1;
  for (const ItemPiece& piece : pieces) {
    if (piece.ranges.empty()) continue;
    count *= hosts_in_ranges(piece.ranges);
    if (hosts_before + count > kMostHosts) refuse_item(fmt::format("more than {} hosts", kMostHosts), item);
  }
  // Each bracket multiplies what came before it, leftmost varying slowest, as Slurm lists them.
  std::vector<std::string> names{std::string()};
  for (const ItemPiece& piece : pieces) {
    if (piece.ranges.empty()) {
      for (std::string& name : names) name += piece.text;
      continue;
    }
    std::vector<std::string> longer;
    longer.reserve(names.size() * hosts_in_ranges(piece.ranges));
    for (const std::string& name : names) {
      for (const NumberRange& range : piece.ranges) {
        for (std::uint64_t n = range.first; n <= range.last; ++n) {
          longer.push_back(fmt::format("{}{:0{}}", name, n, range.width));
        }
      }
    }
    names = std::move(longer);
  }
  for (std::string& name : names) hosts.push_back(std::move(name));
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  std::vector<std::string> hosts;
  if (without_spaces_around(expression).empty()) return hosts;
  std::string_view rest = expression;
  while (true) {
    // The item ends at the first comma outside brackets.
    std::size_t end = 0;
    int depth = 0;
    for (; end < rest.size(); ++end) {
      if (rest[end] == '[') ++depth;
      if (rest[end] == ']') --depth;
      if (rest[end] == ',' && depth <= 0) break;
    }
    const std::string_view item = without_spaces_around(rest.substr(0, end));
    if (item.empty()) throw HostlistError(fmt::format("an empty item in '{}'", expression));
    expand_item(item, hosts.size(), hosts);
    if (end == rest.size()) break;
    rest.remove_prefix(end + 1);
  }
  return hosts;
}

}  // namespace rdmakit::mesh
