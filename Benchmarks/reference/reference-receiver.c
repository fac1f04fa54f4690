/*
 * reference-receiver: the sink of the reference link, the ceiling Salvo's binary sends are measured against.
 *
 * Why it is hand-written in C: the limit of a TLS link on a given host is what a sender and a receiver that do
 * nothing else can carry. This program does the least a gateway must do with every byte (TLS 1.3 decryption and a
 * walk over each command-2 frame, checking its framing) and nothing more: no ledger, no per-token table, no
 * allocation per frame. It is not part of the product; `salvo bench send` builds and runs it.
 *
 * What it speaks of the binary provider interface (command 2 only, as Salvo sends by default):
 *   frame   = 2 | frame length (4, big endian) | items
 *   item    = id (1) | length (2) | data; ids 1 token (32), 2 payload (1..2048), 3 identifier (4), 4 expiry (4),
 *             5 priority (1), each at most once, filling the frame length exactly.
 *   barrier = a frame with only item 3: the gateway answers `8 | 2 (missing device token) | identifier` and
 *             closes, as APNs does; its answer proves every earlier frame was read. This is how a sender ends a
 *             connection and learns that all it wrote arrived.
 * It never answers anything else. A frame with bad framing is named on stderr, counted as invalid, and its
 * connection closed.
 *
 * Usage:
 *   reference-receiver --cert SERVER.pem --key SERVER-KEY.pem [--port 0] [--stdin-control] [--frames N]
 * Prints `listening 127.0.0.1 PORT` once it accepts connections, then, when it stops (SIGINT/SIGTERM, end of
 * standard input with --stdin-control, or N frames received with no connection open with --frames), one line:
 *   receiver frames=F bytes=B barriers=R invalid=I connections=C cipher=SUITE user=U sys=S
 * (bytes: plaintext of the frames counted; user/sys: this process's CPU seconds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* One read's room: OpenSSL hands out at most one 16 KiB record per SSL_read; more room lets a frame split over
 * two records sit whole before it is walked. */
enum { READ_ROOM = 64 * 1024, MAX_FRAME = 5 + 3 + 32 + 3 + 2048 + 3 + 4 + 3 + 4 + 3 + 1 };

static SSL_CTX *context;
static atomic_ullong frames_total, bytes_total, barriers_total, invalid_total, connections_total;
static atomic_int open_connections;
static _Atomic(const char *) cipher = "none"; /* the suite the last connection negotiated */
static volatile sig_atomic_t stop_requested;

static void on_signal(int signal_number) {
    (void)signal_number;
    stop_requested = 1;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* What walking the bytes found. */
struct walk {
    size_t used;          /* bytes of whole frames walked */
    unsigned long frames; /* notification frames among them */
    int barrier;          /* a barrier was walked (it ends the walk) */
    uint32_t barrier_id;
    const char *invalid; /* why the framing is wrong, or NULL */
};

/* Walks the whole frames at the start of bytes[0..count); a partial frame at the end is left for the next read. */
static struct walk walk_frames(const unsigned char *bytes, size_t count) {
    struct walk result = {0};
    size_t offset = 0;
    while (count - offset >= 5) {
        const unsigned char *frame = bytes + offset;
        if (frame[0] != 2) {
            result.invalid = "command is not 2";
            break;
        }
        uint32_t length = be32(frame + 1);
        if (length > MAX_FRAME - 5) {
            result.invalid = "frame length above the largest command-2 frame";
            break;
        }
        if (count - offset < 5 + (size_t)length) break; /* the rest arrives with the next read */
        const unsigned char *item = frame + 5, *end = frame + 5 + length;
        unsigned seen = 0;
        uint32_t identifier = 0;
        while (item < end && !result.invalid) {
            if (end - item < 3) {
                result.invalid = "item header cut by the frame length";
                break;
            }
            unsigned id = item[0], item_length = (unsigned)item[1] << 8 | item[2];
            if (end - item - 3 < (long)item_length) {
                result.invalid = "item longer than its frame";
            } else if (id < 1 || id > 5 || (seen & 1u << id)) {
                result.invalid = "unknown or repeated item id";
            } else if ((id == 1 && item_length != 32) || (id == 2 && (item_length < 1 || item_length > 2048)) ||
                       ((id == 3 || id == 4) && item_length != 4) || (id == 5 && item_length != 1)) {
                result.invalid = "item of the wrong length";
            } else if (id == 3) {
                identifier = be32(item + 3);
            }
            seen |= 1u << id;
            item += 3 + item_length;
        }
        if (result.invalid) break;
        offset += 5 + length;
        if ((seen & 0x6) == 0x6) {
            result.frames++;
        } else if (seen == 1u << 3) {
            result.barrier = 1;
            result.barrier_id = identifier;
            break;
        } else {
            result.invalid = "a frame without token and payload that is not a barrier";
            break;
        }
    }
    result.used = offset;
    return result;
}

static void *serve(void *argument) {
    int fd = (int)(intptr_t)argument;
    unsigned long long number = atomic_fetch_add(&connections_total, 1) + 1;
    /* Every wait is bounded: a sender that goes silent for a minute is left. */
    struct timeval timeout = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    SSL *ssl = SSL_new(context);
    unsigned char *buffer = malloc(READ_ROOM + MAX_FRAME);
    if (!ssl || !buffer || SSL_set_fd(ssl, fd) != 1 || SSL_accept(ssl) != 1) {
        fprintf(stderr, "reference-receiver: connection %llu: TLS handshake failed\n", number);
        ERR_print_errors_fp(stderr);
        goto done;
    }
    atomic_store(&cipher, SSL_get_cipher_name(ssl));
    size_t have = 0;
    for (;;) {
        int count = SSL_read(ssl, buffer + have, READ_ROOM + MAX_FRAME - (int)have);
        if (count <= 0) break; /* the sender closed, or the connection failed */
        have += (size_t)count;
        struct walk walked = walk_frames(buffer, have);
        atomic_fetch_add_explicit(&frames_total, walked.frames, memory_order_relaxed);
        atomic_fetch_add_explicit(&bytes_total, walked.used, memory_order_relaxed);
        if (walked.invalid) {
            atomic_fetch_add(&invalid_total, 1);
            fprintf(stderr, "reference-receiver: connection %llu: invalid frame: %s\n", number, walked.invalid);
            break;
        }
        if (walked.barrier) {
            /* Counted above before the answer goes out: whoever reads the answer sees the counts final. */
            atomic_fetch_add(&barriers_total, 1);
            unsigned char answer[6] = {8, 2, (unsigned char)(walked.barrier_id >> 24),
                                       (unsigned char)(walked.barrier_id >> 16), (unsigned char)(walked.barrier_id >> 8),
                                       (unsigned char)walked.barrier_id};
            SSL_write(ssl, answer, sizeof answer);
            /* Close as the gateway does, after the sender has had the answer: half-close, then read to its end
             * so that no unread byte turns the close into a reset that could overtake the answer. */
            shutdown(fd, SHUT_WR);
            while (SSL_read(ssl, buffer, READ_ROOM) > 0) {
            }
            break;
        }
        memmove(buffer, buffer + walked.used, have - walked.used);
        have -= walked.used;
    }
done:
    SSL_free(ssl);
    free(buffer);
    close(fd);
    atomic_fetch_sub(&open_connections, 1);
    return NULL;
}

static double seconds(struct timeval value) { return (double)value.tv_sec + (double)value.tv_usec / 1e6; }

static void usage(void) {
    fprintf(stderr, "usage: reference-receiver --cert SERVER.pem --key SERVER-KEY.pem [--port 0] [--stdin-control] "
                    "[--frames N]\n");
    exit(64);
}

int main(int argc, char **argv) {
    const char *certificate = NULL, *key = NULL;
    long port = 0;
    int stdin_control = 0;
    unsigned long long until = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cert") && i + 1 < argc) certificate = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc) key = argv[++i];
        else if (!strcmp(argv[i], "--port") && i + 1 < argc) port = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc) until = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--stdin-control")) stdin_control = 1;
        else usage();
    }
    if (!certificate || !key || port < 0 || port > 65535) usage();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    context = SSL_CTX_new(TLS_server_method());
    if (!context || SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION) != 1 ||
        SSL_CTX_use_certificate_chain_file(context, certificate) != 1 ||
        SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) != 1) {
        fprintf(stderr, "reference-receiver: cannot use %s and %s\n", certificate, key);
        ERR_print_errors_fp(stderr);
        return 3;
    }
    /* A sender's client certificate is accepted without checking: the link is measured, not the trust. */
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, NULL);

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 128) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
        fprintf(stderr, "reference-receiver: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return 3;
    }
    printf("listening 127.0.0.1 %u\n", ntohs(address.sin_port));
    fflush(stdout);

    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    while (!stop_requested) {
        struct pollfd polled[2] = {{.fd = listener, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
        int ready = poll(polled, stdin_control ? 2 : 1, 100);
        if (ready > 0 && stdin_control && (polled[1].revents & (POLLIN | POLLHUP))) {
            char ignored[256];
            if (read(0, ignored, sizeof ignored) <= 0) break; /* the parent closed our standard input */
        }
        if (ready > 0 && (polled[0].revents & POLLIN)) {
            int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) continue;
            atomic_fetch_add(&open_connections, 1);
            pthread_t thread;
            if (pthread_create(&thread, &attributes, serve, (void *)(intptr_t)fd) != 0) {
                close(fd);
                atomic_fetch_sub(&open_connections, 1);
            }
        }
        if (until > 0 && atomic_load(&frames_total) >= until && atomic_load(&open_connections) == 0) break;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("receiver frames=%llu bytes=%llu barriers=%llu invalid=%llu connections=%llu cipher=%s user=%.3f sys=%.3f\n",
           atomic_load(&frames_total), atomic_load(&bytes_total), atomic_load(&barriers_total),
           atomic_load(&invalid_total), atomic_load(&connections_total), atomic_load(&cipher), seconds(usage.ru_utime),
           seconds(usage.ru_stime));
    fflush(stdout);
    _exit(0); /* connection threads may still be blocked in a read: do not wait for them */
}
