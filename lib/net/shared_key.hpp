#pragma once
// The pre-shared key of the side channels' handshake (lib/net/key_handshake.hpp), read from
// the file --key-file names. One reader for every tool that takes --key-file, so that each
// refuses the same files in the same words.

#include <cstddef>
#include <string>
#include <vector>

namespace rdmakit {

// A key of fewer bytes than this is refused: HMAC-SHA256 is only as strong as its key, and
// 16 random bytes (22 in base64) keep guessing out of reach.
inline constexpr std::size_t min_key_bytes = 16;
// More is refused too: a key file is a line, not a document.
inline constexpr std::size_t max_key_bytes = 4096;

struct SharedKey {
  std::vector<unsigned char> bytes;
};

// The key in `path`: its bytes, less one trailing "\n" or "\r\n" (so that
// `head -c 32 /dev/urandom | base64 > key` works). Throws UsageError naming the file unless it
// is a regular file owned by this user with no group or other permission bits (0600, 0400),
// and for a key shorter than min_key_bytes or longer than max_key_bytes. A key file others
// can read is no secret: the error says the mode and how to fix it.
SharedKey read_shared_key(const std::string& path);

}  // namespace rdmakit
