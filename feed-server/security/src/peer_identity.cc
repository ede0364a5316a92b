#include "security/peer_identity.h"

#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace feed::security {

std::string PeerIdentity(const CertificateNames& names) {
  if (!names.uri_sans.empty()) return names.uri_sans.front();
  if (!names.dns_sans.empty()) return names.dns_sans.front();
  return names.common_name;
}

CertificateNames NamesOfCertificate(const void* x509) {
  CertificateNames names;
  const X509* cert = static_cast<const X509*>(x509);
  if (cert == nullptr) return names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
    if (name->type != GEN_URI && name->type != GEN_DNS) continue;
    const ASN1_IA5STRING* text =
        name->type == GEN_URI ? name->d.uniformResourceIdentifier : name->d.dNSName;
    std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                      static_cast<size_t>(ASN1_STRING_length(text)));
    (name->type == GEN_URI ? names.uri_sans : names.dns_sans).push_back(std::move(value));
  }
  GENERAL_NAMES_free(sans);
  const X509_NAME* subject = X509_get_subject_name(cert);
  int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index >= 0) {
    const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
    names.common_name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)),
                             static_cast<size_t>(ASN1_STRING_length(cn)));
  }
  return names;
}

}  // namespace feed::security
