#include "lib/pingmesh/pingmesh_probe.hpp"

#include "lib/base/big_endian.hpp"

namespace rdmakit::pingmesh {

std::string_view to_string(ProbeDecode outcome) {
  switch (outcome) {
    case ProbeDecode::ok: return "ok";
    case ProbeDecode::short_datagram: return "short";
    case ProbeDecode::foreign: return "foreign";
    case ProbeDecode::other_version: return "other_version";
    case ProbeDecode::malformed: return "malformed";
  }
  return "malformed";
}

std::array<std::uint8_t, probe_size> encode(const ProbeMessage& message) {
  std::array<std::uint8_t, probe_size> bytes{};
  store_big_endian(bytes.data(), probe_magic);
  bytes[4] = probe_version;
  bytes[5] = static_cast<std::uint8_t>(message.kind);
  store_big_endian(bytes.data() + 6, message.wants_stamps ? flag_wants_stamps : std::uint16_t{0});
  store_big_endian(bytes.data() + 8, message.session);
  store_big_endian(bytes.data() + 16, message.sequence);
  store_big_endian(bytes.data() + 24, message.prober_sent_ns);
  store_big_endian(bytes.data() + 32, message.responder_received_ns);
  store_big_endian(bytes.data() + 40, message.responder_sent_ns);
  return bytes;
}

DecodedProbe decode_probe(std::span<const std::uint8_t> bytes) {
  DecodedProbe decoded;
  if (bytes.size() < probe_size) return decoded;
  if (load_big_endian<std::uint32_t>(bytes.data()) != probe_magic) {
    decoded.outcome = ProbeDecode::foreign;
    return decoded;
  }
  if (bytes[4] != probe_version) {
    decoded.outcome = ProbeDecode::other_version;
    return decoded;
  }
  decoded.outcome = ProbeDecode::malformed;
  const auto kind = bytes[5];
  if (kind < static_cast<std::uint8_t>(ProbeKind::probe) || kind > static_cast<std::uint8_t>(ProbeKind::stamps)) {
    return decoded;
  }
  const auto flags = load_big_endian<std::uint16_t>(bytes.data() + 6);
  const auto allowed_flags = kind == static_cast<std::uint8_t>(ProbeKind::probe) ? flag_wants_stamps : 0;
  if ((flags & ~allowed_flags) != 0) return decoded;
  ProbeMessage& message = decoded.message;
  message.kind = static_cast<ProbeKind>(kind);
  message.wants_stamps = (flags & flag_wants_stamps) != 0;
  message.session = load_big_endian<std::uint64_t>(bytes.data() + 8);
  message.sequence = load_big_endian<std::uint64_t>(bytes.data() + 16);
  message.prober_sent_ns = load_big_endian<std::uint64_t>(bytes.data() + 24);
  message.responder_received_ns = load_big_endian<std::uint64_t>(bytes.data() + 32);
  message.responder_sent_ns = load_big_endian<std::uint64_t>(bytes.data() + 40);
  const bool times_fit = message.kind == ProbeKind::probe
                             ? message.responder_received_ns == 0 && message.responder_sent_ns == 0
                             : message.responder_sent_ns >= message.responder_received_ns &&
                                   message.responder_delay_ns() < max_responder_delay_ns &&
                                   (message.kind != ProbeKind::stamps || message.responder_received_ns == 0);
  if (!times_fit) return decoded;
  decoded.outcome = ProbeDecode::ok;
  return decoded;
}

ProbeMessage answer_to(const ProbeMessage& probe, std::uint64_t received_ns, std::uint64_t sent_ns) {
  ProbeMessage answer = probe;
  answer.kind = ProbeKind::answer;
  answer.wants_stamps = false;
  answer.responder_received_ns = received_ns;
  answer.responder_sent_ns = sent_ns;
  return answer;
}

ProbeMessage stamps_for(const ProbeMessage& probe, std::uint64_t device_delay_ns) {
  ProbeMessage stamps = probe;
  stamps.kind = ProbeKind::stamps;
  stamps.wants_stamps = false;
  stamps.responder_received_ns = 0;
  stamps.responder_sent_ns = device_delay_ns;
  return stamps;
}

}  // namespace rdmakit::pingmesh
