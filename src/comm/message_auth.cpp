// HMAC-SHA256 through OpenSSL's EVP_MAC interface.
#include "comm/message_auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

namespace diloco::comm {

MessageAuth::MessageAuth(std::string key) : key_(std::move(key)) {
  if (key_.size() < 16) throw std::invalid_argument("the key has " + std::to_string(key_.size()) + " bytes; at least 16 are needed");
}

MessageAuth MessageAuth::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("security.key_file: cannot read " + path);
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < 16)
    throw std::invalid_argument("security.key_file: " + path + " holds " + std::to_string(key.size()) +
                                " bytes; a key needs at least 16 (e.g. head -c 32 /dev/urandom | base64 > FILE)");
  return MessageAuth(std::move(key));
}

MacTag MessageAuth::tag(std::string_view context, std::span<const std::byte> bytes) const {
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr), EVP_MAC_free);
  if (!mac) throw std::runtime_error("OpenSSL has no HMAC");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_new(mac.get()), EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  MacTag out{};
  std::size_t length = 0;
  if (!ctx || !EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(key_.data()), key_.size(), params) ||
      !EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(context.data()), context.size()) ||
      !EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) ||
      !EVP_MAC_final(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &length, out.size()) ||
      length != out.size())
    throw std::runtime_error("HMAC-SHA256 failed in OpenSSL");
  return out;
}

bool MessageAuth::verify(std::string_view context, std::span<const std::byte> bytes,
                         std::span<const std::byte> mac) const {
  if (mac.size() != sizeof(MacTag)) return false;
  const MacTag expected = tag(context, bytes);
  return CRYPTO_memcmp(expected.data(), mac.data(), expected.size()) == 0;
}

void MessageAuth::seal(std::string_view context, std::vector<std::byte>& message) const {
  const MacTag mac = tag(context, message);
  message.insert(message.end(), mac.begin(), mac.end());
}

bool MessageAuth::unseal(std::string_view context, std::vector<std::byte>& message) const {
  if (message.size() < sizeof(MacTag)) return false;
  const std::size_t body = message.size() - sizeof(MacTag);
  const auto all = std::span<const std::byte>(message);
  if (!verify(context, all.first(body), all.subspan(body))) return false;
  message.resize(body);
  return true;
}

std::string MessageAuth::random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("OpenSSL could not produce random bytes");
  return out;
}

}  // namespace diloco::comm
