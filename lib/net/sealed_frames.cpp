#include "lib/net/sealed_frames.hpp"

#include "lib/net/stream_io.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/net/hmac_sha256.hpp"

namespace rdmakit::sealed {

std::array<std::uint8_t, tag_bytes> frame_tag(const MessageKey& key, std::uint64_t sequence, std::string_view payload) {
  std::vector<std::uint8_t> message(8 + length_bytes + payload.size());
  store_big_endian(message.data(), sequence);
  store_big_endian(message.data() + 8, static_cast<std::uint32_t>(payload.size()));
  std::memcpy(message.data() + 8 + length_bytes, payload.data(), payload.size());
  return net::hmac_sha256(key, message);
}

std::string FrameWriter::seal(std::string_view payload) {
  if (payload.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw ProtocolError(fmt::format("a message of {} bytes is too long to frame", payload.size()));
  }
  std::string frame(length_bytes, '\0');
  store_big_endian(reinterpret_cast<std::uint8_t*>(frame.data()), static_cast<std::uint32_t>(payload.size()));
  frame.append(payload);
  if (key_) {
    const auto tag = frame_tag(*key_, next_sequence_, payload);
    frame.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  }
  ++next_sequence_;
  return frame;
}

std::size_t FrameReader::max_frame_bytes() const {
  return length_bytes + max_payload_ + (key_ ? tag_bytes : 0);
}

std::optional<std::string> FrameReader::take(std::string& buffered) {
  if (buffered.size() < length_bytes) return std::nullopt;
  const auto length = load_big_endian<std::uint32_t>(reinterpret_cast<const std::uint8_t*>(buffered.data()));
  if (length > max_payload_) {
    throw ProtocolError(
        fmt::format("{} announced a message of {} bytes, over the limit of {}", peer_, length, max_payload_));
  }
  const std::size_t whole = length_bytes + length + (key_ ? tag_bytes : 0);
  if (buffered.size() < whole) return std::nullopt;
  std::string payload = buffered.substr(length_bytes, length);
  if (key_) {
    const auto expected = frame_tag(*key_, next_sequence_, payload);
    if (CRYPTO_memcmp(expected.data(), buffered.data() + length_bytes + length, tag_bytes) != 0) {
      throw TamperedError(
          fmt::format("message {} from {} fails its MAC: changed, replayed or dropped on the path, or not from the "
                      "peer that made the key handshake",
                      next_sequence_, peer_));
    }
  }
  buffered.erase(0, whole);
  ++next_sequence_;
  return payload;
}

std::optional<std::string> receive_frame(int fd, FrameReader& reader, std::string& buffered, Clock::time_point deadline,
                                         int stop_fd) {
  for (;;) {
    if (auto payload = reader.take(buffered)) return payload;
    // take() leaves less than a whole frame, so this never reads past the frame being read:
    // what a peer sends ahead stays in its socket.
    const auto got = tcp::receive_some(fd, buffered, reader.max_frame_bytes() - buffered.size(), deadline, stop_fd);
    if (!got) return std::nullopt;
    if (*got == 0) {
      throw ProtocolError(
          buffered.empty() ? "the peer closed the connection"
                           : fmt::format("the peer closed in the middle of a message ({} bytes in)", buffered.size()));
    }
  }
}

}  // namespace rdmakit::sealed
