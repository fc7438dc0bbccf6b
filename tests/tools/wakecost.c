/*
 * wakecost: what one wakeup costs on this machine, as a figure beside
 * the benchmarks' CPU per exit. A daemon that sleeps in epoll_wait and is
 * woken by a socket pays, each time, for the context switch in and out
 * (and, in a virtual machine, for the exits to the hypervisor that go
 * with them). This measures it the same way the benchmarks measure reapd:
 * a child writes one byte to a unix socket every GAP_US microseconds,
 * the parent sleeps in epoll_wait, reads it and answers one byte, and
 * the parent's CPU (user + system) is divided by the wakeups.
 *
 * Usage: wakecost [N [GAP_US]]   (default 2000 wakeups, 1000 us apart)
 * Prints one line: "wakeup_cpu_us VALUE".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
cpu_us(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int
child(int fd, long n, long gap_us)
{
    struct timespec ts = {gap_us / 1000000, (gap_us % 1000000) * 1000};
    char c = 'x';
    long i;

    for (i = 0; i < n; i++) {
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        ts.tv_sec = gap_us / 1000000;
        ts.tv_nsec = (gap_us % 1000000) * 1000;
        if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
            return 1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
    long gap = argc > 2 ? strtol(argv[2], NULL, 10) : 1000;
    struct epoll_event ev = {.events = EPOLLIN}, got;
    int sv[2], ep, status, rc = 1;
    double t0, t1;
    pid_t pid;
    char c;
    long i;

    if (n <= 0 || gap < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        fprintf(stderr, "usage: wakecost [N [GAP_US]]\n");
        return 2;
    }
    pid = fork();
    if (pid < 0) {
        perror("wakecost: fork");
        return 1;
    }
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1], n, gap));
    }
    close(sv[1]);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev) != 0) {
        perror("wakecost: epoll");
        goto out;
    }
    t0 = cpu_us();
    for (i = 0; i < n; i++) {
        if (epoll_wait(ep, &got, 1, -1) != 1 || read(sv[0], &c, 1) != 1 ||
            write(sv[0], &c, 1) != 1) {
            perror("wakecost: ping-pong");
            goto out;
        }
    }
    t1 = cpu_us();
    printf("wakeup_cpu_us %.1f\n", (t1 - t0) / (double)n);
    rc = 0;
out:
    close(sv[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        rc = 1;
    return rc;
}
