#include "lib/send_bw/perftest_exchange.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/base/error.hpp"

namespace rdmakit::bw::perftest {

namespace {

constexpr double oldest_compatible = 5.70;
constexpr double first_negotiating = 6.28;

void expect_size(std::span<const std::uint8_t> bytes, std::size_t size, const char* what) {
  if (bytes.size() != size) {
    throw ProtocolError(fmt::format("perftest's {}: {} bytes, expected {}", what, bytes.size(), size));
  }
}

bool is_hex_digit(std::uint8_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::uint32_t decode_power_of_two(std::span<const std::uint8_t> bytes, std::uint32_t low, std::uint32_t high,
                                  const char* what) {
  expect_size(bytes, 4, what);
  const auto value = load_big_endian<std::uint32_t>(bytes.data());
  if (!std::has_single_bit(value) || value < low || value > high) {
    throw ProtocolError(
        fmt::format("perftest's {}: {}, expected a power of two from {} to {}", what, value, low, high));
  }
  return value;
}

// Reads the record's fields in order: each exactly WIDTH hex digits and a ':' (the last
// field of the record without a GID ends at its NUL instead).
class RecordReader {
 public:
  explicit RecordReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  std::uint64_t field(std::size_t width, bool colon_after = true) {
    if (position_ + width + (colon_after ? 1 : 0) > bytes_.size()) refuse("it ends early");
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
      const auto c = bytes_[position_ + i];
      if (!is_hex_digit(c)) refuse(fmt::format("byte {} is {:#04x}, not a hex digit", position_ + i, c));
      const auto digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      value = (value << 4U) | static_cast<std::uint64_t>(digit);
    }
    position_ += width;
    if (colon_after) {
      if (bytes_[position_] != ':') refuse(fmt::format("byte {} is {:#04x}, not ':'", position_, bytes_[position_]));
      ++position_;
    }
    return value;
  }

  void end() {
    if (position_ + 1 != bytes_.size() || bytes_[position_] != 0) refuse("it does not end in its NUL");
  }

 private:
  [[noreturn]] static void refuse(const std::string& why) {
    throw ProtocolError("perftest's destination record: " + why);
  }

  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
};

}  // namespace

std::array<std::uint8_t, version_size> encode_version(std::string_view version) {
  if (version.size() >= version_size) throw std::invalid_argument("a perftest version of 16 bytes or more");
  std::array<std::uint8_t, version_size> bytes{};
  std::copy(version.begin(), version.end(), bytes.begin());
  return bytes;
}

PeerVersion decode_version(std::span<const std::uint8_t> bytes) {
  expect_size(bytes, version_size, "version");
  const auto end = std::find(bytes.begin(), bytes.end(), std::uint8_t{0});
  if (end == bytes.end() || std::any_of(end, bytes.end(), [](std::uint8_t c) { return c != 0; })) {
    throw ProtocolError("perftest's version: not text padded with NULs");
  }
  PeerVersion version;
  version.text.assign(bytes.begin(), end);
  const auto* const first = version.text.data();
  const auto* const last = first + version.text.size();
  const auto [stop, ec] = std::from_chars(first, last, version.number, std::chars_format::fixed);
  if (version.text.empty() || ec != std::errc{} || stop != last || version.text.front() == '-' ||
      version.text.front() == '+') {
    throw ProtocolError(fmt::format("perftest's version: '{}' is not a version number", version.text));
  }
  if (version.number < oldest_compatible) {
    throw ProtocolError(fmt::format(
        "the peer is perftest {}: perftest before 5.70 exchanges other messages (upgrade it)", version.text));
  }
  version.negotiates_parameters = version.number >= first_negotiating;
  return version;
}

std::array<std::uint8_t, 4> encode_size_field(std::uint32_t value) {
  std::array<std::uint8_t, 4> bytes{};
  store_big_endian(bytes.data(), value);
  return bytes;
}

std::uint32_t decode_page_size(std::span<const std::uint8_t> bytes) {
  return decode_power_of_two(bytes, 4096, 65536, "page size");
}

std::uint32_t decode_cache_line(std::span<const std::uint8_t> bytes) {
  return decode_power_of_two(bytes, 16, 512, "cache line size");
}

Geometry agreed(const Geometry& ours, const Geometry& theirs) {
  return {.page_size = std::max(ours.page_size, theirs.page_size),
          .cache_line = std::max(ours.cache_line, theirs.cache_line)};
}

std::array<std::uint8_t, 2> encode_mtu(int ibv_mtu) {
  if (ibv_mtu < 1 || ibv_mtu > 5) throw std::invalid_argument(fmt::format("ibv_mtu {} is not 1 to 5", ibv_mtu));
  return {static_cast<std::uint8_t>('0' + ibv_mtu), 0};
}

int decode_mtu(std::span<const std::uint8_t> bytes) {
  expect_size(bytes, 2, "path MTU");
  if (bytes[0] < '1' || bytes[0] > '5' || bytes[1] != 0) {
    throw ProtocolError(fmt::format("perftest's path MTU: bytes {:#04x} {:#04x}, expected a digit 1 to 5 and a NUL",
                                    bytes[0], bytes[1]));
  }
  return bytes[0] - '0';
}

std::vector<std::uint8_t> encode(const Destination& d) {
  if (d.qpn > 0xffffffU || d.psn > 0xffffffU) throw std::invalid_argument("a QP number or PSN over 24 bits");
  auto text =
      fmt::format("{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}", d.lid, d.out_reads, d.qpn, d.psn, d.rkey, d.vaddr);
  if (d.gid) {
    for (const auto byte : *d.gid) text += fmt::format(":{:02x}", byte);
    text += fmt::format(":{:08x}:", d.srqn);
  } else {
    text += fmt::format(":{:08x}", d.srqn);
  }
  std::vector<std::uint8_t> bytes(text.begin(), text.end());
  bytes.push_back(0);
  return bytes;
}

Destination decode_destination(std::span<const std::uint8_t> bytes, bool with_gid) {
  const auto expected = with_gid ? record_size_with_gid : record_size;
  if (bytes.size() != expected) {
    throw ProtocolError(
        fmt::format("perftest's destination record: {} bytes, expected {} ({}): do both sides use a GID (-x)?",
                    bytes.size(), expected, with_gid ? "with a GID" : "without a GID"));
  }
  RecordReader reader(bytes);
  Destination d;
  d.lid = static_cast<std::uint16_t>(reader.field(4));
  d.out_reads = static_cast<std::uint16_t>(reader.field(4));
  d.qpn = static_cast<std::uint32_t>(reader.field(6));
  d.psn = static_cast<std::uint32_t>(reader.field(6));
  d.rkey = static_cast<std::uint32_t>(reader.field(8));
  d.vaddr = reader.field(16);
  if (with_gid) {
    std::array<std::uint8_t, 16> gid{};
    for (auto& byte : gid) byte = static_cast<std::uint8_t>(reader.field(2));
    d.gid = gid;
    d.srqn = static_cast<std::uint32_t>(reader.field(8));
  } else {
    d.srqn = static_cast<std::uint32_t>(reader.field(8, false));
  }
  reader.end();
  return d;
}

std::array<std::array<std::uint8_t, results_field_size>, results_fields> encode(const Results& r) {
  std::array<std::array<std::uint8_t, results_field_size>, results_fields> fields{};
  store_big_endian(fields[0].data(), r.message_size);
  store_big_endian(fields[1].data(), r.iterations);
  store_big_endian(fields[2].data(), std::bit_cast<std::uint64_t>(r.peak_mb_per_s));
  store_big_endian(fields[3].data(), std::bit_cast<std::uint64_t>(r.average_mb_per_s));
  store_big_endian(fields[4].data(), std::bit_cast<std::uint64_t>(r.message_rate_mpps));
  return fields;
}

Results decode_results(std::span<const std::array<std::uint8_t, results_field_size>, results_fields> fields) {
  const auto figure = [&](std::size_t index, const char* name) {
    const auto value = std::bit_cast<double>(load_big_endian<std::uint64_t>(fields[index].data()));
    if (!std::isfinite(value) || value < 0.0) {
      throw ProtocolError(fmt::format("perftest's results: {} is {}, not a figure", name, value));
    }
    return value;
  };
  Results r;
  r.message_size = load_big_endian<std::uint64_t>(fields[0].data());
  r.iterations = load_big_endian<std::uint64_t>(fields[1].data());
  r.peak_mb_per_s = figure(2, "the peak bandwidth");
  r.average_mb_per_s = figure(3, "the average bandwidth");
  r.message_rate_mpps = figure(4, "the message rate");
  return r;
}

}  // namespace rdmakit::bw::perftest
