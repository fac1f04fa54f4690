/*
 * reference-sender: the sending half of the reference link, the ceiling Salvo's binary sends are measured against.
 *
 * Why it is hand-written in C: it measures what this host's TLS link can carry for a given frame size and number
 * of connections, with nothing of a real job on the path. The frames are encoded once before the clock starts
 * (no input file, no validation, no window of rows in flight); each connection has its own thread, its own
 * io_uring and two ciphertext buffers: while the kernel sends one, SSL_write encrypts the next batch of frames
 * straight into the other (a BIO that appends to the buffer: one copy, as a socket write would make). What is
 * left is TLS 1.3 encryption and the kernel's loopback path, the cost no sender can avoid. It is not part of
 * the product; `salvo bench send` builds and runs it against reference-receiver.
 *
 * Each connection ends with a barrier (a command-2 frame holding only an identifier) and waits for the
 * receiver's answer, so the time covers every frame read and walked on the other side.
 *
 * Usage:
 *   reference-sender --port PORT [--host 127.0.0.1] [--frames 1000000] [--connections 2] [--frame-bytes 161]
 *                    [--batch-bytes 262144]
 * Prints one line:
 *   sender frames=F bytes=B connections=C frame_bytes=S seconds=T frames_per_second=R bytes_per_second=W
 *          user=U sys=Y
 * (seconds: from the first connection's start after every handshake is done to the last barrier's answer, each
 * taken by the connection's own thread; user/sys: the connections' threads' CPU seconds over their part of it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1";
static int port, connection_count = 2;
static long frame_bytes = 161, batch_bytes = 256 * 1024;
static unsigned long long frame_total = 1000000;
static unsigned char *plaintext; /* frames_per_batch frames, encoded once */
static long frames_per_batch;
static SSL_CTX *context;
static BIO_METHOD *capture_method;
static pthread_barrier_t handshakes_done;

static void fail(const char *what) {
    fprintf(stderr, "reference-sender: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(3);
}

/* The ciphertext buffer SSL_write appends to, through the capture BIO. */
struct capture {
    unsigned char *bytes;
    size_t count, capacity;
};

static int capture_write(BIO *bio, const char *data, int count) {
    struct capture *capture = BIO_get_data(bio);
    if (capture->count + (size_t)count > capture->capacity) fail("ciphertext buffer too small");
    memcpy(capture->bytes + capture->count, data, (size_t)count);
    capture->count += (size_t)count;
    return count;
}

static long capture_control(BIO *bio, int command, long number, void *pointer) {
    (void)bio, (void)number, (void)pointer;
    return command == BIO_CTRL_FLUSH ? 1 : 0;
}

static void put32(unsigned char *p, uint32_t value) {
    p[0] = (unsigned char)(value >> 24), p[1] = (unsigned char)(value >> 16);
    p[2] = (unsigned char)(value >> 8), p[3] = (unsigned char)value;
}

/* One command-2 frame of frame_bytes bytes, laid out as Salvo's FrameLayout does: token, payload, identifier,
 * expiry, priority. */
static void encode_frame(unsigned char *out, uint64_t *seed, uint32_t identifier) {
    long payload = frame_bytes - 61;
    unsigned char *p = out;
    *p++ = 2;
    put32(p, (uint32_t)(frame_bytes - 5)), p += 4;
    *p++ = 1, *p++ = 0, *p++ = 32;
    for (int i = 0; i < 32; i++) { /* splitmix64: distinct pseudo-random tokens */
        uint64_t z = (*seed += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        *p++ = (unsigned char)(z ^ (z >> 31));
    }
    *p++ = 2, *p++ = (unsigned char)(payload >> 8), *p++ = (unsigned char)payload;
    /* A JSON payload of the right size: {"aps":{"alert":"xxx…"}} */
    static const char head[] = "{\"aps\":{\"alert\":\"", tail[] = "\"}}";
    if (payload >= (long)(sizeof head + sizeof tail - 2)) {
        memcpy(p, head, sizeof head - 1);
        memset(p + sizeof head - 1, 'x', (size_t)payload - (sizeof head - 1) - (sizeof tail - 1));
        memcpy(p + payload - (sizeof tail - 1), tail, sizeof tail - 1);
    } else {
        memset(p, ' ', (size_t)payload);
    }
    p += payload;
    *p++ = 3, *p++ = 0, *p++ = 4, put32(p, identifier), p += 4;
    *p++ = 4, *p++ = 0, *p++ = 4, put32(p, 0), p += 4;
    *p++ = 5, *p++ = 0, *p++ = 1, *p++ = 10;
}

struct connection {
    int index;
    unsigned long long frames;
    const char *error;
    /* Taken by the connection's own thread from the barrier after the handshakes to the barrier frame's answer: the
       main thread, woken by the same barrier, may run only after the connections are done on a busy machine. */
    double started, ended, user, sys;
};

static double now_seconds(void);
static double cpu(struct timeval value);

/* Waits for the send of `count` bytes at `bytes` to complete, sending what a short send left. */
static int send_all(struct io_uring *ring, int fd, const unsigned char *bytes, size_t count, int submitted) {
    size_t sent = 0;
    while (sent < count) {
        if (!submitted) {
            struct io_uring_sqe *entry = io_uring_get_sqe(ring);
            io_uring_prep_send(entry, fd, bytes + sent, count - sent, MSG_NOSIGNAL);
            io_uring_submit(ring);
        }
        submitted = 0;
        struct io_uring_cqe *completion;
        struct __kernel_timespec timeout = {.tv_sec = 30};
        if (io_uring_wait_cqe_timeout(ring, &completion, &timeout) != 0) return -1;
        int result = completion->res;
        io_uring_cqe_seen(ring, completion);
        if (result <= 0) return -1;
        sent += (size_t)result;
    }
    return 0;
}

static void *run_connection(void *argument) {
    struct connection *connection = argument;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &address.sin_addr);
    struct timeval timeout = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    SSL *ssl = SSL_new(context);
    /* The handshake over socket BIOs; then the write side becomes the capture BIO (the read side stays the
     * socket, for the barrier's answer). */
    BIO *socket_read = BIO_new_socket(fd, BIO_NOCLOSE), *socket_write = BIO_new_socket(fd, BIO_NOCLOSE);
    int connected = connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
    SSL_set_bio(ssl, socket_read, socket_write);
    if (!connected || SSL_connect(ssl) != 1) {
        connection->error = "cannot connect or finish the TLS handshake";
        pthread_barrier_wait(&handshakes_done);
        return NULL;
    }
    struct capture buffers[2];
    for (int i = 0; i < 2; i++) {
        buffers[i].capacity = (size_t)batch_bytes + (size_t)batch_bytes / 64 + 4096; /* records add ~22 bytes */
        buffers[i].bytes = malloc(buffers[i].capacity);
        buffers[i].count = 0;
    }
    BIO *capture = BIO_new(capture_method);
    BIO_set_init(capture, 1);
    SSL_set0_wbio(ssl, capture);
    struct io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) != 0) fail("io_uring_queue_init failed (is io_uring allowed here?)");

    pthread_barrier_wait(&handshakes_done);
    struct rusage before;
    getrusage(RUSAGE_THREAD, &before);
    connection->started = now_seconds();

    unsigned long long remaining = connection->frames;
    int current = 0, in_flight = 0;
    while (remaining > 0 || in_flight) {
        int filled = 0;
        if (remaining > 0) {
            /* Encrypt the next batch into the buffer not being sent. */
            int next = in_flight ? 1 - current : current;
            long frames = remaining < (unsigned long long)frames_per_batch ? (long)remaining : frames_per_batch;
            buffers[next].count = 0;
            BIO_set_data(capture, &buffers[next]);
            if (SSL_write(ssl, plaintext, (int)(frames * frame_bytes)) <= 0) fail("SSL_write failed");
            remaining -= (unsigned long long)frames;
            filled = 1;
            if (!in_flight) {
                struct io_uring_sqe *entry = io_uring_get_sqe(&ring);
                io_uring_prep_send(entry, fd, buffers[next].bytes, buffers[next].count, MSG_NOSIGNAL);
                io_uring_submit(&ring);
                current = next, in_flight = 1;
                continue;
            }
        }
        /* The send in flight completes (its short sends finished), then the filled buffer goes. */
        if (send_all(&ring, fd, buffers[current].bytes, buffers[current].count, 1) != 0) {
            connection->error = "a send failed or took more than 30 s";
            return NULL;
        }
        in_flight = 0;
        if (filled) {
            current = 1 - current;
            struct io_uring_sqe *entry = io_uring_get_sqe(&ring);
            io_uring_prep_send(entry, fd, buffers[current].bytes, buffers[current].count, MSG_NOSIGNAL);
            io_uring_submit(&ring);
            in_flight = 1;
        }
    }
    /* The barrier: 2 | 7 | item 3 (identifier), answered by 8 | status | identifier once everything was read. */
    unsigned char barrier[12] = {2, 0, 0, 0, 7, 3, 0, 4};
    uint32_t barrier_id = 0xFFFFFF00u + (uint32_t)connection->index;
    put32(barrier + 8, barrier_id);
    buffers[0].count = 0;
    BIO_set_data(capture, &buffers[0]);
    unsigned char answer[6];
    if (SSL_write(ssl, barrier, sizeof barrier) <= 0 ||
        send_all(&ring, fd, buffers[0].bytes, buffers[0].count, 0) != 0 ||
        SSL_read(ssl, answer, sizeof answer) != (int)sizeof answer || answer[0] != 8 ||
        ((uint32_t)answer[2] << 24 | (uint32_t)answer[3] << 16 | (uint32_t)answer[4] << 8 | answer[5]) !=
            barrier_id) {
        connection->error = "the barrier was not answered";
        return NULL;
    }
    connection->ended = now_seconds();
    struct rusage after;
    getrusage(RUSAGE_THREAD, &after);
    connection->user = cpu(after.ru_utime) - cpu(before.ru_utime);
    connection->sys = cpu(after.ru_stime) - cpu(before.ru_stime);
    io_uring_queue_exit(&ring);
    SSL_free(ssl);
    close(fd);
    free(buffers[0].bytes), free(buffers[1].bytes);
    return NULL;
}

static double now_seconds(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

static double cpu(struct timeval value) { return (double)value.tv_sec + (double)value.tv_usec / 1e6; }

static void usage(void) {
    fprintf(stderr, "usage: reference-sender --port PORT [--host 127.0.0.1] [--frames N] [--connections C] "
                    "[--frame-bytes 62..2109] [--batch-bytes B]\n");
    exit(64);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host")) host = argv[++i];
        else if (!strcmp(argv[i], "--frames")) frame_total = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--connections")) connection_count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--frame-bytes")) frame_bytes = atol(argv[++i]);
        else if (!strcmp(argv[i], "--batch-bytes")) batch_bytes = atol(argv[++i]);
        else usage();
    }
    /* Command 2 with a 1..2048-byte payload: 62 to 2109 bytes a frame. */
    if (port < 1 || port > 65535 || frame_total < 1 || frame_total > 1000000000ull || connection_count < 1 ||
        connection_count > 64 || frame_bytes < 62 || frame_bytes > 2109 || batch_bytes < frame_bytes ||
        batch_bytes > 16 * 1024 * 1024)
        usage();
    signal(SIGPIPE, SIG_IGN);

    frames_per_batch = batch_bytes / frame_bytes;
    plaintext = malloc((size_t)(frames_per_batch * frame_bytes));
    uint64_t seed = 0x5A17;
    for (long i = 0; i < frames_per_batch; i++) encode_frame(plaintext + i * frame_bytes, &seed, (uint32_t)i + 1);

    context = SSL_CTX_new(TLS_client_method());
    if (!context || SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION) != 1) fail("no TLS 1.3 context");
    /* The receiver's certificate is not checked: the link is measured, not the trust. */
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, NULL);
    capture_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "capture");
    BIO_meth_set_write(capture_method, capture_write);
    BIO_meth_set_ctrl(capture_method, capture_control);

    struct connection *connections = calloc((size_t)connection_count, sizeof *connections);
    pthread_t *threads = calloc((size_t)connection_count, sizeof *threads);
    pthread_barrier_init(&handshakes_done, NULL, (unsigned)connection_count + 1);
    for (int i = 0; i < connection_count; i++) {
        connections[i].index = i;
        connections[i].frames = frame_total / (unsigned long long)connection_count +
                                ((unsigned long long)i < frame_total % (unsigned long long)connection_count);
        pthread_create(&threads[i], NULL, run_connection, &connections[i]);
    }
    pthread_barrier_wait(&handshakes_done);
    for (int i = 0; i < connection_count; i++) pthread_join(threads[i], NULL);
    double start = 0, end = 0, user = 0, sys = 0;
    for (int i = 0; i < connection_count; i++) {
        if (connections[i].error) {
            fprintf(stderr, "reference-sender: connection %d to %s:%d: %s\n", i, host, port, connections[i].error);
            ERR_print_errors_fp(stderr);
            return 3;
        }
        if (i == 0 || connections[i].started < start) start = connections[i].started;
        if (i == 0 || connections[i].ended > end) end = connections[i].ended;
        user += connections[i].user, sys += connections[i].sys;
    }
    double elapsed = end - start;
    unsigned long long bytes = frame_total * (unsigned long long)frame_bytes;
    printf("sender frames=%llu bytes=%llu connections=%d frame_bytes=%ld seconds=%.6f frames_per_second=%.0f "
           "bytes_per_second=%.0f user=%.3f sys=%.3f\n",
           frame_total, bytes, connection_count, frame_bytes, elapsed, (double)frame_total / elapsed,
           (double)bytes / elapsed, user, sys);
    return 0;
}
