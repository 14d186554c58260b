#include "lib/diag/agent_protocol.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "lib/base/big_endian.hpp"
#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit::agent {

namespace {

constexpr std::size_t max_address_bytes = 64;
constexpr std::uint16_t max_receives = 64;

std::string text_member(const nlohmann::json& request, const char* name, bool required) {
  const auto found = request.find(name);
  if (found == request.end()) {
    if (required) throw ProtocolError(fmt::format("agent request: no \"{}\"", name));
    return {};
  }
  if (!found->is_string()) throw ProtocolError(fmt::format("agent request: \"{}\" is not a string", name));
  auto text = found->get<std::string>();
  if (text.size() > max_address_bytes) {
    throw ProtocolError(fmt::format("agent request: \"{}\" is over {} bytes", name, max_address_bytes));
  }
  return text;
}

// A host name or a numeric address: letters, digits and . - : _ % only. The agent logs what
// the client asked for; a newline or a terminal escape in it would write lines of the
// client's choosing into the agent's log.
bool host_like(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == ':' || c == '_' || c == '%';
  });
}

bool numeric_address(const std::string& text) {
  return IpAddress::parse(text).has_value();
}

}  // namespace

std::string encode_request(const Request& request) {
  const nlohmann::json document = {{"version", version},
                                   {"address", request.address},
                                   {"port", request.port},
                                   {"port_space", request.port_space},
                                   {"source", request.source}};
  return document.dump();
}

Request decode_request(std::string_view line) {
  if (line.size() > max_request_bytes) {
    throw ProtocolError(fmt::format("agent request over {} bytes", max_request_bytes));
  }
  // One flat object: anything nested is no request.
  const auto document = parse_untrusted_json(line, 1, "agent request");
  if (!document.is_object()) throw ProtocolError("agent request is not a JSON object");
  const auto found_version = document.find("version");
  if (found_version == document.end() || !found_version->is_number_unsigned() || *found_version != version) {
    throw ProtocolError(fmt::format("agent request: \"version\" must be {}", version));
  }
  Request request;
  request.address = text_member(document, "address", true);
  if (!host_like(request.address)) throw ProtocolError("agent request: \"address\" is not a host name or address");
  const auto port = document.find("port");
  if (port == document.end() || !port->is_number_unsigned() || port->get<std::uint64_t>() > 65535) {
    throw ProtocolError("agent request: \"port\" must be an integer from 0 to 65535");
  }
  request.port = port->get<std::uint16_t>();
  request.port_space = text_member(document, "port_space", true);
  if (request.port_space != "tcp" && request.port_space != "udp" && request.port_space != "ib") {
    throw ProtocolError("agent request: \"port_space\" must be tcp, udp or ib");
  }
  request.source = text_member(document, "source", false);
  if (!request.source.empty() && !numeric_address(request.source)) {
    throw ProtocolError("agent request: \"source\" is not a numeric address");
  }
  return request;
}

std::vector<std::uint8_t> encode_hello(const Hello& hello) {
  std::vector<std::uint8_t> bytes(hello.ticket ? ticketed_hello_bytes : hello_bytes);
  store_big_endian(bytes.data(), magic);
  bytes[4] = version;
  if (hello.ticket) {
    bytes[5] = has_ticket;
    std::ranges::copy(*hello.ticket, bytes.begin() + hello_bytes + 1);
  }
  return bytes;
}

std::optional<Hello> decode_hello(std::span<const std::uint8_t> private_data) {
  if (private_data.size() < hello_bytes || load_big_endian<std::uint32_t>(private_data.data()) != magic ||
      private_data[4] != version) {
    return std::nullopt;
  }
  Hello hello;
  if (private_data.size() > hello_bytes && (private_data[5] & has_ticket) != 0) {
    if (private_data.size() < ticketed_hello_bytes) return std::nullopt;
    Ticket ticket{};
    std::copy_n(private_data.begin() + hello_bytes + 1, ticket_bytes, ticket.begin());
    hello.ticket = ticket;
  }
  return hello;
}

std::vector<std::uint8_t> encode_offer(const Offer& offer) {
  std::vector<std::uint8_t> bytes(offer_bytes);
  store_big_endian(bytes.data(), magic);
  bytes[4] = version;
  store_big_endian(bytes.data() + 5, offer.address);
  store_big_endian(bytes.data() + 13, offer.rkey);
  store_big_endian(bytes.data() + 17, offer.length);
  store_big_endian(bytes.data() + 21, offer.receives);
  return bytes;
}

std::optional<Offer> decode_offer(std::span<const std::uint8_t> private_data) {
  if (private_data.size() < 4 || load_big_endian<std::uint32_t>(private_data.data()) != magic) return std::nullopt;
  if (private_data.size() < offer_bytes) {
    throw ProtocolError(fmt::format("agent offer of {} bytes, {} expected", private_data.size(), offer_bytes));
  }
  if (private_data[4] != version) {
    throw ProtocolError(fmt::format("agent offer version {}, this diag-connect speaks {}", private_data[4], version));
  }
  Offer offer{.address = load_big_endian<std::uint64_t>(private_data.data() + 5),
              .rkey = load_big_endian<std::uint32_t>(private_data.data() + 13),
              .length = load_big_endian<std::uint32_t>(private_data.data() + 17),
              .receives = load_big_endian<std::uint16_t>(private_data.data() + 21)};
  if (offer.length != check_buffer_bytes) {
    throw ProtocolError(fmt::format("agent offered a {}-byte buffer, {} expected", offer.length, check_buffer_bytes));
  }
  if (offer.rkey == 0) throw ProtocolError("agent offered a buffer with rkey 0");
  if (offer.receives == 0 || offer.receives > max_receives) {
    throw ProtocolError(fmt::format("agent offered {} receives, 1 to {} expected", offer.receives, max_receives));
  }
  return offer;
}

std::string reject_reason_text(int reason) {
  static constexpr std::array<std::string_view, 34> reasons = {
      "",
      "no QP available",
      "no EEC available",
      "no resources available",
      "timeout",
      "unsupported request",
      "invalid communication id",
      "invalid communication instance",
      "invalid service id",
      "invalid transport type",
      "stale connection",
      "RDC does not exist",
      "invalid GID",
      "invalid LID",
      "invalid SL",
      "invalid traffic class",
      "invalid hop limit",
      "invalid packet rate",
      "invalid alternate GID",
      "invalid alternate LID",
      "invalid alternate SL",
      "invalid alternate traffic class",
      "invalid alternate hop limit",
      "invalid alternate packet rate",
      "port CM redirect",
      "port redirect",
      "invalid MTU",
      "insufficient responder resources",
      "consumer defined",
      "invalid RNR retry",
      "duplicate local communication id",
      "invalid class version",
      "invalid flow label",
      "invalid alternate flow label",
  };
  if (reason > 0 && static_cast<std::size_t>(reason) < reasons.size()) {
    return std::string(reasons[static_cast<std::size_t>(reason)]);
  }
  return fmt::format("reject reason {}", reason);
}

}  // namespace rdmakit::agent
