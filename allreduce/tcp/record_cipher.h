// RecordCipher: the authenticated encryption of one direction of one
// data-plane TCP connection (KOLO_DATA_ENCRYPTION=aes-256-gcm), and the key
// derivation that gives every direction of every connection its own key.
//
// Records. An encrypted stream is a sequence of AEAD records, each
// AES-256-GCM ciphertext of at most kRecordBytes plaintext bytes followed by
// its 16-byte tag (no length on the wire: both ends know every record's
// length, see peer_channel.h). The 96-bit nonce of record i is
// 4 zero bytes | i as u64 little endian: a counter per direction, starting
// at 0 on every connection. Keys are never shared between directions,
// connections or epochs, so a (key, nonce) pair is never used twice. The
// receiver's counter advances in step with the sender's, so a record that
// is replayed, reordered, dropped or from another connection is opened with
// the wrong nonce (or key) and fails its tag, like a tampered one. A
// direction fails (kResourceExhausted) after kMaxRecords records, long
// before the counter could wrap; a new epoch brings new keys.
//
// Keys. HKDF-SHA256 (RFC 5869) with the job secret as input key material,
// the connector's and the acceptor's handshake nonces as salt (fresh for
// every connection), and as info a label, the job id, the epoch and the
// sending and receiving ranks (so each direction has its own key).
//
// Thread-safety: a RecordCipher belongs to one channel, used by one thread.
// DeriveDirectionKey is a pure function.
#ifndef KOLO_ALLREDUCE_TCP_RECORD_CIPHER_H_
#define KOLO_ALLREDUCE_TCP_RECORD_CIPHER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kolo::tcp {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kTagBytes = 16;
inline constexpr size_t kRecordNonceBytes = 12;
// Most plaintext bytes in one record: a 64 MiB frame is 1024 records. Small
// enough to stay in cache between the socket copy and the cipher (64 KiB
// and 256 KiB measured alike on loopback); the tags cost 0.02 %.
inline constexpr size_t kRecordBytes = 64 * 1024;
// Records per direction before the channel fails (2^48: nine years at a
// million records a second; the nonce counter has 64 bits).
inline constexpr uint64_t kMaxRecords = uint64_t{1} << 48;

using RecordKey = std::array<uint8_t, kKeyBytes>;

// The key of the direction `from_rank` -> `to_rank` of one connection of
// `epoch`. `connector_nonce` and `acceptor_nonce` are the handshake's.
RecordKey DeriveDirectionKey(absl::string_view secret, absl::string_view job_id,
                             uint64_t epoch, uint32_t from_rank,
                             uint32_t to_rank,
                             absl::string_view connector_nonce,
                             absl::string_view acceptor_nonce);

// The nonce of record `counter`.
std::array<uint8_t, kRecordNonceBytes> RecordNonce(uint64_t counter);

class RecordCipher {
 public:
  enum class Direction { kSeal, kOpen };

  // CHECK-fails only if OpenSSL cannot allocate a context.
  RecordCipher(const RecordKey& key, Direction direction);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Seal: encrypts `len` bytes of `in` into `out` (the same buffer or not
  // overlapping) and writes the tag. kResourceExhausted after kMaxRecords.
  // REQUIRES: direction kSeal, len <= kRecordBytes.
  absl::Status Seal(const uint8_t* in, size_t len, uint8_t* out,
                    uint8_t tag[kTagBytes]);
  // Open: decrypts `len` bytes of `in` into `out` (the same buffer or not
  // overlapping) and verifies the tag. False if it fails (tampered,
  // replayed, reordered, or another key): `out` then holds garbage and the
  // stream must be abandoned. REQUIRES: direction kOpen, len <= kRecordBytes.
  bool Open(const uint8_t* in, size_t len, uint8_t* out,
            const uint8_t tag[kTagBytes]);

  // Records sealed or opened so far (the next record's counter).
  uint64_t records() const { return counter_; }
  // For tests: start at record `counter`.
  void SetCounterForTest(uint64_t counter) { counter_ = counter; }

 private:
  struct CtxDeleter {
    void operator()(void* ctx) const;
  };
  const Direction direction_;
  std::unique_ptr<void, CtxDeleter> ctx_;  // EVP_CIPHER_CTX, key set
  uint64_t counter_ = 0;
};

}  // namespace kolo::tcp

#endif  // KOLO_ALLREDUCE_TCP_RECORD_CIPHER_H_
