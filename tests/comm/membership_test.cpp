// The membership's pieces that need no second job: the hello's wire format
// (a malformed one is a JoinError, never a crash) and the HMAC that keyed
// joins and payloads rely on (RFC 4231's test vector, tampering, keys).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "comm/membership.h"
#include "comm/message_auth.h"

namespace diloco::comm {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s)); }

TEST(HelloTest, RoundTripsEveryField) {
  SiteHello h;
  h.index = 7;
  h.name = "dc-east \"2\"";
  h.weight = 8192.0;
  h.signature = "gpt d=64 L=2";
  h.keyed = true;
  h.nonce = std::string(32, '\x01');
  const SiteHello back = decode_hello(encode_hello(h));
  EXPECT_EQ(back.index, 7);
  EXPECT_EQ(back.name, h.name);
  EXPECT_EQ(back.weight, 8192.0);
  EXPECT_EQ(back.signature, h.signature);
  EXPECT_TRUE(back.keyed);
  EXPECT_EQ(back.nonce, h.nonce);
}

TEST(HelloTest, MalformedBytesAreAJoinError) {
  SiteHello h;
  h.name = "site-1";
  h.signature = "model";
  const std::string good = encode_hello(h);
  for (std::size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_THROW(decode_hello(good.substr(0, cut)), JoinError) << "cut at " << cut;
  EXPECT_THROW(decode_hello(good + "x"), JoinError);
  std::string huge = good;
  huge[sizeof(std::uint32_t) + sizeof(double)] = '\xff';  // the name's length: far beyond the bytes
  EXPECT_THROW(decode_hello(huge), JoinError);
}

TEST(MessageAuthTest, MatchesRfc4231TestCase1) {
  const MessageAuth auth(std::string(20, '\x0b'));
  const MacTag tag = auth.tag("", bytes_of("Hi There"));
  const unsigned char expected[32] = {0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf,
                                      0xce, 0xaf, 0x0b, 0xf1, 0x2b, 0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83,
                                      0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7};
  EXPECT_EQ(std::memcmp(tag.data(), expected, 32), 0);
}

TEST(MessageAuthTest, VerifyRejectsAnyChange) {
  const MessageAuth auth("a shared key of enough bytes");
  const std::string body = "payload bytes";
  const MacTag tag = auth.tag("diloco-payload:0:3:0:1:", bytes_of(body));
  EXPECT_TRUE(auth.verify("diloco-payload:0:3:0:1:", bytes_of(body), tag));
  EXPECT_FALSE(auth.verify("diloco-payload:0:4:0:1:", bytes_of(body), tag)) << "another round (a replay)";
  EXPECT_FALSE(auth.verify("diloco-payload:0:3:0:2:", bytes_of(body), tag)) << "another sender";
  EXPECT_FALSE(auth.verify("diloco-payload:0:3:0:1:", bytes_of(body + "!"), tag));
  MacTag flipped = tag;
  flipped[5] ^= std::byte{1};
  EXPECT_FALSE(auth.verify("diloco-payload:0:3:0:1:", bytes_of(body), flipped));
  EXPECT_FALSE(auth.verify("diloco-payload:0:3:0:1:", bytes_of(body), std::span<const std::byte>(tag).first(31)));
  const MessageAuth other("another key of enough bytes!");
  EXPECT_FALSE(other.verify("diloco-payload:0:3:0:1:", bytes_of(body), tag));
}

// A sealed message opens only under the same key and context, unchanged;
// a failed open leaves the bytes as they were.
TEST(MessageAuthTest, SealedMessagesOpenOnlyUnchanged) {
  const MessageAuth auth(std::string(20, 'a'));
  const std::vector<std::byte> body{std::byte{1}, std::byte{2}, std::byte{3}};
  auto message = body;
  auth.seal("diloco-report:1:4:0:", message);
  ASSERT_EQ(message.size(), body.size() + sizeof(MacTag));
  auto copy = message;
  EXPECT_TRUE(auth.unseal("diloco-report:1:4:0:", copy));
  EXPECT_EQ(copy, body);
  copy = message;
  EXPECT_FALSE(auth.unseal("diloco-report:1:4:1:", copy));  // another sender
  EXPECT_EQ(copy, message);
  copy = message;
  copy[1] ^= std::byte{0x10};
  EXPECT_FALSE(auth.unseal("diloco-report:1:4:0:", copy));
  copy = message;
  EXPECT_FALSE(MessageAuth(std::string(20, 'b')).unseal("diloco-report:1:4:0:", copy));
  std::vector<std::byte> short_one(sizeof(MacTag) - 1);
  EXPECT_FALSE(auth.unseal("diloco-report:1:4:0:", short_one));
}

TEST(MessageAuthTest, KeysMustBeLongEnough) {
  EXPECT_THROW(MessageAuth("short"), std::invalid_argument);
  const std::string path = ::testing::TempDir() + "/diloco-key-test";
  std::ofstream(path) << "0123456789abcdef\n";  // 16 bytes and a newline
  EXPECT_NO_THROW(MessageAuth::from_file(path));
  std::ofstream(path) << "0123456789abcde\n";
  try {
    MessageAuth::from_file(path);
    FAIL() << "a 15-byte key was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(MessageAuth::from_file(path), std::invalid_argument);
}

}  // namespace
}  // namespace diloco::comm
