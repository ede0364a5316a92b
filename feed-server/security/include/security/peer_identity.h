// The identity of a verified client certificate, the same on the gRPC and HTTP ports: its
// first URI SAN (e.g. a SPIFFE id), else its first DNS SAN, else its subject's CN.
#pragma once

#include <string>
#include <vector>

namespace feed::security {

struct CertificateNames {
  std::vector<std::string> uri_sans;
  std::vector<std::string> dns_sans;
  std::string common_name;
};

std::string PeerIdentity(const CertificateNames& names);

// From an OpenSSL X509* (void* keeps OpenSSL out of this header); empty names for null.
CertificateNames NamesOfCertificate(const void* x509);

}  // namespace feed::security
