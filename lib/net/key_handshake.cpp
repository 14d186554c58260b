#include "lib/net/key_handshake.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/net/hmac_sha256.hpp"
#include "lib/net/stream_io.hpp"

namespace rdmakit::handshake {

namespace {

constexpr std::uint8_t key_flag = 0x01;
constexpr std::string_view client_label = "rdmakit client";
constexpr std::string_view server_label = "rdmakit server";

// The 8-byte head every message starts with; `value` is the flags or the status.
template <std::size_t N>
void put_head(std::array<std::uint8_t, N>& out, Service service, std::uint8_t value) {
  store_big_endian(out.data(), magic);
  out[4] = version;
  out[5] = static_cast<std::uint8_t>(service);
  out[6] = value;
  out[7] = 0;
}

// Checks the head of a message of `size` bytes and returns its service and its flags or status.
std::pair<Service, std::uint8_t> take_head(std::span<const std::uint8_t> bytes, std::size_t size, const char* what) {
  if (bytes.size() != size) {
    throw AuthenticationError(fmt::format("truncated {}: {} bytes of {}", what, bytes.size(), size));
  }
  if (load_big_endian<std::uint32_t>(bytes.data()) != magic) {
    throw AuthenticationError(
        fmt::format("bad magic in the {}: not an rdmakit key handshake (an rdmakit from before "
                    "--key-file, or another program)",
                    what));
  }
  if (bytes[4] != version) {
    throw AuthenticationError(fmt::format("{} of handshake version {}, this side speaks {}", what, bytes[4], version));
  }
  if (bytes[5] != static_cast<std::uint8_t>(Service::agent) && bytes[5] != static_cast<std::uint8_t>(Service::smoke)) {
    throw AuthenticationError(fmt::format("{} for an unknown service {}", what, bytes[5]));
  }
  if (bytes[7] != 0) throw AuthenticationError(fmt::format("{} with a reserved byte set", what));
  return {static_cast<Service>(bytes[5]), bytes[6]};
}

template <std::size_t N>
std::array<std::uint8_t, N> take(std::span<const std::uint8_t> bytes, std::size_t offset) {
  std::array<std::uint8_t, N> out{};
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), N, out.begin());
  return out;
}

Proof mac(const SharedKey& key, std::string_view label, Service service, const Nonce& first, const Nonce& second) {
  std::vector<std::uint8_t> message(label.begin(), label.end());
  message.push_back(static_cast<std::uint8_t>(service));
  message.insert(message.end(), first.begin(), first.end());
  message.insert(message.end(), second.begin(), second.end());
  return net::hmac_sha256(key.bytes, message);
}

// Everything a handshake reads and writes: exactly `size` bytes by the deadline.
std::vector<std::uint8_t> read_exactly(int fd, std::size_t size, Clock::time_point deadline, int stop_fd,
                                       const char* what) {
  std::vector<std::uint8_t> bytes(size);
  std::size_t got = 0;
  try {
    got = tcp::receive_exactly(fd, bytes, deadline, stop_fd, fmt::format("the {}", what));
  } catch (const ProtocolError& failed) {
    throw AuthenticationError(fmt::format("reading the {}: {}", what, failed.what()));
  }
  if (got < size) {
    throw AuthenticationError(fmt::format("too slow: {} of {} bytes of the {} by the deadline", got, size, what));
  }
  return bytes;
}

void write_all(int fd, std::span<const std::uint8_t> bytes, Clock::time_point deadline, int stop_fd, const char* what) {
  bool taken = false;
  try {
    taken = tcp::send_bytes(fd, {reinterpret_cast<const char*>(bytes.data()), bytes.size()}, deadline, stop_fd);
  } catch (const ProtocolError& gone) {
    throw AuthenticationError(fmt::format("sending the {}: {}", what, gone.what()));
  }
  if (!taken) throw AuthenticationError(fmt::format("too slow: the {} was not taken", what));
}

}  // namespace

std::array<std::uint8_t, hello_bytes> encode(const Hello& hello) {
  std::array<std::uint8_t, hello_bytes> out{};
  put_head(out, hello.service, hello.key_required ? key_flag : 0);
  std::ranges::copy(hello.nonce, out.begin() + 8);
  return out;
}

std::array<std::uint8_t, answer_bytes> encode(const Answer& answer) {
  std::array<std::uint8_t, answer_bytes> out{};
  put_head(out, answer.service, answer.has_key ? key_flag : 0);
  std::ranges::copy(answer.nonce, out.begin() + 8);
  std::ranges::copy(answer.proof, out.begin() + 8 + nonce_bytes);
  return out;
}

std::array<std::uint8_t, verdict_bytes> encode(const Verdict& verdict) {
  std::array<std::uint8_t, verdict_bytes> out{};
  put_head(out, verdict.service, static_cast<std::uint8_t>(verdict.status));
  std::ranges::copy(verdict.proof, out.begin() + 8);
  return out;
}

Hello decode_hello(std::span<const std::uint8_t> bytes) {
  const auto [service, flags] = take_head(bytes, hello_bytes, "hello");
  if ((flags & ~key_flag) != 0) throw AuthenticationError(fmt::format("hello with unknown flags {:#04x}", flags));
  return {.service = service, .key_required = (flags & key_flag) != 0, .nonce = take<nonce_bytes>(bytes, 8)};
}

Answer decode_answer(std::span<const std::uint8_t> bytes) {
  const auto [service, flags] = take_head(bytes, answer_bytes, "answer");
  if ((flags & ~key_flag) != 0) throw AuthenticationError(fmt::format("answer with unknown flags {:#04x}", flags));
  return {.service = service,
          .has_key = (flags & key_flag) != 0,
          .nonce = take<nonce_bytes>(bytes, 8),
          .proof = take<proof_bytes>(bytes, 8 + nonce_bytes)};
}

Verdict decode_verdict(std::span<const std::uint8_t> bytes) {
  const auto [service, status] = take_head(bytes, verdict_bytes, "verdict");
  if (status > static_cast<std::uint8_t>(Status::server_has_no_key)) {
    throw AuthenticationError(fmt::format("verdict with an unknown status {}", status));
  }
  return {.service = service, .status = static_cast<Status>(status), .proof = take<proof_bytes>(bytes, 8)};
}

Nonce fresh_nonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    throw std::runtime_error("RAND_bytes: libcrypto has no random bytes to give");
  }
  return nonce;
}

Proof client_proof(const SharedKey& key, Service service, const Nonce& server_nonce, const Nonce& client_nonce) {
  return mac(key, client_label, service, server_nonce, client_nonce);
}

Proof server_proof(const SharedKey& key, Service service, const Nonce& client_nonce, const Nonce& server_nonce) {
  return mac(key, server_label, service, client_nonce, server_nonce);
}

namespace {

sealed::MessageKey hkdf_sha256(const SharedKey& key, std::span<const std::uint8_t> salt, std::string_view info) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* context = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  if (context == nullptr) throw std::runtime_error("HKDF is not available in libcrypto");
  std::string digest = "SHA256";
  std::vector<unsigned char> input(key.bytes.begin(), key.bytes.end());
  std::vector<unsigned char> salt_bytes(salt.begin(), salt.end());
  std::vector<unsigned char> info_bytes(info.begin(), info.end());
  const std::array<OSSL_PARAM, 5> parameters{
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest.data(), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, input.data(), input.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt_bytes.data(), salt_bytes.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info_bytes.data(), info_bytes.size()),
      OSSL_PARAM_construct_end()};
  sealed::MessageKey out{};
  const int derived = EVP_KDF_derive(context, out.data(), out.size(), parameters.data());
  EVP_KDF_CTX_free(context);
  OPENSSL_cleanse(input.data(), input.size());
  if (derived != 1) throw std::runtime_error("HKDF-SHA256 failed in libcrypto");
  return out;
}

}  // namespace

MessageKeys message_keys(const SharedKey& key, Service service, const Nonce& server_nonce, const Nonce& client_nonce) {
  std::vector<std::uint8_t> salt(server_nonce.begin(), server_nonce.end());
  salt.insert(salt.end(), client_nonce.begin(), client_nonce.end());
  std::string info = "rdmakit seal";
  info.push_back(static_cast<char>(service));
  return {.to_server = hkdf_sha256(key, salt, info + "c>s"), .to_client = hkdf_sha256(key, salt, info + "s>c")};
}

bool same_proof(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Verdict judge(const SharedKey* key, const Hello& hello, const Answer& answer) {
  Verdict verdict{.service = hello.service, .status = Status::accepted, .proof = {}};
  if (key == nullptr) {
    if (answer.has_key) verdict.status = Status::server_has_no_key;
    return verdict;
  }
  if (!answer.has_key) {
    verdict.status = Status::client_has_no_key;
  } else if (!same_proof(answer.proof, client_proof(*key, hello.service, hello.nonce, answer.nonce))) {
    verdict.status = Status::wrong_key;
  } else {
    verdict.proof = server_proof(*key, hello.service, answer.nonce, hello.nonce);
  }
  return verdict;
}

std::string service_name(Service service) {
  return service == Service::agent ? "the diag-connect agent" : "rdma_smoke --serve";
}

std::string status_text(Status status, Service service) {
  switch (status) {
    case Status::accepted: return "accepted";
    case Status::client_has_no_key:
      return fmt::format("no key: {} requires one; give the client --key-file with the server's key",
                         service_name(service));
    case Status::wrong_key: return "wrong key: the client's proof does not match the server's key";
    case Status::server_has_no_key:
      return fmt::format("the client has a key but {} runs without --key-file", service_name(service));
  }
  return "unknown status";
}

sealed::DirectionKeys serve_handshake(int fd, Service service, const SharedKey* key, Clock::time_point deadline,
                                      int stop_fd, std::atomic<bool>* answered) {
  const Hello hello{.service = service, .key_required = key != nullptr, .nonce = fresh_nonce()};
  write_all(fd, encode(hello), deadline, stop_fd, "hello");
  const auto answer_read = read_exactly(fd, answer_bytes, deadline, stop_fd, "answer");
  if (answered != nullptr) *answered = true;
  const auto answer = decode_answer(answer_read);
  if (answer.service != service) {
    throw AuthenticationError(
        fmt::format("an answer for {}, this is {}", service_name(answer.service), service_name(service)));
  }
  const auto verdict = judge(key, hello, answer);
  // The verdict is sent refused or not: the client then says why instead of "connection closed".
  write_all(fd, encode(verdict), deadline, stop_fd, "verdict");
  if (verdict.status != Status::accepted) throw AuthenticationError(status_text(verdict.status, service));
  if (key == nullptr) return {};
  const auto keys = message_keys(*key, service, hello.nonce, answer.nonce);
  return {.sending = keys.to_client, .receiving = keys.to_server};
}

sealed::DirectionKeys join_handshake(int fd, Service service, const SharedKey* key, Clock::time_point deadline,
                                     int stop_fd) {
  const auto hello = decode_hello(read_exactly(fd, hello_bytes, deadline, stop_fd, "server's hello"));
  if (hello.service != service) {
    throw AuthenticationError(
        fmt::format("this port is {}, not {}", service_name(hello.service), service_name(service)));
  }
  Answer answer{.service = service, .has_key = key != nullptr, .nonce = fresh_nonce(), .proof = {}};
  if (key != nullptr) answer.proof = client_proof(*key, service, hello.nonce, answer.nonce);
  write_all(fd, encode(answer), deadline, stop_fd, "answer");
  const auto verdict = decode_verdict(read_exactly(fd, verdict_bytes, deadline, stop_fd, "server's verdict"));
  if (verdict.status != Status::accepted) throw AuthenticationError(status_text(verdict.status, service));
  if (key == nullptr) return {};
  // Mutual: a client with a key talks only to a server that proves it holds the same key.
  if (!hello.key_required) {
    throw AuthenticationError(fmt::format("{} runs without --key-file and cannot prove it holds the key; not going on",
                                          service_name(service)));
  }
  if (!same_proof(verdict.proof, server_proof(*key, service, answer.nonce, hello.nonce))) {
    throw AuthenticationError(fmt::format(
        "{} could not prove it holds the same key (another key, or not the real server)", service_name(service)));
  }
  const auto keys = message_keys(*key, service, hello.nonce, answer.nonce);
  return {.sending = keys.to_server, .receiving = keys.to_client};
}

}  // namespace rdmakit::handshake
