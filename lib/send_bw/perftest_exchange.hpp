#pragma once
// perftest's out-of-band exchange: the messages that perftest's tools (ib_send_bw,
// ib_write_bw, ib_read_bw, ib_atomic_bw and their _lat siblings) trade over a TCP socket in
// their default mode, where no rdma_cm resolves anything and each side moves its QPs to RTS
// by hand from the other's record. As Debian 12's perftest (4.5-0.17, which calls itself
// "6.06") and upstream's newest write them; doc/perftest-exchange.md has the whole flow.
//
// Every message is one write of a fixed size, the client's first, answered by the server
// with a message of the same size:
//   version            16 bytes: the version as text, NUL-padded
//   page size          4 bytes, big-endian   } each side keeps the larger of the two
//   cache line         4 bytes, big-endian   }
//   path MTU           2 bytes: the ibv_mtu number (1-5) as one digit and a NUL; each side
//                      keeps the smaller
//   destination        one per QP, then again at every barrier (record 0): hex text with
//                      ':' between fields, NUL-terminated, 59 bytes, or 108 with a GID
//   results            after a WRITE, READ or atomic run the client sends its figures, five
//                      fields of 8 bytes, each its own exchange (the server's answers are
//                      whatever its stack held: ignored)
//   "done\0"           after the last barrier, written by each side and read by neither
//                      (4.5-0.17; newer perftest leaves it out)
// Pure: no socket and no device, so that unit tests and a fuzzer reach every decoder.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::bw::perftest {

inline constexpr std::uint16_t default_port = 18515;
inline constexpr std::size_t version_size = 16;
// What we say we are: a version perftest takes (5.70 or later) and below 6.28, from which on
// a newer perftest first trades a raw structure of its own parameters, host-endian in part.
inline constexpr std::string_view our_version = "6.06";
inline constexpr std::size_t record_size = 59;
inline constexpr std::size_t record_size_with_gid = 108;
inline constexpr std::size_t results_field_size = 8;
inline constexpr std::size_t results_fields = 5;
inline constexpr std::array<std::uint8_t, 5> done_message{'d', 'o', 'n', 'e', 0};
inline constexpr std::uint32_t datagram_qkey = 0x11111111;

// The version a peer wrote, and what it changes in the exchange.
struct PeerVersion {
  std::string text;     // as written, without the padding ("6.06")
  double number = 0.0;  // as perftest reads it (5.7 for "5.70")
  // 6.28 and later trade their parameters when the other side says 6.28 or later too: we do
  // not, so this only tells a report what the peer is.
  bool negotiates_parameters = false;

  bool operator==(const PeerVersion&) const = default;
};

std::array<std::uint8_t, version_size> encode_version(std::string_view version = our_version);
// ProtocolError for anything but a decimal version and NULs, and for a version before 5.70,
// which perftest itself refuses ("not compatible with versions older than 5.70").
PeerVersion decode_version(std::span<const std::uint8_t> bytes);

// The buffer geometry both sides settle on: each keeps the larger page size (the stride its
// requests cycle through the peer's buffer) and the larger cache line.
struct Geometry {
  std::uint32_t page_size = 4096;
  std::uint32_t cache_line = 64;

  bool operator==(const Geometry&) const = default;
};
std::array<std::uint8_t, 4> encode_size_field(std::uint32_t value);
// A page size: a power of two from 4 KiB to 64 KiB (what Linux runs on); a cache line: a
// power of two from 16 to 512 bytes. Larger would size the buffers we register for a peer
// that only asked: refused as ProtocolError.
std::uint32_t decode_page_size(std::span<const std::uint8_t> bytes);
std::uint32_t decode_cache_line(std::span<const std::uint8_t> bytes);
Geometry agreed(const Geometry& ours, const Geometry& theirs);

// The path MTU as the verbs number it (1 = 256 bytes ... 5 = 4096).
std::array<std::uint8_t, 2> encode_mtu(int ibv_mtu);
int decode_mtu(std::span<const std::uint8_t> bytes);

// One QP's destination record: what the peer needs to reach it and, for WRITE, READ and
// atomics, the buffer it may touch.
struct Destination {
  std::uint16_t lid = 0;        // 0 on RoCE
  std::uint16_t out_reads = 1;  // RDMA READs and atomics this side will answer in flight
  std::uint32_t qpn = 0;        // 24 bits
  std::uint32_t psn = 0;        // 24 bits
  std::uint32_t rkey = 0;
  std::uint64_t vaddr = 0;
  std::optional<std::array<std::uint8_t, 16>> gid;  // RoCE always; InfiniBand with -x
  std::uint32_t srqn = 0;                           // XRC only: 0 here

  bool operator==(const Destination&) const = default;
};
// 59 bytes without a GID, 108 with one. A qpn or psn over 24 bits is a programming error
// (std::invalid_argument).
std::vector<std::uint8_t> encode(const Destination& destination);
// WITH_GID: the size this side expects, from its own GID setting, as perftest decides it;
// both sides must agree, so a record of the other size is refused, as is any field that is
// not the hex digits of its width, a qpn or psn of more than 24 bits, or a missing NUL.
Destination decode_destination(std::span<const std::uint8_t> bytes, bool with_gid);

// The client's figures after a WRITE, READ or atomic run, which the server prints as its own
// row: MB/s are 2^20 bytes a second, the message rate millions a second.
struct Results {
  std::uint64_t message_size = 0;
  std::uint64_t iterations = 0;
  double peak_mb_per_s = 0.0;
  double average_mb_per_s = 0.0;
  double message_rate_mpps = 0.0;

  bool operator==(const Results&) const = default;
};
// The five fields in order, 8 bytes each, as they go on the wire one exchange apiece.
std::array<std::array<std::uint8_t, results_field_size>, results_fields> encode(const Results& results);
// ProtocolError for a figure that is not finite or below zero.
Results decode_results(std::span<const std::array<std::uint8_t, results_field_size>, results_fields> fields);

}  // namespace rdmakit::bw::perftest
