// OpenSSL (libssl, libcrypto) for Swift. Only SalvoIO imports this module.
//
// Swift imports OpenSSL's functions as they are; function-like macros it cannot import get a
// `static inline` wrapper in the "macro wrappers" section below, each named CSalvoSSL_<macro>.
#ifndef SALVO_COPENSSL_SHIM_H
#define SALVO_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/evp.h>

// MARK: - macro wrappers

#endif
