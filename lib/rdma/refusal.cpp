#include "lib/rdma/refusal.hpp"

#include <algorithm>
#include <cctype>

#include "lib/base/big_endian.hpp"

namespace rdmakit {

namespace {

// The header of every message of ours: magic, version, kind.
constexpr std::uint8_t refusal_kind = 3;
constexpr std::size_t refusal_header = 7;  // magic, version, kind, text length

}  // namespace

std::vector<std::uint8_t> encode_refusal(std::string_view reason) {
  const auto text = reason.substr(0, max_refusal_text);
  std::vector<std::uint8_t> bytes(refusal_header + text.size());
  store_big_endian(bytes.data(), private_data_magic);
  bytes[4] = private_data_version;
  bytes[5] = refusal_kind;
  bytes[6] = static_cast<std::uint8_t>(text.size());
  std::transform(text.begin(), text.end(), bytes.begin() + refusal_header,
                 [](char c) { return static_cast<std::uint8_t>(c); });
  return bytes;
}

std::optional<std::string> decode_refusal(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < refusal_header || load_big_endian<std::uint32_t>(bytes.data()) != private_data_magic ||
      bytes[5] != refusal_kind) {
    return std::nullopt;
  }
  const std::size_t length = std::min<std::size_t>({bytes[6], bytes.size() - refusal_header, max_refusal_text});
  std::string text;
  for (std::size_t i = 0; i < length; ++i) {
    const auto c = static_cast<char>(bytes[refusal_header + i]);
    text += std::isprint(static_cast<unsigned char>(c)) != 0 ? c : '?';
  }
  return text;
}

}  // namespace rdmakit
