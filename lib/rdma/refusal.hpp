#pragma once
// Why a listener turned a connection down, in the private data of its rdma_reject (or, for
// a datagram port, the reply): every gated listener of ours sends it, and a client shows the
// reason instead of a bare "rejected". The private data of our CM messages starts with a
// magic ("RKBW"), a version and a kind; send_bw's messages (lib/send_bw/bw_messages) are the
// other kinds.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit {

inline constexpr std::uint32_t private_data_magic = 0x524b4257;  // "RKBW"
// The version our messages carry (send_bw's protocol version; a refusal reads the same in all).
inline constexpr std::uint8_t private_data_version = 2;
inline constexpr std::size_t max_refusal_text = 100;  // an IB CM REJ carries 148 bytes

// The text is cut to max_refusal_text bytes.
std::vector<std::uint8_t> encode_refusal(std::string_view reason);
// The reason in a refusal, non-printable bytes replaced by '?'; empty when the bytes are not
// one (another server, or a plain CM reject). Private data arrives padded, so `bytes` may be
// longer than the refusal.
std::optional<std::string> decode_refusal(std::span<const std::uint8_t> bytes);

}  // namespace rdmakit
