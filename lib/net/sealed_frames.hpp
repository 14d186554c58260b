#pragma once
// The messages after the key handshake (lib/net/key_handshake.hpp) on the two TCP side
// channels: the agent's request and answer, rdma_smoke's control messages. Each is a frame
//
//   be32 length | payload (length bytes) | tag (32 bytes, only when the handshake was keyed)
//
// tag = HMAC-SHA256(direction key, be64 sequence || be32 length || payload), where the
// direction key is the handshake's for this direction (HKDF-SHA256 of the shared key and both
// nonces, one key each way) and the sequence counts this direction's frames from 0. So a
// frame changed on the path, moved to the other direction, replayed, dropped (the next one's
// sequence is wrong), reordered or taken from another connection (other nonces, other keys)
// fails its tag, and the reader says so (TamperedError) instead of acting on it. It is the
// "MAC per message with a key derived from the handshake and a sequence number" construction;
// nothing is encrypted, since the channels carry no secret.
//
// Without a key on either side the frames carry no tag and authenticate nothing, as before.
// Either way a frame declares its length before its bytes, and a reader refuses a length over
// its own limit before it buffers a byte of it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"

namespace rdmakit::sealed {

inline constexpr std::size_t length_bytes = 4;
inline constexpr std::size_t tag_bytes = 32;  // HMAC-SHA256
inline constexpr std::size_t key_bytes = 32;

using MessageKey = std::array<std::uint8_t, key_bytes>;

// A frame whose tag does not match: changed, replayed, dropped or reordered on the path, or
// not from the peer that made the handshake.
class TamperedError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

// One direction's keys after a handshake: both empty when it was not keyed.
struct DirectionKeys {
  std::optional<MessageKey> sending;
  std::optional<MessageKey> receiving;
};

// Frames what this side sends, numbering them.
class FrameWriter {
 public:
  explicit FrameWriter(std::optional<MessageKey> key = std::nullopt) : key_(key) {}
  // The frame for `payload`; throws ProtocolError for a payload of 4 GiB or more.
  std::string seal(std::string_view payload);

 private:
  std::optional<MessageKey> key_;
  std::uint64_t next_sequence_ = 0;
};

// Takes frames out of what was received, checking each one's length and tag.
class FrameReader {
 public:
  // `peer`: how errors name the sender ("the agent", "the serving side").
  FrameReader(std::optional<MessageKey> key, std::size_t max_payload, std::string peer)
      : key_(key), max_payload_(max_payload), peer_(std::move(peer)) {}
  // The next whole frame's payload at the front of `buffered`, which it drops from there;
  // nullopt while more bytes are needed. Throws ProtocolError for a length over the limit
  // (from its first four bytes, before the payload comes), TamperedError for a wrong tag.
  std::optional<std::string> take(std::string& buffered);
  // How many bytes `buffered` may hold before take() must have found a frame in it: a caller
  // that reads more than one frame at a time keeps at most this much.
  std::size_t max_frame_bytes() const;

 private:
  std::optional<MessageKey> key_;
  std::size_t max_payload_;
  std::string peer_;
  std::uint64_t next_sequence_ = 0;
};

// One frame from a non-blocking socket (lib/net/stream_io underneath): nullopt when `deadline`
// passes first, RunStopped when `stop_fd` fires, ProtocolError when the peer is gone or sends
// what `reader` refuses.
std::optional<std::string> receive_frame(int fd, FrameReader& reader, std::string& buffered, Clock::time_point deadline,
                                         int stop_fd);

// The tag of frame `sequence` (exposed for the unit tests' and the fuzz target's own frames).
std::array<std::uint8_t, tag_bytes> frame_tag(const MessageKey& key, std::uint64_t sequence, std::string_view payload);

}  // namespace rdmakit::sealed
