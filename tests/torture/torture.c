/*
 * torture — the allocation shim and the sweep driver; see torture.h.
 *
 * The shim keeps its own table of the blocks a run allocated, so a leak
 * is reported with the number of the allocation that made it and its call
 * site, independently of the sanitizer or valgrind. Its own memory comes
 * from the __real_ functions and never counts. The table stores each
 * pointer complemented: LeakSanitizer and valgrind scan the heap for
 * pointers, and a table holding real ones would make every leaked block
 * look reachable.
 */
#define _GNU_SOURCE
#include "torture.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <limits.h>
#include <execinfo.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#define TORTURE_ASAN 1
#else
#define TORTURE_ASAN 0
#endif

#if !TORTURE_ASAN && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#define TORTURE_VALGRIND 1
#endif
#endif
#ifndef TORTURE_VALGRIND
#define TORTURE_VALGRIND 0
#endif

/* The linker's names for the wrapped functions and the real ones. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);

/* The fake engine is compiled with its allocations renamed to these: it
 * stands for the outside world, whose memory is not ours to fail. */
void *torture_exempt_malloc(size_t n);
void *torture_exempt_calloc(size_t n, size_t size);
void *torture_exempt_realloc(void *p, size_t n);
char *torture_exempt_strdup(const char *s);
char *torture_exempt_strndup(const char *s, size_t n);

#define STACK_MAX  32
#define SHOW_LEAKS 8  /* leaked blocks listed per run */
#define SHOW_RUNS  25 /* wrong runs shown in full per sweep */

struct block {
    uintptr_t key; /* ~pointer; 0: empty slot */
    unsigned long seq;
    size_t size;
    void *caller;
};

struct site {
    void *caller;
    unsigned long wrong;   /* runs failing here that went wrong */
    unsigned long first_n; /* the first of those */
};

static struct {
    /* The current run. */
    int on;
    int paused;
    unsigned long fail_at;
    unsigned long calls;
    int hit;
    void *fail_caller;
    void *fail_stack[STACK_MAX];
    int fail_depth;
    char why[1024];

    /* Live blocks allocated by the current run. */
    struct block *tab;
    size_t cap, used;
    int tab_broken; /* the table could not grow: leak checks are off */

    /* The sweep. */
    const char *name;
    struct site *sites;
    size_t nsites, sites_cap;
    int lsan_off; /* LeakSanitizer found a leak: later runs would see it
                     again, so it is not asked any more */
    unsigned long vg_leaked;
    int to_parent; /* in a run's child process: the pipe, else -1 */
    char dir[64];  /* the current run's directory (torture_dir) */
} T = {.to_parent = -1};

/* ---- the table of live blocks ----------------------------------------- */

static size_t
slot_of(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;

    return (size_t)(h >> 20) & (cap - 1);
}

static int
tab_grow(void)
{
    size_t ncap = T.cap ? T.cap * 2 : 1024, i;
    struct block *nt = __real_calloc(ncap, sizeof(*nt));

    if (nt == NULL)
        return -1;
    for (i = 0; i < T.cap; i++) {
        size_t j;

        if (T.tab[i].key == 0)
            continue;
        j = slot_of(T.tab[i].key, ncap);
        while (nt[j].key != 0)
            j = (j + 1) & (ncap - 1);
        nt[j] = T.tab[i];
    }
    __real_free(T.tab);
    T.tab = nt;
    T.cap = ncap;
    return 0;
}

static void
track(void *p, size_t size, unsigned long seq, void *caller)
{
    uintptr_t key = ~(uintptr_t)p;
    size_t j;

    if (T.tab_broken)
        return;
    if ((T.used + 1) * 2 > T.cap && tab_grow() != 0) {
        T.tab_broken = 1;
        return;
    }
    j = slot_of(key, T.cap);
    while (T.tab[j].key != 0)
        j = (j + 1) & (T.cap - 1);
    T.tab[j].key = key;
    T.tab[j].seq = seq;
    T.tab[j].size = size;
    T.tab[j].caller = caller;
    T.used++;
}

/* Removes `p` if the table holds it; returns whether it did (and what
 * it held in *out, which may be NULL). Backward-shift deletion keeps
 * every probe chain unbroken without tombstones. */
static int
untrack(void *p, struct block *out)
{
    uintptr_t key = ~(uintptr_t)p;
    size_t j, k;

    if (T.used == 0 || p == NULL)
        return 0;
    j = slot_of(key, T.cap);
    while (T.tab[j].key != key) {
        if (T.tab[j].key == 0)
            return 0;
        j = (j + 1) & (T.cap - 1);
    }
    if (out != NULL)
        *out = T.tab[j];
    T.tab[j].key = 0;
    T.used--;
    for (k = (j + 1) & (T.cap - 1); T.tab[k].key != 0;
         k = (k + 1) & (T.cap - 1)) {
        size_t home = slot_of(T.tab[k].key, T.cap);

        /* Move it back into the hole unless its home lies in (j, k]. */
        if ((k > j && (home <= j || home > k)) ||
            (k < j && (home <= j && home > k))) {
            T.tab[j] = T.tab[k];
            T.tab[k].key = 0;
            j = k;
        }
    }
    return 1;
}

static void
tab_clear(void)
{
    if (T.used > 0)
        memset(T.tab, 0, T.cap * sizeof(*T.tab));
    T.used = 0;
}

/* ---- runs in a child process ------------------------------------------
 *
 * Each run is forked off, so a crash or a hang is one wrong run, not the
 * end of the sweep. The child tells the parent the moment its allocation
 * fails (so a crash or hang after it still names the site), and how the
 * run ended.
 */

enum msg_type { MSG_HIT = 1, MSG_DONE = 2 };

struct msg {
    int type;
    int outcome;
    unsigned long calls;
    void *fail_caller;
    int fail_depth;
    void *fail_stack[STACK_MAX];
    char why[1024];
};

struct run_result {
    enum torture_outcome outcome;
    unsigned long calls;
    int hit;
};

static void tell_parent(int type, const struct run_result *r);

/* ---- the wrappers ------------------------------------------------------ */

static int
counting(void)
{
    return T.on && T.paused == 0;
}

/* Counts one allocation; true when it is the one to fail. Not inlined:
 * the stack it records starts with itself and the wrapper. */
__attribute__((noinline)) static int
fail_now(void *caller)
{
    T.calls++;
    if (T.calls != T.fail_at)
        return 0;
    T.hit = 1;
    T.fail_caller = caller;
    T.fail_depth = backtrace(T.fail_stack, STACK_MAX);
    if (T.to_parent >= 0)
        tell_parent(MSG_HIT, NULL);
    errno = ENOMEM;
    return 1;
}

void *
__wrap_malloc(size_t n)
{
    void *caller = __builtin_return_address(0), *p;

    if (counting() && fail_now(caller))
        return NULL;
    p = __real_malloc(n);
    if (p != NULL && counting())
        track(p, n, T.calls, caller);
    return p;
}

void *
__wrap_calloc(size_t n, size_t size)
{
    void *caller = __builtin_return_address(0), *p;

    if (counting() && fail_now(caller))
        return NULL;
    p = __real_calloc(n, size);
    if (p != NULL && counting())
        track(p, n * size, T.calls, caller);
    return p;
}

void *
__wrap_realloc(void *old, size_t n)
{
    void *caller = __builtin_return_address(0), *p;
    struct block b;
    int had;

    if (counting() && fail_now(caller))
        return NULL;
    had = untrack(old, &b);
    p = __real_realloc(old, n);
    if (p == NULL) {
        /* realloc(p, 0) freed it; any other NULL left it as it was. */
        if (had && n != 0)
            track(old, b.size, b.seq, b.caller);
        return NULL;
    }
    if (had || (old == NULL && counting()))
        track(p, n, counting() ? T.calls : b.seq, caller);
    return p;
}

char *
__wrap_strdup(const char *s)
{
    void *caller = __builtin_return_address(0);
    char *p;

    if (counting() && fail_now(caller))
        return NULL;
    p = __real_strdup(s);
    if (p != NULL && counting())
        track(p, strlen(p) + 1, T.calls, caller);
    return p;
}

char *
__wrap_strndup(const char *s, size_t n)
{
    void *caller = __builtin_return_address(0);
    char *p;

    if (counting() && fail_now(caller))
        return NULL;
    p = __real_strndup(s, n);
    if (p != NULL && counting())
        track(p, strlen(p) + 1, T.calls, caller);
    return p;
}

void
__wrap_free(void *p)
{
    untrack(p, NULL);
    __real_free(p);
}

void *
torture_exempt_malloc(size_t n)
{
    return __real_malloc(n);
}

void *
torture_exempt_calloc(size_t n, size_t size)
{
    return __real_calloc(n, size);
}

void *
torture_exempt_realloc(void *p, size_t n)
{
    /* A block the run allocated is not the fake's to move. */
    return __real_realloc(p, n);
}

char *
torture_exempt_strdup(const char *s)
{
    return __real_strdup(s);
}

char *
torture_exempt_strndup(const char *s, size_t n)
{
    return __real_strndup(s, n);
}

/* ---- for the scenarios --------------------------------------------------
 */

enum torture_outcome
torture_wrong(const char *fmt, ...)
{
    va_list ap;

    if (T.why[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(T.why, sizeof(T.why), fmt, ap);
        va_end(ap);
    }
    return TORTURE_WRONG;
}

bool
torture_hit(void)
{
    return T.hit != 0;
}

unsigned long
torture_fail_at(void)
{
    return T.fail_at;
}

const char *
torture_dir(void)
{
    return T.dir;
}

void
torture_pause(void)
{
    T.paused++;
}

void
torture_resume(void)
{
    if (T.paused > 0)
        T.paused--;
}

/* ---- where things happened --------------------------------------------- */

/* "function file:line" for a return address (the call is just before). */
static void
symbolize(void *pc, char *buf, size_t len)
{
#if TORTURE_ASAN
    __sanitizer_symbolize_pc((char *)pc - 1, "%f %s:%l", buf, len);
#else
    Dl_info di;
    const ElfW(Sym) *sym = NULL;

    if (dladdr1(pc, &di, (void **)&sym, RTLD_DL_SYMENT) != 0 &&
        di.dli_fname != NULL) {
        unsigned long off =
            (unsigned long)((char *)pc - 1 - (char *)di.dli_fbase);

        /* Static functions have no dynamic symbol (dladdr then names
         * the one before): the module offset is what `addr2line -f -e
         * MODULE OFFSET` wants. */
        if (sym != NULL && di.dli_saddr != NULL &&
            (char *)pc - 1 < (char *)di.dli_saddr + sym->st_size)
            snprintf(buf, len, "%s %s+0x%lx", di.dli_sname, di.dli_fname, off);
        else
            snprintf(buf, len, "%s+0x%lx", di.dli_fname, off);
        return;
    }
    snprintf(buf, len, "%p", pc);
#endif
}

void
torture_print_fail_stack(int fd)
{
    char line[512];
    int i;

    if (!T.hit)
        return;
    /* Frame 0 is fail_now itself, frame 1 the wrapper. */
    for (i = 2; i < T.fail_depth; i++) {
        symbolize(T.fail_stack[i], line, sizeof(line));
        dprintf(fd, "        #%d %s\n", i - 2, line);
    }
}

static void
on_death(void)
{
    static int told;

    /* A sanitizer's abort() comes back through on_crash: once is
     * enough. */
    if (told++)
        return;
    if (!T.hit) {
        dprintf(2,
                "torture %s: the run with N=%lu died before its "
                "allocation #%lu was made\n",
                T.name ? T.name : "?", T.fail_at, T.fail_at);
        return;
    }
    dprintf(2,
            "torture %s: the run with N=%lu died; its failed "
            "allocation was made at:\n",
            T.name ? T.name : "?", T.fail_at);
    torture_print_fail_stack(2);
}

/* cmocka catches these signals during a test (and would hide the
 * sanitizer's report); this handler says which run it was and where the
 * crash happened, then hands the signal on. */
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NCRASH (sizeof(crash_signals) / sizeof(crash_signals[0]))
static struct sigaction crash_old[NCRASH];

static void
on_crash(int sig)
{
    size_t i;

    dprintf(2, "torture %s: signal %d; the crash happened at:\n",
            T.name ? T.name : "?", sig);
#if TORTURE_ASAN
    __sanitizer_print_stack_trace();
#else
    {
        void *frames[STACK_MAX];

        backtrace_symbols_fd(frames, backtrace(frames, STACK_MAX), 2);
    }
#endif
    on_death();
    /* The previous handler (cmocka's, or the default) takes it from
     * here once this one returns. */
    for (i = 0; i < NCRASH; i++)
        if (crash_signals[i] == sig)
            sigaction(sig, &crash_old[i], NULL);
    raise(sig);
}

/* In a run's child, a crash ends the child: after the report, the
 * default action, never the parent's handlers (cmocka's would carry on
 * with the parent's test in the child). */
static void
crash_child(void)
{
    size_t i;

    for (i = 0; i < NCRASH; i++) {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sigaction(crash_signals[i], &sa, NULL);
        memset(&crash_old[i], 0, sizeof(crash_old[i]));
        crash_old[i].sa_handler = SIG_DFL;
    }
}

static void
crash_watch(int on)
{
    size_t i;

#if TORTURE_ASAN
    __sanitizer_set_death_callback(on ? on_death : NULL);
#endif
    for (i = 0; i < NCRASH; i++) {
        if (on) {
            struct sigaction sa;

            memset(&sa, 0, sizeof(sa));
            sa.sa_handler = on_crash;
            sigemptyset(&sa.sa_mask);
            sigaction(crash_signals[i], &sa, &crash_old[i]);
        } else {
            sigaction(crash_signals[i], &crash_old[i], NULL);
        }
    }
}

/* ---- leaks ------------------------------------------------------------- */

static int
running_on_valgrind(void)
{
#if TORTURE_VALGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return 0;
#endif
}

/* After a run: what it left behind. Appends to T.why; returns whether
 * anything leaked. */
static int
check_leaks(void)
{
    int leaked = 0;

    if (T.used > 0) {
        size_t i, shown = 0, n = strlen(T.why);

        n += (size_t)snprintf(T.why + n, sizeof(T.why) - n,
                              "%sleaked %zu block%s:", n ? "; " : "", T.used,
                              T.used == 1 ? "" : "s");
        for (i = 0; i < T.cap && shown < SHOW_LEAKS && n < sizeof(T.why);
             i++) {
            char where[256];

            if (T.tab[i].key == 0)
                continue;
            symbolize(T.tab[i].caller, where, sizeof(where));
            n += (size_t)snprintf(T.why + n, sizeof(T.why) - n,
                                  " #%lu (%zu bytes, %s)", T.tab[i].seq,
                                  T.tab[i].size, where);
            shown++;
        }
        leaked = 1;
    }
#if TORTURE_ASAN
    if (!T.lsan_off && __lsan_do_recoverable_leak_check() != 0) {
        size_t n = strlen(T.why);

        snprintf(T.why + n, sizeof(T.why) - n,
                 "%sLeakSanitizer found a leak (its report is above; "
                 "later runs are not checked by it)",
                 n ? "; " : "");
        T.lsan_off = 1;
        leaked = 1;
    }
#endif
#if TORTURE_VALGRIND
    if (running_on_valgrind()) {
        unsigned long lk = 0, dubious = 0, reachable = 0, suppressed = 0;

        VALGRIND_DO_QUICK_LEAK_CHECK;
        VALGRIND_COUNT_LEAKS(lk, dubious, reachable, suppressed);
        (void)dubious;
        (void)reachable;
        (void)suppressed;
        if (lk > T.vg_leaked) {
            size_t n = strlen(T.why);

            VALGRIND_DO_ADDED_LEAK_CHECK;
            snprintf(T.why + n, sizeof(T.why) - n,
                     "%svalgrind: %lu more bytes definitely or indirectly "
                     "lost (its report is above)",
                     n ? "; " : "", lk - T.vg_leaked);
            leaked = 1;
        }
        T.vg_leaked = lk;
    }
#endif
    return leaked;
}

/* ---- the sweep --------------------------------------------------------- */

/* A new directory for one run, in `dir` (64 bytes). */
static int
dir_make(char *dir)
{
    snprintf(dir, 64, "/tmp/reapd-torture-XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

/* Removes a run's directory and the files in it, whatever the run left
 * (a crashed or killed one cleans nothing up). */
static void
dir_remove(const char *dir)
{
    char path[PATH_MAX];
    struct dirent *e;
    DIR *d = opendir(dir);

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static struct run_result
run_once(const struct torture_sweep *sw, unsigned long n)
{
    struct run_result r;

    T.fail_at = n;
    T.calls = 0;
    T.hit = 0;
    T.fail_caller = NULL;
    T.fail_depth = 0;
    T.why[0] = '\0';
    T.paused = 0;
    tab_clear();
    T.on = 1;
    r.outcome = sw->run(sw->arg);
    T.on = 0;
    T.paused = 0;
    r.calls = T.calls;
    r.hit = T.hit;
    if (r.outcome == TORTURE_FAILED && !r.hit)
        r.outcome = torture_wrong("failed although no allocation failed");
    if (check_leaks())
        r.outcome = TORTURE_WRONG;
    if (T.tab_broken)
        r.outcome = torture_wrong("the leak table could not grow");
    return r;
}

/* From the child; only write(2), so that it may run inside an allocation
 * wrapper or a signal handler. */
static void
tell_parent(int type, const struct run_result *r)
{
    static struct msg m;
    const char *p = (const char *)&m;
    size_t left = sizeof(m);

    memset(&m, 0, sizeof(m));
    m.type = type;
    m.fail_caller = T.fail_caller;
    m.fail_depth = T.fail_depth;
    memcpy(m.fail_stack, T.fail_stack, sizeof(m.fail_stack));
    if (r != NULL) {
        m.outcome = (int)r->outcome;
        m.calls = r->calls;
        memcpy(m.why, T.why, sizeof(m.why));
    }
    while (left > 0) {
        ssize_t n = write(T.to_parent, p, left);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        left -= (size_t)n;
    }
}

static struct site *
site_of(void *caller)
{
    size_t i;

    for (i = 0; i < T.nsites; i++)
        if (T.sites[i].caller == caller)
            return &T.sites[i];
    if (T.nsites == T.sites_cap) {
        size_t ncap = T.sites_cap ? T.sites_cap * 2 : 64;
        struct site *ns = __real_realloc(T.sites, ncap * sizeof(*ns));

        if (ns == NULL)
            return NULL;
        T.sites = ns;
        T.sites_cap = ncap;
    }
    memset(&T.sites[T.nsites], 0, sizeof(T.sites[0]));
    T.sites[T.nsites].caller = caller;
    return &T.sites[T.nsites++];
}

static void
show_wrong(const struct torture_sweep *sw, unsigned long n,
           unsigned long shown)
{
    char where[256] = "";

    if (T.hit)
        symbolize(T.fail_caller, where, sizeof(where));
    if (shown >= SHOW_RUNS) {
        fprintf(stderr, "torture %s: N=%lu WRONG (allocation in %s): %.200s\n",
                sw->name, n, T.hit ? where : "-", T.why);
        return;
    }
    fprintf(stderr, "torture %s: N=%lu WRONG: %s\n", sw->name, n, T.why);
    if (T.hit) {
        fprintf(stderr, "    the failed allocation (#%lu) was made at:\n", n);
        fflush(stderr);
        torture_print_fail_stack(2);
    } else {
        fprintf(stderr, "    (no allocation failed in this run)\n");
    }
}

/* A run's result as the parent sees it. */
struct result {
    unsigned long n;
    enum torture_outcome outcome;
    unsigned long calls;
    int hit;
    void *fail_caller;
    int fail_depth;
    void *fail_stack[STACK_MAX];
    char why[1024];
    uint64_t ms;
};

/* A run in a child process. */
struct job {
    pid_t pid;
    int fd;
    char dir[64];
    uint64_t t0, deadline;
    struct msg in; /* being read */
    size_t got;
    int done;     /* its MSG_DONE arrived */
    int finished; /* reaped: `res` is final */
    int killed;
    struct result res;
};

#define MAX_JOBS   16
#define MAX_WINDOW 64 /* runs started and not yet taken */

struct sweep {
    const struct torture_sweep *sw;
    int verbose;
    unsigned long only;
    unsigned timeout_s;
    unsigned long runs, wrong, shown;
    int stop; /* a run made fewer allocations than its N */
    /* That run: */
    enum torture_outcome end_outcome;
    unsigned long end_calls;
    /* Started and not yet taken, oldest first from `head`; at most `max`
     * of them still running. A slow run at the head does not hold the
     * others back, only their taking. */
    struct job jobs[MAX_WINDOW];
    unsigned head, count, running, max;
};

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static unsigned long
env_ulong(const char *name)
{
    const char *v = getenv(name);

    return v != NULL ? strtoul(v, NULL, 10) : 0;
}

/* Makes `res` the current run's facts, for show_wrong and the stack. */
static void
load(const struct result *res)
{
    T.fail_at = res->n;
    T.hit = res->hit;
    T.fail_caller = res->fail_caller;
    T.fail_depth = res->fail_depth;
    memcpy(T.fail_stack, res->fail_stack, sizeof(T.fail_stack));
    memcpy(T.why, res->why, sizeof(T.why));
}

static void
save(struct result *res, unsigned long n, const struct run_result *r)
{
    res->n = n;
    res->outcome = r->outcome;
    res->calls = r->calls;
    res->hit = r->hit;
    res->fail_caller = T.fail_caller;
    res->fail_depth = T.fail_depth;
    memcpy(res->fail_stack, T.fail_stack, sizeof(res->fail_stack));
    memcpy(res->why, T.why, sizeof(res->why));
}

/* Takes one finished run, in the order of N. */
static void
take(struct sweep *ss, const struct result *res)
{
    struct site *st;

    load(res);
    if (!res->hit) {
        /* The run made fewer than N allocations: the sweep is over. */
        if (res->outcome != TORTURE_OK) {
            ss->wrong++;
            show_wrong(ss->sw, res->n, ss->shown++);
        }
        ss->end_outcome = res->outcome;
        ss->end_calls = res->calls;
        ss->stop = 1;
        return;
    }
    ss->runs++;
    st = site_of(res->fail_caller);
    if (ss->verbose || ss->only) {
        char where[256];

        symbolize(res->fail_caller, where, sizeof(where));
        fprintf(stderr,
                "torture %s: N=%lu %s in %llu ms (allocation in %s)%s%s\n",
                ss->sw->name, res->n,
                res->outcome == TORTURE_OK       ? "ok"
                : res->outcome == TORTURE_FAILED ? "failed cleanly"
                                                 : "WRONG",
                (unsigned long long)res->ms, where, res->why[0] ? ": " : "",
                res->why);
        if (ss->only && res->outcome != TORTURE_WRONG)
            torture_print_fail_stack(2);
    }
    if (res->outcome == TORTURE_WRONG) {
        ss->wrong++;
        if (st != NULL) {
            if (st->wrong == 0)
                st->first_n = res->n;
            st->wrong++;
        }
        show_wrong(ss->sw, res->n, ss->shown++);
    }
}

static int
job_start(struct sweep *ss, unsigned long n)
{
    struct job *j = &ss->jobs[(ss->head + ss->count) % MAX_WINDOW];
    int fds[2];

    memset(j, 0, sizeof(*j));
    j->res.n = n;
    if (dir_make(j->dir) != 0)
        return -1;
    if (pipe(fds) != 0) {
        dir_remove(j->dir);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    j->pid = fork();
    if (j->pid < 0) {
        close(fds[0]);
        close(fds[1]);
        dir_remove(j->dir);
        return -1;
    }
    if (j->pid == 0) {
        struct run_result r;
        unsigned i;

        /* Only this run's pipe stays open: the parent sees the end of
         * each child's pipe when that child ends. */
        for (i = 0; i < ss->count; i++)
            if (ss->jobs[(ss->head + i) % MAX_WINDOW].fd >= 0)
                close(ss->jobs[(ss->head + i) % MAX_WINDOW].fd);
        close(fds[0]);
        T.to_parent = fds[1];
        memcpy(T.dir, j->dir, sizeof(T.dir));
        crash_child();
        r = run_once(ss->sw, n);
        tell_parent(MSG_DONE, &r);
        _exit(0);
    }
    close(fds[1]);
    j->fd = fds[0];
    j->t0 = now_ms();
    j->deadline = j->t0 + (uint64_t)ss->timeout_s * 1000;
    ss->count++;
    ss->running++;
    return 0;
}

/* The child is gone (its pipe ended): reaps it and settles its result. */
static void
job_end(struct sweep *ss, struct job *j)
{
    int status = 0;

    close(j->fd);
    j->fd = -1; /* the number may now be another pipe's */
    ss->running--;
    while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
        ;
    j->finished = 1;
    j->res.ms = now_ms() - j->t0;
    dir_remove(j->dir);
    if (j->done)
        return;
    j->res.outcome = TORTURE_WRONG;
    if (j->killed)
        snprintf(j->res.why, sizeof(j->res.why), "hung: killed after %llu s",
                 (unsigned long long)(j->res.ms / 1000));
    else if (WIFSIGNALED(status))
        snprintf(j->res.why, sizeof(j->res.why),
                 "crashed: signal %d (the child's report is above)",
                 WTERMSIG(status));
    else
        snprintf(j->res.why, sizeof(j->res.why),
                 "died: exit status %d (the child's report is above)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void
job_read(struct sweep *ss, struct job *j)
{
    ssize_t n = read(j->fd, (char *)&j->in + j->got, sizeof(j->in) - j->got);

    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {
        job_end(ss, j);
        return;
    }
    j->got += (size_t)n;
    if (j->got < sizeof(j->in))
        return;
    j->got = 0;
    j->res.fail_caller = j->in.fail_caller;
    j->res.fail_depth = j->in.fail_depth;
    memcpy(j->res.fail_stack, j->in.fail_stack, sizeof(j->res.fail_stack));
    if (j->in.type == MSG_HIT) {
        j->res.hit = 1;
    } else {
        j->res.outcome = (enum torture_outcome)j->in.outcome;
        j->res.calls = j->in.calls;
        memcpy(j->res.why, j->in.why, sizeof(j->res.why));
        j->done = 1;
    }
}

/* Waits for news from the runs in flight (or a deadline). */
static void
jobs_wait(struct sweep *ss)
{
    struct pollfd pfd[MAX_WINDOW];
    uint64_t now = now_ms(), next = UINT64_MAX;
    unsigned i, k = 0, idx[MAX_WINDOW];

    for (i = 0; i < ss->count; i++) {
        struct job *j = &ss->jobs[(ss->head + i) % MAX_WINDOW];

        if (j->finished)
            continue;
        if (!j->killed && now >= j->deadline) {
            kill(j->pid, SIGKILL);
            j->killed = 1;
        }
        if (!j->killed && j->deadline < next)
            next = j->deadline;
        pfd[k].fd = j->fd;
        pfd[k].events = POLLIN;
        pfd[k].revents = 0;
        idx[k++] = (ss->head + i) % MAX_WINDOW;
    }
    if (k == 0)
        return;
    if (poll(pfd, k, next == UINT64_MAX ? -1 : (int)(next - now + 1)) <= 0)
        return;
    for (i = 0; i < k; i++)
        if (pfd[i].revents != 0)
            job_read(ss, &ss->jobs[idx[i]]);
}

/* Lets every run still in flight end (they are past the end of the
 * sweep, so they fail nothing) and drops their results. */
static void
jobs_drop(struct sweep *ss)
{
    while (ss->count > 0) {
        while (!ss->jobs[ss->head].finished)
            jobs_wait(ss);
        ss->head = (ss->head + 1) % MAX_WINDOW;
        ss->count--;
    }
}

/* Runs N = first, next(first), ... `jobs` at a time, taking their
 * results in the order of N, until one makes fewer allocations than its
 * N (or `last` is passed). Returns the next N that was not taken. */
static unsigned long
sweep_forked(struct sweep *ss, unsigned long first, unsigned long last,
             unsigned long (*next)(unsigned long, const void *),
             const void *how)
{
    unsigned long n = first;

    while (1) {
        while (!ss->stop && ss->running < ss->max && ss->count < MAX_WINDOW &&
               n <= last) {
            if (job_start(ss, n) != 0) {
                fprintf(stderr, "torture %s: cannot fork: %s\n", ss->sw->name,
                        strerror(errno));
                ss->wrong++;
                ss->stop = 1;
                break;
            }
            n = next(n, how);
        }
        if (ss->count == 0)
            break;
        jobs_wait(ss);
        while (ss->count > 0 && ss->jobs[ss->head].finished) {
            take(ss, &ss->jobs[ss->head].res);
            ss->head = (ss->head + 1) % MAX_WINDOW;
            ss->count--;
            if (ss->stop)
                jobs_drop(ss);
        }
    }
    return n;
}

static unsigned long
sweep_inline(struct sweep *ss, unsigned long first, unsigned long last,
             unsigned long (*next)(unsigned long, const void *),
             const void *how)
{
    unsigned long n;

    for (n = first; !ss->stop && n <= last; n = next(n, how)) {
        struct result res;
        struct run_result r;
        uint64_t t0 = now_ms();

        if (dir_make(T.dir) != 0) {
            fprintf(stderr, "torture %s: mkdtemp: %s\n", ss->sw->name,
                    strerror(errno));
            ss->wrong++;
            ss->stop = 1;
            break;
        }
        r = run_once(ss->sw, n);
        dir_remove(T.dir);
        save(&res, n, &r);
        res.ms = now_ms() - t0;
        take(ss, &res);
    }
    return n;
}

struct steps {
    unsigned long only, every, dense, stride;
};

static unsigned long
next_n(unsigned long n, const void *arg)
{
    const struct steps *st = arg;

    if (st->only)
        return ULONG_MAX;
    if (st->every)
        return n + st->every;
    return n < st->dense ? n + 1 : n + st->stride;
}

static unsigned long
just_once(unsigned long n, const void *arg)
{
    (void)n;
    (void)arg;
    return ULONG_MAX;
}

static unsigned long
sweep_runs(struct sweep *ss, int forked, unsigned long first,
           unsigned long last,
           unsigned long (*next)(unsigned long, const void *), const void *how)
{
    return forked ? sweep_forked(ss, first, last, next, how)
                  : sweep_inline(ss, first, last, next, how);
}

unsigned long
torture_sweep(const struct torture_sweep *sw, struct torture_summary *sum)
{
    struct steps steps;
    static struct sweep ss; /* big: not on the stack */
    struct torture_summary s;
    unsigned long n, limit, jobs;
    int forked;
    char how[96];
    size_t i;

    memset(&s, 0, sizeof(s));
    memset(&ss, 0, sizeof(ss));
    memset(&steps, 0, sizeof(steps));
    ss.sw = sw;
    ss.verbose = getenv("TORTURE_VERBOSE") != NULL;
    ss.only = steps.only = env_ulong("TORTURE_N");
    steps.every = env_ulong("TORTURE_STRIDE");
    steps.dense = sw->dense ? sw->dense : 2000;
    steps.stride = sw->stride ? sw->stride : 7;
    ss.timeout_s = env_ulong("TORTURE_TIMEOUT")
                       ? (unsigned)env_ulong("TORTURE_TIMEOUT")
                       : 120;
    if (steps.every == 0 && running_on_valgrind())
        steps.every = sw->vg_stride ? sw->vg_stride : 1;
    /* Under valgrind a child would make valgrind check it again at its
     * exit; a crash there is valgrind's to report anyway. */
    forked = !running_on_valgrind() && (getenv("TORTURE_FORK") == NULL ||
                                        strcmp(getenv("TORTURE_FORK"), "0"));
    jobs = getenv("TORTURE_JOBS") != NULL ? env_ulong("TORTURE_JOBS")
           : sw->jobs                     ? sw->jobs
                                          : 4;
    ss.max = jobs == 0 ? 1 : jobs > MAX_JOBS ? MAX_JOBS : (unsigned)jobs;
    T.name = sw->name;
    T.nsites = 0;
    crash_watch(1);

    /* Without a failure the scenario must succeed; it also tells how
     * many allocations a whole run makes. */
    {
        unsigned max = ss.max;

        ss.max = 1;
        sweep_runs(&ss, forked, 0, 0, just_once, NULL);
        ss.max = max;
    }
    if (ss.end_outcome != TORTURE_OK) {
        fprintf(stderr, "torture %s: fails with no failure injected\n",
                sw->name);
        crash_watch(0);
        s.wrong = 1;
        if (sum != NULL)
            *sum = s;
        return 1;
    }
    s.allocs = ss.end_calls;
    ss.stop = 0;
    ss.wrong = ss.shown = 0;
    /* A run may allocate a little more than a clean one (retries); a
     * sweep that never ends is a finding too. */
    limit = 4 * s.allocs + 1000;
    n = sweep_runs(&ss, forked, steps.only ? steps.only : 1,
                   steps.only ? steps.only : limit, next_n, &steps);
    if (!ss.stop && !steps.only) {
        ss.wrong++;
        fprintf(stderr,
                "torture %s: N=%lu still failed an allocation (a clean run "
                "makes %lu): the scenario does not end\n",
                sw->name, n, s.allocs);
    }
    crash_watch(0);

    if (steps.only)
        snprintf(how, sizeof(how), "only N=%lu", steps.only);
    else if (steps.every > 1)
        snprintf(how, sizeof(how), "N = 1, %lu, %lu... (every %lu)",
                 1 + steps.every, 1 + 2 * steps.every, steps.every);
    else if (s.allocs >= steps.dense)
        snprintf(how, sizeof(how), "every N up to %lu, then every %lu",
                 steps.dense, steps.stride);
    else
        snprintf(how, sizeof(how), "every N");
    s.runs = ss.runs;
    s.sites = T.nsites;
    s.wrong = ss.wrong;
    fprintf(stderr,
            "torture %s: %lu allocations in a clean run; %lu runs with "
            "a failed allocation (%s) at %zu call sites; %lu wrong\n",
            sw->name, s.allocs, s.runs, how, T.nsites, s.wrong);
    for (i = 0; i < T.nsites; i++) {
        char where[256];

        if (T.sites[i].wrong == 0)
            continue;
        symbolize(T.sites[i].caller, where, sizeof(where));
        fprintf(stderr,
                "torture %s: went wrong %lu time%s failing at %s "
                "(first N=%lu)\n",
                sw->name, T.sites[i].wrong, T.sites[i].wrong == 1 ? "" : "s",
                where, T.sites[i].first_n);
    }
    T.name = NULL;
    if (sum != NULL)
        *sum = s;
    return s.wrong;
}
