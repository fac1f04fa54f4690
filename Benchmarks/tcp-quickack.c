// Loaded into `salvo send` with LD_PRELOAD by Benchmarks/proxy.sh (QUICKACK=1): sets TCP_QUICKACK after every read
// of a socket, so the sender acknowledges what it received at once instead of after the kernel's delayed-ACK timer.
// Linux clears the option by itself, hence once a read. Measures what the sender's own acknowledgements cost a job
// through a proxy that leaves Nagle's algorithm on (tinyproxy).
//   cc -shared -fPIC -O2 -o tcp-quickack.so tcp-quickack.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

static void quickack(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

ssize_t read(int fd, void *buffer, size_t count) {
    static ssize_t (*real)(int, void *, size_t);
    if (!real) real = dlsym(RTLD_NEXT, "read");
    ssize_t got = real(fd, buffer, count);
    if (got > 0) quickack(fd);
    return got;
}

ssize_t readv(int fd, const struct iovec *vector, int count) {
    static ssize_t (*real)(int, const struct iovec *, int);
    if (!real) real = dlsym(RTLD_NEXT, "readv");
    ssize_t got = real(fd, vector, count);
    if (got > 0) quickack(fd);
    return got;
}

ssize_t recv(int fd, void *buffer, size_t count, int flags) {
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real) real = dlsym(RTLD_NEXT, "recv");
    ssize_t got = real(fd, buffer, count, flags);
    if (got > 0) quickack(fd);
    return got;
}

ssize_t recvmsg(int fd, struct msghdr *message, int flags) {
    static ssize_t (*real)(int, struct msghdr *, int);
    if (!real) real = dlsym(RTLD_NEXT, "recvmsg");
    ssize_t got = real(fd, message, flags);
    if (got > 0) quickack(fd);
    return got;
}
