// fuzz_token: the bearer token path on arbitrary bytes: security::VerifyJwt (with an HS256
// secret and an RSA public key configured, so every algorithm family is reached) and
// StaticTokens::Parse on the same bytes as a token file.
//
// VerifyJwt must answer OK or UNAUTHENTICATED and never echo the input; a token that
// verifies must carry a subject. Parse must answer OK or INVALID_ARGUMENT.
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "security/jwt_verifier.h"
#include "security/static_tokens.h"

namespace {

// The secret the corpus's HS256 tokens are signed with (tests/fuzz/corpus/fuzz_token).
constexpr const char* kSecret = "fuzz-token-hs256-secret-0123456789abcdef";

std::string RsaPublicPem() {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, key);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  EVP_PKEY_free(key);
  return pem;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto keys = feed::security::JwtKeys::FromMaterial(kSecret, RsaPublicPem(), true);
  static const feed::security::JwtOptions options{.issuer = "fuzz", .leeway_s = 30};
  const std::string input(reinterpret_cast<const char*>(data), size);

  // A fixed "now" (2026-01-01) keeps a replayed input's result the same on every day.
  auto verified = feed::security::VerifyJwt(*keys, options, input, 1767225600);
  if (verified.ok()) {
    FUZZ_CHECK(!verified->subject.empty(), "a verified token without a subject");
  } else {
    FUZZ_CHECK(verified.status().code() == absl::StatusCode::kUnauthenticated,
               feed::fuzz::ToString(verified.status()));
    FUZZ_CHECK(input.size() < 24 ||
                   std::string(verified.status().message()).find(input) == std::string::npos,
               "the error echoes the token");
  }
  auto tokens = feed::security::StaticTokens::Parse(input);
  FUZZ_CHECK(tokens.ok() || tokens.status().code() == absl::StatusCode::kInvalidArgument,
             feed::fuzz::ToString(tokens.status()));
  return 0;
}
