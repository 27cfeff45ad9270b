/* nodelay.c: preloaded into mpirun and its ranks for the peer's notify
 * measurement. OpenPMIx's clients reach their server over loopback TCP
 * without TCP_NODELAY, so a small event waits for Nagle's delayed
 * acknowledgement (~20 ms per round trip, seen on Debian's 4.2.2); the
 * benchmark compares pmixbus with OpenPMIx at its best, so every TCP
 * socket connected or accepted gets TCP_NODELAY. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static void nodelay(int fd)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int one = 1;

    if (fd >= 0 && 0 == getsockname(fd, (struct sockaddr *)&sa, &len) &&
        (AF_INET == sa.ss_family || AF_INET6 == sa.ss_family))
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    int rc;

    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    rc = real(fd, addr, len);
    nodelay(fd);
    return rc;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    static int (*real)(int, struct sockaddr *, socklen_t *);
    int s;

    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    s = real(fd, addr, len);
    nodelay(s);
    return s;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    int s;

    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    s = real(fd, addr, len, flags);
    nodelay(s);
    return s;
}
