#pragma once
// The one work-request id scheme of the RDMA layer (endpoints, connection groups and the
// measurement loops). A completion carries back only the id its request was posted with,
// and an error completion's opcode is undefined, so the id says what the request was:
//
//   bits 63..56  kind      send, receive, RDMA READ or WRITE
//   bits 55..32  owner     whose request: a connection of a group, a latency loop's generation
//   bits 31..0   sequence  which one: a receive slot, a send's number (modulo 2^32)
//
// Pure (no RDMA headers), so its encoding is unit-tested; encode and decode inline into the
// measured loops.

#include <cstdint>

namespace rdmakit {

enum class WorkKind : std::uint8_t { unknown = 0, send = 1, receive = 2, rdma_read = 3, rdma_write = 4 };

// "SEND", "RECV", "RDMA_READ", "RDMA_WRITE", or "work request" for anything else.
constexpr const char* work_kind_name(WorkKind kind) {
  switch (kind) {
    case WorkKind::send: return "SEND";
    case WorkKind::receive: return "RECV";
    case WorkKind::rdma_read: return "RDMA_READ";
    case WorkKind::rdma_write: return "RDMA_WRITE";
    case WorkKind::unknown: break;
  }
  return "work request";
}

struct WorkId {
  static constexpr unsigned kind_shift = 56;
  static constexpr unsigned owner_shift = 32;
  static constexpr std::uint32_t owner_mask = (std::uint32_t{1} << (kind_shift - owner_shift)) - 1;

  WorkKind kind = WorkKind::unknown;
  std::uint32_t owner = 0;  // 24 bits; higher bits are dropped
  std::uint32_t sequence = 0;

  constexpr std::uint64_t encode() const {
    return (std::uint64_t{static_cast<std::uint8_t>(kind)} << kind_shift) |
           (std::uint64_t{owner & owner_mask} << owner_shift) | sequence;
  }
  static constexpr WorkId decode(std::uint64_t id) {
    return WorkId{.kind = static_cast<WorkKind>(id >> kind_shift),
                  .owner = static_cast<std::uint32_t>(id >> owner_shift) & owner_mask,
                  .sequence = static_cast<std::uint32_t>(id)};
  }
  // The count whose low 32 bits are `sequence`, at or after `base`: a loop that numbers its
  // requests beyond 2^32 gets its full number back, as long as fewer than 2^32 are in flight.
  static constexpr std::uint64_t unwrap(std::uint32_t sequence, std::uint64_t base) {
    return base + (sequence - static_cast<std::uint32_t>(base));
  }
  friend constexpr bool operator==(const WorkId&, const WorkId&) = default;
};

}  // namespace rdmakit
