/*
 * torture — allocation-failure torture runs, in the manner of curl's
 * torture mode.
 *
 * The torture executables are linked with -Wl,--wrap for malloc, calloc,
 * realloc, strdup, strndup and free, so every allocation made by reapd's
 * own code (agent/, the static library) goes through the shim here. A
 * sweep runs one scenario over and over: run N makes the Nth allocation
 * fail (NULL, errno ENOMEM) and lets every other one succeed, for N = 1,
 * 2, 3 ... until a run makes fewer than N allocations. After each run it
 * checks that nothing leaked (its own table of live blocks, and
 * LeakSanitizer or valgrind when present) and that the scenario's own
 * verdict holds: a run that reports success produced exactly the expected
 * output, a run that failed did so cleanly, with an error.
 *
 * Allocations made inside shared libraries (libevent, libcurl, yajl,
 * SQLite, protobuf-c's own) do not go through the shim and never fail
 * here; see README.md.
 */
#ifndef TORTURE_H
#define TORTURE_H

#include <stdbool.h>
#include <stddef.h>

/* What one run of a scenario says about itself. */
enum torture_outcome {
    TORTURE_OK,     /* succeeded, with exactly the expected result */
    TORTURE_FAILED, /* failed cleanly: an error was returned and said */
    TORTURE_WRONG,  /* anything else; torture_wrong() said what */
};

/*
 * Records why a run went wrong (the first reason of a run is kept) and
 * returns TORTURE_WRONG, so a scenario can `return torture_wrong(...)`.
 */
enum torture_outcome torture_wrong(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Did the current run's failure happen (the Nth allocation was made)? */
bool torture_hit(void);
/* The failure being injected in the current run (0: none). */
unsigned long torture_fail_at(void);

/* A directory of the run's own (in /tmp), made empty for it and removed
 * with the files in it when the run is over, also after a crash. */
const char *torture_dir(void);

/*
 * Test-side work inside a run (parsing a report to check it, say) must
 * not count: allocations between pause and resume neither count nor fail
 * nor are tracked. Pairs nest.
 */
void torture_pause(void);
void torture_resume(void);

typedef enum torture_outcome (*torture_fn)(void *arg);

struct torture_sweep {
    const char *name;
    torture_fn run;
    void *arg;
    /* Every N up to `dense`, then every `stride`-th (0: 2000 and 7).
     * Under valgrind every `vg_stride`-th from the start (0: 1). The
     * environment overrides: TORTURE_STRIDE=k tests every k-th N,
     * TORTURE_N=k only N = k (and prints that run's failure site). */
    unsigned long dense, stride, vg_stride;
    /* Runs in flight at once, each in a child process (0: 4; the
     * environment's TORTURE_JOBS overrides). Results are taken in the
     * order of N whatever the order they end in. */
    unsigned jobs;
};

struct torture_summary {
    unsigned long allocs; /* allocations in a run that fails none */
    unsigned long runs;   /* runs with a failure injected */
    unsigned long sites;  /* distinct call sites those failures hit */
    unsigned long wrong;  /* runs that went wrong (see torture_outcome) */
};

/*
 * Runs the sweep: first once with no failure (it must succeed), then
 * once per N. Prints one summary line, and for every run that went wrong
 * its N, the reason, where the failed allocation was made and what
 * leaked. Returns the number of runs that went wrong (also in `sum`,
 * which may be NULL).
 */
unsigned long torture_sweep(const struct torture_sweep *sw,
                            struct torture_summary *sum);

/* For the scenarios' own logs: prints the stack of the current run's
 * failed allocation to `fd` (nothing if it did not happen). */
void torture_print_fail_stack(int fd);

#endif
