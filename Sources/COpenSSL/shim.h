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

// SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl; Swift cannot import function-like macros.
static inline int CSalvoSSL_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

// SSL_CTX_set_session_cache_mode is a macro over SSL_CTX_ctrl.
static inline long CSalvoSSL_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

// SSL_CTX_set_read_ahead is a macro over SSL_CTX_ctrl.
static inline void CSalvoSSL_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) {
    SSL_CTX_set_read_ahead(ctx, yes);
}

// SSL_CTX_set_max_proto_version is a macro over SSL_CTX_ctrl.
static inline int CSalvoSSL_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

// SSL_CTX_add1_chain_cert is a macro over SSL_CTX_ctrl.
static inline int CSalvoSSL_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add1_chain_cert(ctx, cert);
}

// SSL_set_tlsext_host_name (SNI) is a macro over SSL_ctrl.
static inline int CSalvoSSL_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// BIO_set_retry_read is a macro over BIO_set_flags.
static inline void CSalvoSSL_BIO_set_retry_read(BIO *bio) {
    BIO_set_retry_read(bio);
}

// BIO_clear_retry_flags is a macro over BIO_clear_flags.
static inline void CSalvoSSL_BIO_clear_retry_flags(BIO *bio) {
    BIO_clear_retry_flags(bio);
}

// SSL_set_app_data / SSL_get_app_data are macros over the ex-data functions and cast through char *.
static inline void CSalvoSSL_SSL_set_app_data(SSL *ssl, void *data) {
    SSL_set_app_data(ssl, data);
}

static inline void *CSalvoSSL_SSL_get_app_data(const SSL *ssl) {
    return SSL_get_app_data(ssl);
}

// OPENSSL_free is a macro over CRYPTO_free that passes the caller's file and line.
static inline void CSalvoSSL_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
