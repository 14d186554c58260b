#pragma once
// The pre-shared-key handshake that opens the two TCP side channels: the diag-connect
// agent's (port 7472) and rdma_smoke's control connection (port 7473). It runs on the
// accepted socket before the first request, and proves to each side that the other holds the
// same key (--key-file, lib/net/shared_key.hpp), without sending the key.
//
// Three fixed-size messages, every integer big-endian; each side reads exactly the size it
// expects, by a deadline, so a peer that sends less, more slowly, or nothing is refused when
// the deadline passes:
//
//   server -> client  hello    40 B  be32 magic "RDKH", u8 version 1, u8 service (1 the agent,
//                                    2 rdma_smoke), u8 flags (bit 0: a key is required),
//                                    u8 0, 32-byte server nonce
//   client -> server  answer   72 B  be32 magic, u8 version, u8 service, u8 flags (bit 0: the
//                                    client has a key), u8 0, 32-byte client nonce,
//                                    32-byte proof: HMAC-SHA256(key, "rdmakit client" ||
//                                    service || server nonce || client nonce), zeros without a key
//   server -> client  verdict  40 B  be32 magic, u8 version, u8 service, u8 status (0 accepted,
//                                    1 the client has no key, 2 wrong key, 3 the server has none),
//                                    u8 0, 32-byte proof: HMAC-SHA256(key, "rdmakit server" ||
//                                    service || client nonce || server nonce), zeros unless
//                                    accepted with a key
//
// The handshake always runs, with a key or without, so that a mismatch is named on both sides
// ("the agent needs --key-file") instead of showing as a garbled request. Without a key on
// either side it authenticates nothing and both go on as before the handshake existed.
//
// Replay: each side's nonce is fresh per connection (RAND_bytes), and each proof covers both
// nonces, so an answer recorded on one connection is wrong on the next (its server nonce
// differs), and a recorded verdict proves nothing to a client with a new nonce. The labels
// tell the two proofs apart, so a server's proof cannot be reflected as a client's, and the
// service byte keeps a proof for one channel from opening the other. Proofs are compared in
// constant time (CRYPTO_memcmp).
//
// After it: a keyed handshake leaves each side two message keys, one per direction,
// HKDF-SHA256 (RFC 5869) with the shared key as input, server nonce || client nonce as salt
// and "rdmakit seal" || service || "c>s" (or "s>c") as info. Every message after the
// handshake is a frame tagged with its direction's key and its sequence number
// (lib/net/sealed_frames.hpp), so a host on the path that relays the handshake still cannot
// change, replay, drop or reorder what follows without the reader saying so. Nothing is
// encrypted: the channels carry no secret (the agent's view is of the host; the smoke
// messages name cases).
//
// Version 2 is version 1 with the frames after it (version 1 sent JSON lines, unsealed).

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/shared_key.hpp"

namespace rdmakit::handshake {

inline constexpr std::uint32_t magic = 0x52444b48;  // "RDKH"
inline constexpr std::uint8_t version = 2;
inline constexpr std::size_t nonce_bytes = 32;
inline constexpr std::size_t proof_bytes = 32;  // HMAC-SHA256
inline constexpr std::size_t hello_bytes = 8 + nonce_bytes;
inline constexpr std::size_t answer_bytes = 8 + nonce_bytes + proof_bytes;
inline constexpr std::size_t verdict_bytes = 8 + proof_bytes;

using Nonce = std::array<std::uint8_t, nonce_bytes>;
using Proof = std::array<std::uint8_t, proof_bytes>;

enum class Service : std::uint8_t { agent = 1, smoke = 2 };

enum class Status : std::uint8_t { accepted = 0, client_has_no_key = 1, wrong_key = 2, server_has_no_key = 3 };

struct Hello {
  Service service = Service::agent;
  bool key_required = false;
  Nonce nonce{};
  bool operator==(const Hello&) const = default;
};

struct Answer {
  Service service = Service::agent;
  bool has_key = false;
  Nonce nonce{};
  Proof proof{};
  bool operator==(const Answer&) const = default;
};

struct Verdict {
  Service service = Service::agent;
  Status status = Status::accepted;
  Proof proof{};
  bool operator==(const Verdict&) const = default;
};

// A handshake that did not authenticate; what() says why in one line (for the server's log
// line or the client's error).
class AuthenticationError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

std::array<std::uint8_t, hello_bytes> encode(const Hello& hello);
std::array<std::uint8_t, answer_bytes> encode(const Answer& answer);
std::array<std::uint8_t, verdict_bytes> encode(const Verdict& verdict);
// Each takes exactly its message's size and throws AuthenticationError for another size, a
// wrong magic ("not an rdmakit handshake"), another version, an unknown service, flag or
// status, or a reserved byte that is not 0.
Hello decode_hello(std::span<const std::uint8_t> bytes);
Answer decode_answer(std::span<const std::uint8_t> bytes);
Verdict decode_verdict(std::span<const std::uint8_t> bytes);

// 32 bytes from OpenSSL's RAND_bytes; throws std::runtime_error when it has none to give.
Nonce fresh_nonce();
Proof client_proof(const SharedKey& key, Service service, const Nonce& server_nonce, const Nonce& client_nonce);
Proof server_proof(const SharedKey& key, Service service, const Nonce& client_nonce, const Nonce& server_nonce);
// The message keys of a keyed handshake (see above): to_server seals what the client sends.
struct MessageKeys {
  sealed::MessageKey to_server{};
  sealed::MessageKey to_client{};
};
MessageKeys message_keys(const SharedKey& key, Service service, const Nonce& server_nonce, const Nonce& client_nonce);
// In constant time: how long it takes says nothing of where two proofs differ.
bool same_proof(const Proof& a, const Proof& b);

// The server's decision on an answer to its hello (nonce `server_nonce`), with its own key or
// none: accepted (with the server's proof when keyed) or refused with the reason.
Verdict judge(const SharedKey* key, const Hello& hello, const Answer& answer);
// The words for a refusal, as the server logs them and the client shows them.
std::string status_text(Status status, Service service);
std::string service_name(Service service);

// The server's side on a connected socket: hello, answer, verdict, all by `deadline`.
// Returns this side's message keys when the peer is authenticated (none when neither side
// has a key); throws
// AuthenticationError saying why not (too slow, truncated, bad magic or version, no key,
// wrong key), after telling the peer where the protocol allows it, and RunStopped when
// `stop_fd` fires. `answered`, when given, is set once the peer's answer is read: a server
// that cuts handshakes short can tell a peer it judged from one it cut off.
sealed::DirectionKeys serve_handshake(int fd, Service service, const SharedKey* key, Clock::time_point deadline,
                                      int stop_fd, std::atomic<bool>* answered = nullptr);
// The client's side, returning its message keys as serve_handshake does: throws AuthenticationError when the server
// refused this side, when this side has a key and the server has none or cannot prove it holds the same one, or when
// the server broke the protocol or missed the deadline; RunStopped when `stop_fd` fires.
sealed::DirectionKeys join_handshake(int fd, Service service, const SharedKey* key, Clock::time_point deadline,
                                     int stop_fd);

}  // namespace rdmakit::handshake
