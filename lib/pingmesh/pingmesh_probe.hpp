#pragma once
// rdma_pingmesh's one datagram, a probe, its answer, or the answer's device times, over UD:
// what the prober sent and when, and what the responder adds (when its datagram arrived,
// when it answered), so that the prober can take the responder's time out of the round
// trip. Every field big-endian.
//
//   0  u32 magic "RKPM"        4  u8 version (1)   5  u8 kind (1 probe, 2 answer, 3 stamps)
//   6  u16 flags: in a probe, bit 0 asks for stamps (the prober's completions carry times);
//      every other bit, and every bit in an answer or stamps, zero
//   8  u64 session: the prober's run, drawn at random at its start; an answer for another
//      run (a replay from before a restart, a guess) is no answer to this one
//  16  u64 sequence: per target, from 0
//  24  u64 prober's send time, ns on the prober's clock (answer and stamps echo it)
//  32  u64 responder's receive time, ns on the responder's clock (0 in a probe and in stamps)
//  40  u64 responder's send time, ns on the responder's clock (0 in a probe); in stamps, the
//      answer's delay on the responder's device clock: from the probe's receive completion
//      to the answer's send completion
//
// Stamps follow an answer when the probe asked for them and the responder's completions carry
// times: only once the answer's send has completed is its device delay known. The prober
// takes the network's round trip from its own device clock less that delay. The two clocks are never compared: the
// responder's delay is the difference of its own two times, the round trip the difference of the prober's.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rdmakit::pingmesh {

inline constexpr std::uint32_t probe_magic = 0x524b504dU;  // "RKPM"
inline constexpr std::uint8_t probe_version = 1;
inline constexpr std::size_t probe_size = 48;
inline constexpr std::uint16_t flag_wants_stamps = 1;
// A responder that took this long between receive and answer is not measuring anything: the
// answer is refused as implausible (a forged or corrupted one most likely).
inline constexpr std::uint64_t max_responder_delay_ns = 10'000'000'000ULL;

enum class ProbeKind : std::uint8_t { probe = 1, answer = 2, stamps = 3 };

struct ProbeMessage {
  ProbeKind kind = ProbeKind::probe;
  bool wants_stamps = false;  // a probe's flag
  std::uint64_t session = 0;
  std::uint64_t sequence = 0;
  std::uint64_t prober_sent_ns = 0;
  std::uint64_t responder_received_ns = 0;
  std::uint64_t responder_sent_ns = 0;

  std::uint64_t responder_delay_ns() const { return responder_sent_ns - responder_received_ns; }
  bool operator==(const ProbeMessage&) const = default;
};

// Why a datagram is not a message of ours; each is counted apart, none is answered.
enum class ProbeDecode : std::uint8_t {
  ok,
  short_datagram,  // fewer than probe_size bytes
  foreign,         // not our magic: another program's datagram
  other_version,   // ours, another version
  malformed,       // ours, this version, a field out of range (kind, the flags, the times)
};
std::string_view to_string(ProbeDecode outcome);

struct DecodedProbe {
  ProbeDecode outcome = ProbeDecode::short_datagram;
  ProbeMessage message;  // meaningful when outcome is ok
};

std::array<std::uint8_t, probe_size> encode(const ProbeMessage& message);
// Bytes past probe_size are ignored (a UD receive buffer is larger than the datagram). A
// probe must carry zero responder times; an answer a receive time no later than its send
// time and a delay under max_responder_delay_ns; stamps a zero receive time and a delay
// under it.
DecodedProbe decode_probe(std::span<const std::uint8_t> bytes);

// The responder's answer to `probe`, stamped with its own two times.
ProbeMessage answer_to(const ProbeMessage& probe, std::uint64_t received_ns, std::uint64_t sent_ns);
// The stamps that follow the answer to `probe`: its delay on the responder's device clock.
ProbeMessage stamps_for(const ProbeMessage& probe, std::uint64_t device_delay_ns);

}  // namespace rdmakit::pingmesh
