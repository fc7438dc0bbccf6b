/*
 * synccost: how long a synced append takes on a directory's disk, as a
 * figure beside the benchmarks' added latency. A report is durable once
 * its line in reports.jsonl is appended and fdatasync has returned
 * (docs/state.md), so no report can be durable sooner after its exit
 * than that sync allows: on a disk whose sync takes 4 ms one time in a
 * hundred, an added latency whose 99th percentile is under 4 ms is out
 * of reach whatever the agent does. This measures it the way reapd
 * writes: a line of a report's size appended to a file in DIR and
 * synced, N times, GAP_US microseconds apart (a pace, not a storm), the
 * file removed at the end.
 *
 * Usage: synccost DIR [N [GAP_US]]   (default 400 syncs, 2000 us apart)
 * Prints one line: "sync_ms_p50 V sync_ms_p90 V sync_ms_p99 V sync_ms_max V".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_BYTES 700 /* a report's line, about (docs/performance.md) */

static int
by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int
main(int argc, char **argv)
{
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 400;
    long gap = argc > 3 ? strtol(argv[3], NULL, 10) : 2000;
    char path[4096], line[LINE_BYTES];
    double *v = NULL, t0;
    int fd = -1, rc = 1;
    long i;

    if (argc < 2 || n <= 0 || n > 1000000 || gap < 0 ||
        snprintf(path, sizeof(path), "%s/synccost.%ld", argv[1],
                 (long)getpid()) >= (int)sizeof(path)) {
        fprintf(stderr, "usage: synccost DIR [N [GAP_US]]\n");
        return 2;
    }
    memset(line, 'x', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    v = calloc((size_t)n, sizeof(*v));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (v == NULL || fd < 0) {
        fprintf(stderr, "synccost: %s: %s\n", path, strerror(errno));
        goto out;
    }
    for (i = 0; i < n; i++) {
        struct timespec ts = {gap / 1000000, (gap % 1000000) * 1000};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        t0 = now_ms();
        if (write(fd, line, sizeof(line)) != (ssize_t)sizeof(line) ||
            fdatasync(fd) != 0) {
            fprintf(stderr, "synccost: %s: %s\n", path, strerror(errno));
            goto out;
        }
        v[i] = now_ms() - t0;
    }
    qsort(v, (size_t)n, sizeof(*v), by_value);
    printf("sync_ms_p50 %.3f sync_ms_p90 %.3f sync_ms_p99 %.3f "
           "sync_ms_max %.3f\n",
           v[n / 2], v[n * 9 / 10], v[n * 99 / 100], v[n - 1]);
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    free(v);
    return rc;
}
