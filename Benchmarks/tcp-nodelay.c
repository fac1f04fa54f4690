// Loaded into a proxy with LD_PRELOAD by Benchmarks/proxy.sh: sets TCP_NODELAY on the sockets the process accepts and
// connects, which tinyproxy never does, to measure what Nagle's algorithm on them costs a job. TCP_NODELAY_ON=accepted
// (the sender's side) or connected (the gateway's side) sets it on one side only, to tell which one holds the job.
//   cc -shared -fPIC -O2 -o tcp-nodelay.so tcp-nodelay.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int wanted(const char *side) {
    const char *only = getenv("TCP_NODELAY_ON");
    return only == NULL || *only == 0 || strcmp(only, side) == 0;
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int accept(int fd, struct sockaddr *address, socklen_t *length) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = dlsym(RTLD_NEXT, "accept");
    int client = real(fd, address, length);
    if (client >= 0 && wanted("accepted")) nodelay(client);
    return client;
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real) real = dlsym(RTLD_NEXT, "accept4");
    int client = real(fd, address, length, flags);
    if (client >= 0 && wanted("accepted")) nodelay(client);
    return client;
}

int connect(int fd, const struct sockaddr *address, socklen_t length) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = dlsym(RTLD_NEXT, "connect");
    if (wanted("connected")) nodelay(fd);
    return real(fd, address, length);
}
