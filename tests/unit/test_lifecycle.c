/*
 * test_lifecycle — exhaustive tests of the pure lifecycle core.
 *
 * The lifecycle is pure, so nothing is mocked: every test drives real
 * records with observations and checks the actions that come back. There
 * are four layers, each catching what the one before cannot:
 *
 *   - a sweep: every state, reached by real observation sequences (several
 *     recipes per state), against every observation and payload variant,
 *     with invariants after each step and a table of expected next states;
 *   - a realistic random walk: a model engine and a model caller that
 *     tracks in-flight requests, timers and a shared slot pool exactly as
 *     the daemon must, so a record that leaks a slot or stalls is caught;
 *   - an adversarial walk that feeds anything at any time (stale results,
 *     timers never armed, non-monotonic clocks) to check robustness;
 *   - scenarios: exact action sequences and report fields for each rule.
 *
 * The "regressions" group holds tests for behaviour that once contradicted
 * the rules in lifecycle.h (see the comment on each), kept so it cannot
 * come back. A sweep-table cell marked 'x' would be a known bug skipped
 * while it is being fixed; none is marked now.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backoff.h"
#include "lifecycle.h"

/* ------------------------------------------------------------------ */
/* Parameters and observation builders                                 */

#define POLL   500
#define BASE   100
#define RMAX   3000
#define WARN   60000
#define GIVEUP 300000
#define DELAY  5000

static struct lc_params
mkparams(enum policy_action action, int64_t delay, int64_t warn,
         int64_t giveup)
{
    struct lc_params p;

    memset(&p, 0, sizeof(p));
    p.action = action;
    p.delay_ms = delay;
    p.poll_interval_ms = POLL;
    p.warn_after_ms = warn;
    p.give_up_after_ms = giveup;
    p.retry_base_ms = BASE;
    p.retry_max_ms = RMAX;
    return p;
}

static struct lc_obs
ob(enum lc_obs_kind kind)
{
    struct lc_obs o;

    memset(&o, 0, sizeof(o));
    o.kind = kind;
    return o;
}

static struct lc_obs
ob_die(int code)
{
    struct lc_obs o = ob(OBS_EVENT_DIE);

    o.has_exit_code = true;
    o.exit_code = code;
    return o;
}

/* An inspect answer as the engine gives it: an exit code always, and
 * FinishedAt set once the container has stopped. */
static struct lc_obs
ob_insp(enum lc_run run, int code)
{
    struct lc_obs o = ob(OBS_INSPECT);

    o.inspect.run = run;
    o.inspect.has_exit_code = true;
    o.inspect.exit_code = code;
    o.inspect.finished =
        run == LC_RUN_EXITED || run == LC_RUN_DEAD || run == LC_RUN_REMOVING;
    return o;
}

/* A relist entry: the state only, list answers carry no exit code. */
static struct lc_obs
ob_found(enum lc_run run)
{
    struct lc_obs o = ob(OBS_FOUND);

    o.inspect.run = run;
    return o;
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */

static const char *
act_name(int k)
{
    static const char *const names[] = {
        "INSPECT",   "DELETE",           "STEP_TIMER", "STEP_CANCEL",
        "DEADLINES", "DEADLINES_CANCEL", "WANT_SLOT",  "DROP_SLOT",
        "WARN",      "REPORT",           "FORGET",
    };
    if (k >= 0 && (size_t)k < sizeof(names) / sizeof(names[0]))
        return names[k];
    return "?";
}

static int
count_act(const struct lc_result *r, enum lc_act_kind k)
{
    size_t i;
    int n = 0;

    for (i = 0; i < r->nacts && i < LC_MAX_ACTIONS; i++)
        n += r->acts[i].kind == k;
    return n;
}

/* Index of the first action of kind k, or -1. */
static int
find_act(const struct lc_result *r, enum lc_act_kind k)
{
    size_t i;

    for (i = 0; i < r->nacts && i < LC_MAX_ACTIONS; i++)
        if (r->acts[i].kind == k)
            return (int)i;
    return -1;
}

static bool
cleanup_state(enum lc_state s)
{
    return s == LC_SETTLING || s == LC_DELAYING || s == LC_QUEUED ||
           s == LC_REMOVING || s == LC_CONFIRMING;
}

static bool
inspect_result(enum lc_obs_kind k)
{
    return k == OBS_INSPECT || k == OBS_INSPECT_GONE ||
           k == OBS_INSPECT_FAILED;
}

static bool
delete_result(enum lc_obs_kind k)
{
    return k == OBS_DELETE_DONE || k == OBS_DELETE_GONE ||
           k == OBS_DELETE_CONFLICT || k == OBS_DELETE_FAILED;
}

/* Where the walks and the sweep are, for the message of a failed check:
 * a random walk that only said "line 300" would be useless. Kept raw and
 * formatted only on failure, since the walks take hundreds of thousands
 * of steps. */
static struct {
    const char *what;
    enum lc_state state;
    bool has_obs;
    struct lc_obs obs;
    long stepno;
} wctx;
static char where[256]; /* free text, when wctx.what is NULL */

static void
set_where(const char *what, const struct lc *c, const struct lc_obs *o,
          long stepno)
{
    wctx.what = what;
    wctx.state = c->state;
    wctx.has_obs = o != NULL;
    if (o)
        wctx.obs = *o;
    wctx.stepno = stepno;
}

static void
set_where_text(void)
{
    wctx.what = NULL;
}

static void
print_where(void)
{
    const struct lc_obs *o = &wctx.obs;

    if (!wctx.what) {
        print_error("  at %s\n", where);
        return;
    }
    if (!wctx.has_obs) {
        print_error("  at %s step %ld: state %s, lc_start_exited\n", wctx.what,
                    wctx.stepno, lc_state_name(wctx.state));
        return;
    }
    print_error("  at %s step %ld: state %s, obs %s (die code %s%d, "
                "run %d, code %s%d, finished %d, rnd %u, now %llu)\n",
                wctx.what, wctx.stepno, lc_state_name(wctx.state),
                lc_obs_name(o->kind), o->has_exit_code ? "" : "none/",
                o->exit_code, (int)o->inspect.run,
                o->inspect.has_exit_code ? "" : "none/", o->inspect.exit_code,
                (int)o->inspect.finished, (unsigned)o->rnd,
                (unsigned long long)o->now_ms);
}

static void
print_acts(const struct lc_result *r)
{
    size_t i;

    print_error("  actions (%zu):", r->nacts);
    for (i = 0; i < r->nacts && i < LC_MAX_ACTIONS; i++)
        print_error(" %s(%llu,%llu)", act_name((int)r->acts[i].kind),
                    (unsigned long long)r->acts[i].ms,
                    (unsigned long long)r->acts[i].ms2);
    print_error("  -> %s\n", lc_state_name(r->to));
}

static const struct lc_result *check_res;
/* Prints more context when a check fails (a walk's recent history). */
static void (*check_dump)(void);

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            print_error("invariant failed: %s\n", #cond);                     \
            print_where();                                                    \
            if (check_res)                                                    \
                print_acts(check_res);                                        \
            if (check_dump)                                                   \
                check_dump();                                                 \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* ------------------------------------------------------------------ */
/* The invariants, checked after every single step everywhere          */

/* What a report (made from the record right after the step) must say. */
static void
check_report(const struct lc *a, const struct lc_result *r)
{
    int rep = find_act(r, ACT_REPORT), forget = find_act(r, ACT_FORGET);

    CHECK(forget < 0 || rep < forget);
    CHECK(a->state == LC_KEPT || a->state == LC_ABANDONED ||
          a->state == LC_DONE);
    /* Confirmed removal is the join, nothing less. */
    CHECK(!a->removed || (a->destroy_seen && a->gone_polled));
    /* A remove policy reports "not removed" only when it gave up. */
    CHECK(a->p.action != POLICY_REMOVE || a->removed ||
          (a->anomalies & LC_AN_GAVE_UP));
    /* Given up: parked until its destroy, or done if that came already. */
    CHECK(!(a->anomalies & LC_AN_GAVE_UP) || a->state == LC_ABANDONED ||
          (a->state == LC_DONE && a->destroy_seen));
    CHECK(a->state != LC_KEPT || (a->p.action == POLICY_KEEP && !a->removed));
    CHECK(a->exit_known == (a->source != LC_SRC_NONE));
    /* A die code that disagrees with the true code is always flagged. */
    CHECK(!(a->exit_known && a->die_has_code && a->die_code != a->exit_code) ||
          (a->anomalies & LC_AN_EXIT_CODE_MISMATCH));
}

/* The step timer's delay, by what armed it. */
static void
check_timer(const struct lc *b, const struct lc_obs *o, const struct lc *a,
            uint64_t ms)
{
    const struct lc_params *p = &a->p;
    enum lc_obs_kind k = o ? o->kind : OBS_NKINDS;

    if (k == OBS_INSPECT_FAILED) {
        /* A retry: exactly the backoff for this many failures. */
        CHECK(a->inspect_failures == b->inspect_failures + 1);
        CHECK(ms == backoff_delay_ms(a->inspect_failures,
                                     (uint64_t)p->retry_base_ms,
                                     (uint64_t)p->retry_max_ms, o->rnd));
        CHECK(ms >= (uint64_t)p->retry_base_ms / 2);
        CHECK(ms <= (uint64_t)p->retry_max_ms);
    } else if (k == OBS_DELETE_FAILED ||
               (k == OBS_INSPECT && a->state == LC_REMOVING)) {
        CHECK(a->delete_failures == b->delete_failures + 1);
        CHECK(ms == backoff_delay_ms(a->delete_failures,
                                     (uint64_t)p->retry_base_ms,
                                     (uint64_t)p->retry_max_ms, o->rnd));
        CHECK(ms >= (uint64_t)p->retry_base_ms / 2);
        CHECK(ms <= (uint64_t)p->retry_max_ms);
    } else if (a->state == LC_DELAYING && b->state != LC_DELAYING) {
        CHECK(ms == (uint64_t)p->delay_ms);
    } else {
        /* Everything else is a confirmation poll. */
        CHECK(ms >= (uint64_t)p->poll_interval_ms);
    }
}

/*
 * b: the record before the step, o: the observation (NULL for
 * lc_start_exited), r: the result, a: the record after.
 */
static void
check_step(const struct lc *b, const struct lc_obs *o,
           const struct lc_result *r, const struct lc *a)
{
    int nrep, nforget, ninsp, ndel, ntimer;
    size_t i;
    bool insp_res = o && inspect_result(o->kind);
    bool del_res = o && delete_result(o->kind);

    check_res = r;
    CHECK(r->nacts <= LC_MAX_ACTIONS);
    CHECK(r->from == b->state);
    CHECK(r->to == a->state);
    CHECK((unsigned)a->state < LC_NSTATES);
    CHECK(!a->has_slot || a->state == LC_REMOVING ||
          a->state == LC_CONFIRMING);
    /* DELETE is only ever retried from REMOVING, which needs a slot. */
    CHECK(a->state != LC_REMOVING || a->has_slot);
    for (i = 0; i < r->nacts; i++)
        CHECK((unsigned)r->acts[i].kind <= ACT_FORGET);

    /* DONE is absorbing and silent but for handing back a late slot. */
    if (b->state == LC_DONE) {
        CHECK(a->state == LC_DONE);
        if (o && o->kind == OBS_SLOT)
            CHECK(r->nacts == 1 && r->acts[0].kind == ACT_DROP_SLOT);
        else
            CHECK(r->nacts == 0);
        check_res = NULL;
        return;
    }

    /* DONE only through exactly one FORGET, the last action. */
    nforget = count_act(r, ACT_FORGET);
    CHECK(nforget <= 1);
    CHECK((a->state == LC_DONE) == (nforget == 1));
    CHECK(nforget == 0 || r->acts[r->nacts - 1].kind == ACT_FORGET);

    nrep = count_act(r, ACT_REPORT);
    CHECK(nrep <= 1);
    if (nrep)
        check_report(a, r);
    /* A forgotten exit is reported on the way out, unless it was already
     * (KEPT, ABANDONED) or nothing ever ran. */
    if (nforget && cleanup_state(b->state))
        CHECK(nrep == (a->exited || a->ran ? 1 : 0));
    if (nforget && !cleanup_state(b->state))
        CHECK(nrep == 0);
    if (b->state == LC_RUNNING && a->state == LC_DONE)
        CHECK(!b->ran);
    /* Reports only on the way into a reported state. */
    if (a->state == LC_ABANDONED && b->state != LC_ABANDONED)
        CHECK(nrep == 1 && (a->anomalies & LC_AN_GAVE_UP) && !a->removed);
    if (a->state == LC_KEPT && b->state != LC_KEPT)
        CHECK(nrep == 1);
    if (nrep)
        CHECK(a->state != b->state);
    CHECK(!a->removed || a->state == LC_DONE);

    /* The in-flight flags mirror the caller's requests: set by sending,
     * cleared only by a result. */
    ninsp = count_act(r, ACT_INSPECT);
    CHECK(ninsp <= 1);
    if (ninsp) {
        CHECK(!b->inspect_inflight || insp_res);
        CHECK(a->inspect_inflight);
    } else {
        CHECK(a->inspect_inflight == (b->inspect_inflight && !insp_res));
    }
    ndel = count_act(r, ACT_DELETE);
    CHECK(ndel <= 1);
    if (ndel) {
        CHECK(!b->delete_inflight || del_res);
        CHECK(a->delete_inflight);
        CHECK(a->has_slot);
        CHECK(a->state == LC_REMOVING);
    } else {
        CHECK(a->delete_inflight == (b->delete_inflight && !del_res));
    }

    ntimer = count_act(r, ACT_STEP_TIMER);
    CHECK(ntimer <= 1);
    for (i = 0; i < r->nacts; i++) {
        const struct lc_act *x = &r->acts[i];

        switch (x->kind) {
        case ACT_STEP_TIMER:
            CHECK(cleanup_state(a->state));
            check_timer(b, o, a, x->ms);
            break;
        case ACT_DEADLINES:
            CHECK(x->ms == (uint64_t)a->p.warn_after_ms);
            CHECK(x->ms2 == (uint64_t)a->p.give_up_after_ms);
            CHECK(a->exited);
            CHECK(!cleanup_state(b->state) || !o);
            CHECK(cleanup_state(a->state) || a->state == LC_DONE);
            break;
        case ACT_WARN:
            CHECK(o && o->kind == OBS_TIMER_WARN);
            CHECK(a->anomalies & LC_AN_CLEANUP_SLOW);
            break;
        case ACT_WANT_SLOT:
            CHECK(a->state == LC_QUEUED && b->state != LC_QUEUED);
            CHECK(!a->has_slot);
            break;
        case ACT_DROP_SLOT:
            /* Never a release of something never held or asked for. */
            CHECK(b->has_slot || b->state == LC_QUEUED ||
                  (o && o->kind == OBS_SLOT));
            break;
        default:
            break;
        }
    }
    /* An exit that starts arms its deadlines. */
    if (!cleanup_state(b->state) && cleanup_state(a->state) && a->exited)
        CHECK(find_act(r, ACT_DEADLINES) >= 0);
    /* Leaving cleanup disarms everything it may have armed. */
    if (cleanup_state(b->state) && !cleanup_state(a->state)) {
        CHECK(find_act(r, ACT_STEP_CANCEL) >= 0);
        CHECK(find_act(r, ACT_DEADLINES_CANCEL) >= 0);
    }
    if (b->has_slot && !a->has_slot)
        CHECK(find_act(r, ACT_DROP_SLOT) >= 0);
    if (b->state == LC_QUEUED && a->state != LC_QUEUED &&
        a->state != LC_REMOVING)
        CHECK(find_act(r, ACT_DROP_SLOT) >= 0);
    if (a->state == LC_QUEUED && b->state != LC_QUEUED)
        CHECK(find_act(r, ACT_WANT_SLOT) >= 0);

    /* Per-exit counters only move forward, except when a new run or a new
     * exit starts from scratch. */
    if (!(a->state == LC_RUNNING && b->state != LC_RUNNING) &&
        !((b->state == LC_KEPT || b->state == LC_ABANDONED) &&
          a->state == LC_SETTLING)) {
        CHECK(a->delete_attempts == b->delete_attempts + (unsigned)ndel);
        CHECK((a->anomalies & b->anomalies) == b->anomalies);
    }
    check_res = NULL;
}

/* ------------------------------------------------------------------ */
/* Scenario harness: exact actions, exact report fields               */

struct sc {
    struct lc c;
    struct lc_result r;
    uint64_t now;
    uint32_t rnd;
    int reports;
    long n;
};

static void
sc_init(struct sc *s, const struct lc_params *p)
{
    memset(s, 0, sizeof(*s));
    lc_init(&s->c, p);
    s->now = 1000;
}

static void
sc_start_exited(struct sc *s, const struct lc_params *p)
{
    struct lc before;

    sc_init(s, p);
    before = s->c;
    set_where("scenario", &s->c, NULL, s->n++);
    lc_start_exited(&s->c, s->now, &s->r);
    check_step(&before, NULL, &s->r, &s->c);
    s->reports += count_act(&s->r, ACT_REPORT);
}

static const struct lc_result *
sc_step(struct sc *s, struct lc_obs o)
{
    struct lc before = s->c;

    o.now_ms = s->now;
    o.rnd = s->rnd;
    set_where("scenario", &s->c, &o, s->n++);
    lc_step(&s->c, &o, &s->r);
    check_step(&before, &o, &s->r, &s->c);
    s->reports += count_act(&s->r, ACT_REPORT);
    return &s->r;
}

#define NOACT (-1)

/*
 * The actions must be exactly `want` (terminated by NOACT), in order. A
 * cancel that repeats the action right before it is skipped: cancels are
 * idempotent for the caller, so a duplicate is not part of the contract.
 */
static void
assert_acts_(const struct lc_result *r, const int *want, const char *file,
             int line)
{
    size_t i, n = 0;
    int got[LC_MAX_ACTIONS];
    bool ok = true;

    for (i = 0; i < r->nacts; i++) {
        int k = (int)r->acts[i].kind;

        if (n > 0 && got[n - 1] == k &&
            (k == ACT_STEP_CANCEL || k == ACT_DEADLINES_CANCEL))
            continue;
        got[n++] = k;
    }
    for (i = 0; i < n; i++)
        if (want[i] == NOACT || want[i] != got[i])
            ok = false;
    if (want[n] != NOACT)
        ok = false;
    if (!ok) {
        print_error("%s:%d: unexpected actions\n  want:", file, line);
        for (i = 0; want[i] != NOACT; i++)
            print_error(" %s", act_name(want[i]));
        print_error("\n  got: ");
        for (i = 0; i < n; i++)
            print_error(" %s", act_name(got[i]));
        print_error("\n");
        _fail(file, line);
    }
}

#define ACTS(r, ...)                                                          \
    assert_acts_((r), (const int[]){__VA_ARGS__, NOACT}, __FILE__, __LINE__)

/* One step: the state it must end in and the exact actions. */
#define STEP(s, o, to, ...)                                                   \
    do {                                                                      \
        sc_step((s), (o));                                                    \
        if ((s)->c.state != (to)) {                                           \
            print_error("state %s, want %s\n", lc_state_name((s)->c.state),   \
                        lc_state_name(to));                                   \
            print_acts(&(s)->r);                                              \
        }                                                                     \
        assert_int_equal((s)->c.state, (to));                                 \
        ACTS(&(s)->r, __VA_ARGS__);                                           \
    } while (0)

/* The ms of the only action of kind k. */
static uint64_t
act_ms(const struct lc_result *r, enum lc_act_kind k)
{
    int i = find_act(r, k);

    assert_true(i >= 0);
    assert_int_equal(count_act(r, k), 1);
    return r->acts[i].ms;
}

struct want_report {
    bool exit_known;
    int exit_code;
    enum lc_source source;
    bool die_has_code;
    int die_code;
    uint32_t anomalies;
    bool removed;
    bool removed_by_us;
    unsigned delete_attempts;
    uint64_t cleanup_ms;
};

/* The record's report fields, right after the step that reported. */
static void
assert_report_(const struct sc *s, const struct want_report *w,
               const char *file, int line)
{
    const struct lc *c = &s->c;

    if (count_act(&s->r, ACT_REPORT) != 1) {
        print_error("%s:%d: no report in this step\n", file, line);
        print_acts(&s->r);
        _fail(file, line);
    }
    assert_int_equal(c->exit_known, w->exit_known);
    if (w->exit_known)
        assert_int_equal(c->exit_code, w->exit_code);
    assert_int_equal(c->source, w->source);
    assert_int_equal(c->die_has_code, w->die_has_code);
    if (w->die_has_code)
        assert_int_equal(c->die_code, w->die_code);
    if (c->anomalies != w->anomalies)
        print_error("%s:%d: anomalies %#x, want %#x\n", file, line,
                    (unsigned)c->anomalies, (unsigned)w->anomalies);
    assert_int_equal(c->anomalies, w->anomalies);
    assert_int_equal(c->removed, w->removed);
    assert_int_equal(c->removed_by_us, w->removed_by_us);
    assert_int_equal(c->delete_attempts, w->delete_attempts);
    assert_int_equal(c->cleanup_ms, w->cleanup_ms);
}

#define REPORT(s, ...)                                                        \
    assert_report_((s), &(const struct want_report){__VA_ARGS__}, __FILE__,   \
                   __LINE__)

/* ------------------------------------------------------------------ */
/* 1. The sweep: every state x every observation                       */

#define END_STEP                                                              \
    {                                                                         \
        .kind = OBS_NKINDS                                                    \
    }
#define S_START                                                               \
    {                                                                         \
        .kind = OBS_EVENT_START                                               \
    }
#define S_DIE(c)                                                              \
    {                                                                         \
        .kind = OBS_EVENT_DIE, .has_exit_code = true, .exit_code = c          \
    }
#define S_DIE_NOCODE                                                          \
    {                                                                         \
        .kind = OBS_EVENT_DIE                                                 \
    }
#define S_DESTROY                                                             \
    {                                                                         \
        .kind = OBS_EVENT_DESTROY                                             \
    }
#define S_ABSENT                                                              \
    {                                                                         \
        .kind = OBS_ABSENT                                                    \
    }
#define S_FOUND(r)                                                            \
    {                                                                         \
        .kind = OBS_FOUND, .inspect = {.run = r }                             \
    }
#define S_INSP(r, c)                                                          \
    {                                                                         \
        .kind = OBS_INSPECT, .inspect = {                                     \
            .run = r,                                                         \
            .has_exit_code = true,                                            \
            .exit_code = c,                                                   \
            .finished = true                                                  \
        }                                                                     \
    }
#define S_GONE                                                                \
    {                                                                         \
        .kind = OBS_INSPECT_GONE                                              \
    }
#define S_IFAIL                                                               \
    {                                                                         \
        .kind = OBS_INSPECT_FAILED                                            \
    }
#define S_SLOT                                                                \
    {                                                                         \
        .kind = OBS_SLOT                                                      \
    }
#define S_TSTEP                                                               \
    {                                                                         \
        .kind = OBS_TIMER_STEP                                                \
    }
#define S_DDONE                                                               \
    {                                                                         \
        .kind = OBS_DELETE_DONE                                               \
    }
#define S_DFAIL                                                               \
    {                                                                         \
        .kind = OBS_DELETE_FAILED                                             \
    }
#define S_DCONFL                                                              \
    {                                                                         \
        .kind = OBS_DELETE_CONFLICT                                           \
    }
#define S_GIVEUP                                                              \
    {                                                                         \
        .kind = OBS_TIMER_GIVEUP                                              \
    }

enum {
    PR_REMOVE,       /* remove, no delay, warn, no give-up */
    PR_REMOVE_DELAY, /* remove after DELAY */
    PR_KEEP,
    PR_REMOVE_GIVEUP, /* remove, warn, give up */
    PR_N
};

static struct lc_params
recipe_params(int which)
{
    switch (which) {
    case PR_REMOVE_DELAY:
        return mkparams(POLICY_REMOVE, DELAY, WARN, 0);
    case PR_KEEP:
        return mkparams(POLICY_KEEP, 0, WARN, GIVEUP);
    case PR_REMOVE_GIVEUP:
        return mkparams(POLICY_REMOVE, 0, WARN, GIVEUP);
    default:
        return mkparams(POLICY_REMOVE, 0, WARN, 0);
    }
}

/* A real way into a state: observations from lc_init (or from
 * lc_start_exited), each checked as it is applied. */
struct recipe {
    const char *name;
    enum lc_state want;
    int params;
    bool start_exited;
    struct lc_obs steps[14];
};

/* The first recipe of each state is its canonical one (used by the
 * expected-transition table). */
static const struct recipe recipes[] = {
    {"running: started", LC_RUNNING, PR_REMOVE, false, {S_START, END_STEP}},
    {"running: never started", LC_RUNNING, PR_REMOVE, false, {END_STEP}},
    {"running: created (relist)",
     LC_RUNNING,
     PR_REMOVE,
     false,
     {S_FOUND(LC_RUN_CREATED), END_STEP}},
    {"running: restarted after inspect said restarting",
     LC_RUNNING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(1), S_INSP(LC_RUN_RESTARTING, 0), END_STEP}},
    {"running: restarted with DELETE still in flight",
     LC_RUNNING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(1), S_INSP(LC_RUN_EXITED, 1), S_SLOT, S_START, END_STEP}},
    {"running: kept then started",
     LC_RUNNING,
     PR_KEEP,
     false,
     {S_START, S_DIE(1), S_INSP(LC_RUN_EXITED, 1), S_START, END_STEP}},

    {"settling: die, inspect in flight",
     LC_SETTLING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), END_STEP}},
    {"settling: inspect failed, retry armed",
     LC_SETTLING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_IFAIL, END_STEP}},
    {"settling: first seen exited", LC_SETTLING, PR_REMOVE, true, {END_STEP}},
    {"settling: destroy seen first",
     LC_SETTLING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_DESTROY, END_STEP}},
    {"settling: relist found exited",
     LC_SETTLING,
     PR_REMOVE,
     false,
     {S_START, S_FOUND(LC_RUN_EXITED), END_STEP}},
    {"settling: die without code",
     LC_SETTLING,
     PR_REMOVE,
     false,
     {S_START, S_DIE_NOCODE, END_STEP}},
    {"settling: keep policy",
     LC_SETTLING,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), END_STEP}},
    {"settling: die again after kept",
     LC_SETTLING,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_DIE(4), END_STEP}},

    {"delaying: settled",
     LC_DELAYING,
     PR_REMOVE_DELAY,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), END_STEP}},
    {"delaying: duplicate die",
     LC_DELAYING,
     PR_REMOVE_DELAY,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_DIE(255), END_STEP}},

    {"queued: settled",
     LC_QUEUED,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), END_STEP}},
    {"queued: after the delay",
     LC_QUEUED,
     PR_REMOVE_DELAY,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_TSTEP, END_STEP}},
    {"queued: still present after a destroy (stale)",
     LC_QUEUED,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_DESTROY,
      S_INSP(LC_RUN_EXITED, 3), END_STEP}},
    {"queued: with give-up",
     LC_QUEUED,
     PR_REMOVE_GIVEUP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), END_STEP}},

    {"removing: DELETE in flight",
     LC_REMOVING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, END_STEP}},
    {"removing: DELETE failed, retry armed",
     LC_REMOVING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DFAIL, END_STEP}},
    {"removing: conflict, then still exited",
     LC_REMOVING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DCONFL, S_TSTEP,
      S_INSP(LC_RUN_EXITED, 3), END_STEP}},
    {"removing: destroy while DELETE in flight",
     LC_REMOVING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DESTROY,
      END_STEP}},
    {"removing: 404 while DELETE in flight",
     LC_REMOVING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_GONE, END_STEP}},

    {"confirming: DELETE accepted, inspect in flight",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DDONE, END_STEP}},
    {"confirming: conflict, polling",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DCONFL,
      END_STEP}},
    {"confirming: 404 polled, waiting for destroy",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DDONE, S_GONE,
      END_STEP}},
    {"confirming: destroy seen, waiting for 404",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DDONE, S_DESTROY,
      END_STEP}},
    {"confirming: destroyed while running (die missed)",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DESTROY, END_STEP}},
    {"confirming: engine is removing it",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_REMOVING, 3), END_STEP}},
    {"confirming: removed by someone else while queued",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_DESTROY, END_STEP}},
    {"confirming: never started, inspect 404",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_GONE, END_STEP}},
    {"confirming: keep policy, engine removing it",
     LC_CONFIRMING,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_REMOVING, 3), END_STEP}},
    {"confirming: inspect failing",
     LC_CONFIRMING,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DDONE, S_IFAIL,
      S_TSTEP, S_IFAIL, END_STEP}},

    {"kept: settled",
     LC_KEPT,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), END_STEP}},
    {"kept: second run",
     LC_KEPT,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_START, S_DIE(4),
      S_INSP(LC_RUN_EXITED, 4), END_STEP}},

    {"abandoned: gave up settling",
     LC_ABANDONED,
     PR_REMOVE_GIVEUP,
     false,
     {S_START, S_DIE(3), S_GIVEUP, END_STEP}},
    {"abandoned: gave up with DELETE in flight",
     LC_ABANDONED,
     PR_REMOVE_GIVEUP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_GIVEUP,
      END_STEP}},
    {"abandoned: gave up confirming",
     LC_ABANDONED,
     PR_REMOVE_GIVEUP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DCONFL, S_GIVEUP,
      END_STEP}},
    {"abandoned: keep policy, gave up",
     LC_ABANDONED,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_GIVEUP, END_STEP}},

    {"done: removed and confirmed",
     LC_DONE,
     PR_REMOVE,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_SLOT, S_DDONE, S_DESTROY,
      S_GONE, END_STEP}},
    {"done: never started", LC_DONE, PR_REMOVE, false, {S_DESTROY, END_STEP}},
    {"done: kept then destroyed",
     LC_DONE,
     PR_KEEP,
     false,
     {S_START, S_DIE(3), S_INSP(LC_RUN_EXITED, 3), S_DESTROY, END_STEP}},
    {"done: abandoned then absent",
     LC_DONE,
     PR_REMOVE_GIVEUP,
     false,
     {S_START, S_DIE(3), S_GIVEUP, S_ABSENT, END_STEP}},
};

#define NRECIPES (sizeof(recipes) / sizeof(recipes[0]))

/* Builds the record of a recipe; every step is checked. */
static void
run_recipe(const struct recipe *rc, struct lc *c)
{
    struct lc_params p = recipe_params(rc->params);
    struct lc_result r;
    struct lc before;
    size_t i;

    lc_init(c, &p);
    if (rc->start_exited) {
        before = *c;
        set_where(rc->name, c, NULL, 0);
        lc_start_exited(c, 1000, &r);
        check_step(&before, NULL, &r, c);
    }
    for (i = 0; rc->steps[i].kind != OBS_NKINDS; i++) {
        struct lc_obs o = rc->steps[i];

        o.now_ms = 1000 * (i + 2);
        o.rnd = (uint32_t)i * 2654435761u;
        before = *c;
        set_where(rc->name, c, &o, (long)i);
        lc_step(c, &o, &r);
        check_step(&before, &o, &r, c);
    }
    if (c->state != rc->want)
        print_error("recipe \"%s\" ends in %s\n", rc->name,
                    lc_state_name(c->state));
    assert_int_equal(c->state, rc->want);
}

/* The observation variants of the sweep, in the table's column order. */
#define NVARIANTS 29

static struct lc_obs
variant(int v)
{
    static const enum lc_run runs[] = {
        LC_RUN_CREATED,  LC_RUN_RUNNING, LC_RUN_PAUSED, LC_RUN_RESTARTING,
        LC_RUN_REMOVING, LC_RUN_EXITED,  LC_RUN_DEAD,
    };
    static const enum lc_obs_kind tail[] = {
        OBS_INSPECT_GONE, OBS_INSPECT_FAILED,  OBS_DELETE_DONE,
        OBS_DELETE_GONE,  OBS_DELETE_CONFLICT, OBS_DELETE_FAILED,
        OBS_SLOT,         OBS_TIMER_STEP,      OBS_TIMER_WARN,
        OBS_TIMER_GIVEUP,
    };
    struct lc_obs o;

    if (v == 0)
        return ob(OBS_EVENT_START);
    if (v == 1)
        return ob_die(3);
    if (v == 2)
        return ob(OBS_EVENT_DIE);
    if (v == 3)
        return ob(OBS_EVENT_DESTROY);
    if (v >= 4 && v <= 10)
        return ob_found(runs[v - 4]);
    if (v == 11)
        return ob(OBS_ABSENT);
    if (v >= 12 && v <= 18) {
        o = ob_insp(runs[v - 12], 3);
        return o;
    }
    return ob(tail[v - 19]);
}

/*
 * Expected next state of each canonical recipe for each variant:
 * R running, S settling, L delaying, Q queued, M removing, C confirming,
 * K kept, A abandoned, D done. Columns: start, die(3), die(-), destroy,
 * found(created running paused restarting removing exited dead), absent,
 * inspect(same seven), gone, ifail, del(done gone conflict failed), slot,
 * step, warn, giveup.
 *
 * The marks row can flag cells that are known bugs ('x'): the table holds
 * the correct state; a regression test must then fail for each. A '?'
 * is a cell where either answer is acceptable (a relist that lists an
 * exited container as "created" cannot happen), left unchecked.
 */
static const struct {
    enum lc_state state;
    const char *next;
    const char *marks;
} table[] = {
    {LC_RUNNING, "RSSCRRRRSSSCRRRRSSSCRRRRRRRRR", NULL},
    {LC_SETTLING, "RSSSSSSSSSSSRRRRCQQCSSSSSSSSA", NULL},
    /* A relist that lists it running again stands in for a missed start
     * event, as a relist that does not list it stands in for a missed
     * destroy. */
    {LC_DELAYING, "RLLCLRRRLLLCRRRRLLLCLLLLLLQLA",
     "....?........................"},
    {LC_QUEUED, "RQQCQRRRQQQCRRRRQQQCQQQQQMQQA",
     "....?........................"},
    {LC_REMOVING, "RMMMMMMMMMMMMMMMMMMMMCCCMMMMA", NULL},
    {LC_CONFIRMING, "RCCCCCCCCCCCRRRRCMMCCCCCCCCCA", NULL},
    {LC_KEPT, "RSSDKRRRKKKDKKKKKKKKKKKKKKKKK", NULL},
    {LC_ABANDONED, "RSSDARRRAAADAAAAAAAAAAAAAAAAA", NULL},
    {LC_DONE, "DDDDDDDDDDDDDDDDDDDDDDDDDDDDD", NULL},
};

static enum lc_state
state_of_letter(char ch)
{
    switch (ch) {
    case 'R':
        return LC_RUNNING;
    case 'S':
        return LC_SETTLING;
    case 'L':
        return LC_DELAYING;
    case 'Q':
        return LC_QUEUED;
    case 'M':
        return LC_REMOVING;
    case 'C':
        return LC_CONFIRMING;
    case 'K':
        return LC_KEPT;
    case 'A':
        return LC_ABANDONED;
    case 'D':
        return LC_DONE;
    default:
        return LC_NSTATES;
    }
}

/* Every recipe reaches its state, and together they reach all states. */
static void
test_sweep_recipes_reach_every_state(void **state)
{
    bool seen[LC_NSTATES] = {false};
    struct lc c;
    size_t i;

    (void)state;
    for (i = 0; i < NRECIPES; i++) {
        run_recipe(&recipes[i], &c);
        seen[c.state] = true;
    }
    for (i = 0; i < LC_NSTATES; i++) {
        if (!seen[i])
            print_error("no recipe reaches %s\n",
                        lc_state_name((enum lc_state)i));
        assert_true(seen[i]);
    }
}

/* Every recipe x every variant x a few random numbers and clocks: the
 * invariants hold and each variant can be applied again after it. */
static void
test_sweep_all_observations(void **state)
{
    static const uint32_t rnds[] = {0, 1, 77777, UINT32_MAX};
    static const uint64_t clocks[] = {0, 500, 100000, UINT64_MAX / 2};
    size_t i;
    int v, w;
    unsigned k;

    (void)state;
    for (i = 0; i < NRECIPES; i++) {
        struct lc base;

        run_recipe(&recipes[i], &base);
        for (v = 0; v < NVARIANTS; v++) {
            for (k = 0; k < 4; k++) {
                struct lc c = base, before;
                struct lc_result r;
                struct lc_obs o = variant(v);

                o.rnd = rnds[k];
                o.now_ms = clocks[k];
                before = c;
                set_where(recipes[i].name, &c, &o, v);
                lc_step(&c, &o, &r);
                check_step(&before, &o, &r, &c);
                /* And every second observation after it (for one of
                 * the random numbers: enough, and keeps valgrind fast). */
                for (w = 0; k == 0 && w < NVARIANTS; w++) {
                    struct lc c2 = c, before2 = c;
                    struct lc_obs o2 = variant(w);

                    o2.rnd = rnds[(k + 1) % 4];
                    o2.now_ms = clocks[k] + 1000;
                    set_where(recipes[i].name, &c2, &o2, 100 + w);
                    lc_step(&c2, &o2, &r);
                    check_step(&before2, &o2, &r, &c2);
                }
            }
        }
    }
}

/* The canonical recipe of each state against the table of next states. */
static void
test_sweep_transition_table(void **state)
{
    size_t t, i;
    int v, bad = 0;

    (void)state;
    for (t = 0; t < sizeof(table) / sizeof(table[0]); t++) {
        const struct recipe *rc = NULL;
        struct lc base;

        for (i = 0; i < NRECIPES && !rc; i++)
            if (recipes[i].want == table[t].state)
                rc = &recipes[i];
        assert_non_null(rc);
        assert_int_equal(strlen(table[t].next), NVARIANTS);
        run_recipe(rc, &base);
        for (v = 0; v < NVARIANTS; v++) {
            struct lc c = base;
            struct lc_result r;
            struct lc_obs o = variant(v);
            enum lc_state want = state_of_letter(table[t].next[v]);

            o.now_ms = 99000;
            lc_step(&c, &o, &r);
            if (table[t].marks && table[t].marks[v] == '?')
                continue;
            if (table[t].marks && table[t].marks[v] == 'x') {
                /* A known bug (see the regressions group): skipped, but
                 * say so once it is fixed, so the mark goes. */
                if (c.state == want)
                    print_message("%s + %s (variant %d) is fixed: drop "
                                  "its 'x' mark\n",
                                  lc_state_name(table[t].state),
                                  lc_obs_name(o.kind), v);
                continue;
            }
            if (c.state != want) {
                print_error("%s + %s (variant %d): %s, want %s\n",
                            lc_state_name(table[t].state), lc_obs_name(o.kind),
                            v, lc_state_name(c.state), lc_state_name(want));
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------------ */
/* 2. Random walks                                                     */

/* xorshift64*: the walks' own generator, so they do not depend on the
 * generator under test in test_backoff. */
static uint64_t
rng_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static unsigned
rng_below(uint64_t *s, unsigned n)
{
    return (unsigned)((rng_next(s) >> 33) % n);
}

static bool
rng_chance(uint64_t *s, unsigned percent)
{
    return rng_below(s, 100) < percent;
}

/* The engine's view of one container. */
enum eng_state {
    E_CREATED,
    E_RUNNING,
    E_EXITED,
    E_RESTARTING,
    E_REMOVING,
    E_GONE,
};

enum slot_state { SLOT_NONE, SLOT_QUEUED, SLOT_HELD };

#define EVQ 8

/* One tracked container: the engine's truth, the caller's bookkeeping,
 * and the record. */
struct rec {
    struct lc c;
    bool live; /* tracked (not yet forgotten) */

    enum eng_state eng;
    int code; /* the true code of the last exit */
    struct lc_obs evq[EVQ];
    int nev;

    bool inspecting, deleting;
    struct lc_inspect snap; /* the engine as of the inspect's sending */
    bool snap_gone;
    bool step_armed, warn_armed, giveup_armed;
    enum slot_state slot;
    uint64_t qseq;

    int reports_this_exit;
    int die_codes[8]; /* die codes delivered during this exit */
    int ndie;

    /* The last steps, for the message of a failed check. */
    struct {
        enum lc_state from;
        struct lc_obs o;
        enum eng_state eng;
        struct lc_result r;
    } hist[16];
    unsigned nhist;
};

#define NREC     12
#define MAXSLOTS 2

struct walk {
    uint64_t seed;
    uint64_t now;
    long n;
    struct rec recs[NREC];
    int held;
    uint64_t qseq;

    /* Coverage, to prove the walk went everywhere. */
    long visits[LC_NSTATES];
    long reports, forgets, removed_reports, kept_reports, gaveup_reports;
    uint32_t anomalies_seen;
};

static void
queue_event(struct rec *x, struct lc_obs o)
{
    if (x->nev < EVQ)
        x->evq[x->nev++] = o;
}

static enum lc_run
eng_run(enum eng_state e)
{
    switch (e) {
    case E_CREATED:
        return LC_RUN_CREATED;
    case E_RUNNING:
        return LC_RUN_RUNNING;
    case E_RESTARTING:
        return LC_RUN_RESTARTING;
    case E_REMOVING:
        return LC_RUN_REMOVING;
    default:
        return LC_RUN_EXITED;
    }
}

static struct lc_inspect
eng_inspect(const struct rec *x)
{
    struct lc_inspect in;

    memset(&in, 0, sizeof(in));
    in.run = eng_run(x->eng);
    in.has_exit_code = true;
    in.exit_code = x->eng == E_EXITED || x->eng == E_REMOVING ? x->code : 0;
    in.finished = x->eng == E_EXITED || x->eng == E_REMOVING;
    return in;
}

/* The caller carries out what the record asked for, checking that each
 * request makes sense against what it already has outstanding. */
static void
carry_out(struct walk *w, struct rec *x, const struct lc_result *r)
{
    size_t i;

    check_res = r;
    for (i = 0; i < r->nacts; i++) {
        const struct lc_act *a = &r->acts[i];

        switch (a->kind) {
        case ACT_INSPECT:
            CHECK(!x->inspecting);
            x->inspecting = true;
            x->snap = eng_inspect(x);
            x->snap_gone = x->eng == E_GONE;
            break;
        case ACT_DELETE:
            CHECK(!x->deleting);
            CHECK(x->slot == SLOT_HELD);
            x->deleting = true;
            break;
        case ACT_STEP_TIMER:
            x->step_armed = true;
            break;
        case ACT_STEP_CANCEL:
            x->step_armed = false;
            break;
        case ACT_DEADLINES:
            x->warn_armed = a->ms > 0;
            x->giveup_armed = a->ms2 > 0;
            break;
        case ACT_DEADLINES_CANCEL:
            x->warn_armed = x->giveup_armed = false;
            break;
        case ACT_WANT_SLOT:
            CHECK(x->slot == SLOT_NONE);
            x->slot = SLOT_QUEUED;
            x->qseq = ++w->qseq;
            break;
        case ACT_DROP_SLOT:
            /* A release of nothing would corrupt the pool's count. */
            CHECK(x->slot != SLOT_NONE);
            if (x->slot == SLOT_HELD)
                w->held--;
            x->slot = SLOT_NONE;
            break;
        case ACT_WARN:
            break;
        case ACT_REPORT:
            x->reports_this_exit++;
            CHECK(x->reports_this_exit == 1);
            /* The join holds only for a container that is really gone. */
            CHECK(!x->c.removed || x->eng == E_GONE);
            w->reports++;
            w->removed_reports += x->c.removed;
            w->kept_reports += x->c.state == LC_KEPT;
            w->gaveup_reports += x->c.state == LC_ABANDONED;
            w->anomalies_seen |= x->c.anomalies;
            /* A code taken from an event is a die event's code, and
             * the very one reported as engine_exit_code. */
            if (x->c.source == LC_SRC_EVENT) {
                bool from_die = false;
                int j;

                for (j = 0; j < x->ndie; j++)
                    from_die |= x->die_codes[j] == x->c.exit_code;
                CHECK(from_die);
                CHECK(x->c.die_has_code && x->c.die_code == x->c.exit_code);
            }
            break;
        case ACT_FORGET:
            /* Slots are handed back before the record goes. */
            CHECK(x->slot == SLOT_NONE);
            x->live = false;
            x->step_armed = x->warn_armed = x->giveup_armed = false;
            w->forgets++;
            break;
        }
    }
    check_res = NULL;
}

/* What the caller must hold for the record to make progress on its own,
 * and what must be idle outside cleanup. */
static void
check_caller(const struct walk *w, const struct rec *x)
{
    const struct lc *c = &x->c;

    CHECK(w->held >= 0 && w->held <= MAXSLOTS);
    if (!x->live)
        return;
    CHECK(c->inspect_inflight == x->inspecting);
    CHECK(c->delete_inflight == x->deleting);
    CHECK(c->has_slot == (x->slot == SLOT_HELD));
    CHECK((c->state == LC_QUEUED) == (x->slot == SLOT_QUEUED));
    switch (c->state) {
    case LC_SETTLING:
    case LC_CONFIRMING:
        CHECK(x->inspecting || x->step_armed);
        break;
    case LC_DELAYING:
        CHECK(x->step_armed);
        break;
    case LC_REMOVING:
        CHECK(x->deleting || x->step_armed);
        break;
    case LC_RUNNING:
    case LC_KEPT:
    case LC_ABANDONED:
        CHECK(!x->step_armed && !x->warn_armed && !x->giveup_armed);
        CHECK(x->slot == SLOT_NONE);
        break;
    default:
        break;
    }
    if (cleanup_state(c->state))
        CHECK(c->exited);
}

static const struct rec *cur_rec;

static void
note_history(struct rec *x, const struct lc *b, const struct lc_obs *o,
             const struct lc_result *r)
{
    unsigned h = x->nhist++ % 16;

    x->hist[h].from = b->state;
    x->hist[h].o = *o;
    x->hist[h].eng = x->eng;
    x->hist[h].r = *r;
}

static void
dump_history(void)
{
    const struct rec *x = cur_rec;
    unsigned i;

    if (!x)
        return;
    print_error("  recent history of the record:\n");
    for (i = x->nhist > 16 ? x->nhist - 16 : 0; i < x->nhist; i++) {
        const struct lc_obs *o = &x->hist[i % 16].o;
        const struct lc_result *r = &x->hist[i % 16].r;
        size_t k;

        print_error("    %s %s(code %s%d, run %d %s%d) engine %d ->",
                    lc_state_name(x->hist[i % 16].from), lc_obs_name(o->kind),
                    o->has_exit_code ? "" : "-", o->exit_code,
                    (int)o->inspect.run, o->inspect.has_exit_code ? "" : "-",
                    o->inspect.exit_code, (int)x->hist[i % 16].eng);
        for (k = 0; k < r->nacts && k < LC_MAX_ACTIONS; k++)
            print_error(" %s", act_name((int)r->acts[k].kind));
        print_error(" -> %s\n", lc_state_name(r->to));
    }
    print_error("  record: exit_known %d code %d source %d die_has %d "
                "die %d anomalies %#x destroy %d gone %d\n",
                (int)x->c.exit_known, x->c.exit_code, (int)x->c.source,
                (int)x->c.die_has_code, x->c.die_code,
                (unsigned)x->c.anomalies, (int)x->c.destroy_seen,
                (int)x->c.gone_polled);
}

/* One observation into one record, checked, and its actions carried out. */
static void
drive(struct walk *w, struct rec *x, struct lc_obs o)
{
    struct lc before = x->c;
    struct lc_result r;

    o.now_ms = w->now;
    o.rnd = (uint32_t)rng_next(&w->seed);
    set_where("realistic walk", &x->c, &o, w->n);
    lc_step(&x->c, &o, &r);
    note_history(x, &before, &o, &r);
    cur_rec = x;
    check_step(&before, &o, &r, &x->c);
    if (!cleanup_state(before.state) && cleanup_state(x->c.state))
        x->reports_this_exit = x->ndie = 0; /* a new exit */
    if (o.kind == OBS_EVENT_DIE && o.has_exit_code && x->ndie < 8)
        x->die_codes[x->ndie++] = o.exit_code;
    carry_out(w, x, &r);
    check_caller(w, x);
    w->visits[x->c.state]++;
}

static void
spawn(struct walk *w, struct rec *x)
{
    static const int params[] = {PR_REMOVE, PR_REMOVE, PR_REMOVE_DELAY,
                                 PR_KEEP, PR_REMOVE_GIVEUP};
    struct lc_params p = recipe_params(
        params[rng_below(&w->seed, sizeof(params) / sizeof(params[0]))]);
    unsigned how = rng_below(&w->seed, 3);

    memset(x, 0, sizeof(*x));
    x->live = true;
    lc_init(&x->c, &p);
    if (how == 0) {
        x->eng = E_CREATED;
    } else if (how == 1) {
        x->eng = E_RUNNING;
        queue_event(x, ob(OBS_EVENT_START));
    } else {
        /* Found already exited at startup. */
        struct lc before = x->c;
        struct lc_result r;

        x->eng = E_EXITED;
        x->code = (int)rng_below(&w->seed, 256);
        set_where("realistic walk spawn", &x->c, NULL, w->n);
        lc_start_exited(&x->c, w->now, &r);
        check_step(&before, NULL, &r, &x->c);
        x->reports_this_exit = 0;
        carry_out(w, x, &r);
        check_caller(w, x);
    }
}

/* The engine does something of its own accord (a restart policy, another
 * client's docker rm, a slow removal finishing). */
static void
engine_move(struct walk *w, struct rec *x)
{
    unsigned d = rng_below(&w->seed, 100);
    struct lc_obs o;

    switch (x->eng) {
    case E_CREATED:
        if (d < 80) {
            x->eng = E_RUNNING;
            queue_event(x, ob(OBS_EVENT_START));
        } else {
            x->eng = E_GONE;
            queue_event(x, ob(OBS_EVENT_DESTROY));
        }
        break;
    case E_RUNNING:
        x->eng = E_EXITED;
        x->code = (int)rng_below(&w->seed, 256);
        if (d < 85)
            o = ob_die(x->code);
        else if (d < 95)
            o = ob_die(255); /* the seed's bogus die code */
        else
            o = ob(OBS_EVENT_DIE);
        queue_event(x, o);
        if (d % 10 == 0) { /* docker rm -f of a running container */
            x->eng = E_GONE;
            queue_event(x, ob(OBS_EVENT_DESTROY));
        }
        break;
    case E_EXITED:
        if (d < 25) {
            x->eng = E_RESTARTING;
        } else if (d < 45) {
            x->eng = E_RUNNING;
            queue_event(x, ob(OBS_EVENT_START));
        } else if (d < 70) {
            x->eng = E_REMOVING;
        } else {
            x->eng = E_GONE; /* --rm, or another client */
            queue_event(x, ob(OBS_EVENT_DESTROY));
        }
        break;
    case E_RESTARTING:
        x->eng = E_RUNNING;
        queue_event(x, ob(OBS_EVENT_START));
        break;
    case E_REMOVING:
        x->eng = E_GONE;
        queue_event(x, ob(OBS_EVENT_DESTROY));
        break;
    case E_GONE:
        break;
    }
}

static void
deliver_event(struct walk *w, struct rec *x, bool may_drop)
{
    struct lc_obs o = x->evq[0];

    memmove(&x->evq[0], &x->evq[1], sizeof(x->evq[0]) * (size_t)(x->nev - 1));
    x->nev--;
    if (may_drop && rng_chance(&w->seed, 3))
        return; /* lost while the stream was down */
    drive(w, x, o);
}

static void
relist(struct walk *w, struct rec *x)
{
    if (x->eng == E_GONE) {
        drive(w, x, ob(OBS_ABSENT));
    } else {
        struct lc_obs o = ob(OBS_FOUND);

        o.inspect.run = eng_run(x->eng);
        drive(w, x, o);
    }
}

static void
answer_inspect(struct walk *w, struct rec *x, bool may_fail)
{
    struct lc_obs o;
    bool stale = may_fail && rng_chance(&w->seed, 30);
    bool gone = stale ? x->snap_gone : x->eng == E_GONE;

    x->inspecting = false;
    if (may_fail && rng_chance(&w->seed, 12)) {
        o = ob(OBS_INSPECT_FAILED); /* the seed's 14 s hang, a 500 */
    } else if (gone) {
        o = ob(OBS_INSPECT_GONE);
    } else {
        o = ob(OBS_INSPECT);
        o.inspect = stale ? x->snap : eng_inspect(x);
    }
    drive(w, x, o);
}

/* A forced DELETE, as the policy sends it. */
static void
answer_delete(struct walk *w, struct rec *x, bool may_fail)
{
    struct lc_obs o;

    x->deleting = false;
    if (may_fail && rng_chance(&w->seed, 12)) {
        o = ob(OBS_DELETE_FAILED);
    } else if (x->eng == E_GONE) {
        o = ob(OBS_DELETE_GONE);
    } else if (x->eng == E_REMOVING) {
        o = ob(OBS_DELETE_CONFLICT);
    } else if (may_fail && rng_chance(&w->seed, 8)) {
        x->eng = E_REMOVING; /* the engine is slow to remove it */
        o = ob(OBS_DELETE_CONFLICT);
    } else {
        if (x->eng == E_RUNNING || x->eng == E_RESTARTING)
            queue_event(x, ob_die(137));
        x->eng = E_GONE;
        queue_event(x, ob(OBS_EVENT_DESTROY));
        o = ob(OBS_DELETE_DONE);
    }
    drive(w, x, o);
}

static void
fire_timer(struct walk *w, struct rec *x, enum lc_obs_kind k)
{
    if (k == OBS_TIMER_STEP)
        x->step_armed = false;
    else if (k == OBS_TIMER_WARN)
        x->warn_armed = false;
    else
        x->giveup_armed = false;
    drive(w, x, ob(k));
}

/* The pool grants freed slots at once, in the order they were asked. */
static void
grant_slots(struct walk *w)
{
    while (w->held < MAXSLOTS) {
        struct rec *best = NULL;
        int i;

        for (i = 0; i < NREC; i++) {
            struct rec *x = &w->recs[i];

            if (x->live && x->slot == SLOT_QUEUED &&
                (!best || x->qseq < best->qseq))
                best = x;
        }
        if (!best)
            return;
        best->slot = SLOT_HELD;
        w->held++;
        drive(w, best, ob(OBS_SLOT));
    }
}

/* After FORGET the record must stay silent whatever still arrives. */
static void
poke_forgotten(struct walk *w, struct rec *x)
{
    int i;

    for (i = 0; i < 3; i++) {
        struct lc before = x->c;
        struct lc_result r;
        struct lc_obs o = variant((int)rng_below(&w->seed, NVARIANTS));

        o.now_ms = w->now;
        set_where("realistic walk (forgotten)", &x->c, &o, w->n);
        lc_step(&x->c, &o, &r);
        check_step(&before, &o, &r, &x->c);
    }
}

static void
walk_one(struct walk *w, struct rec *x)
{
    unsigned weights[8], total = 0, pick, i;

    weights[0] = x->eng != E_GONE ? 2 : 0; /* engine moves */
    weights[1] = x->nev ? 6 : 0;           /* event delivered */
    weights[2] = 1;                        /* relist */
    weights[3] = x->inspecting ? 6 : 0;
    weights[4] = x->deleting ? 6 : 0;
    weights[5] = x->step_armed ? 5 : 0;
    weights[6] = x->warn_armed ? 1 : 0;
    weights[7] = x->giveup_armed ? 1 : 0;
    for (i = 0; i < 8; i++)
        total += weights[i];
    pick = rng_below(&w->seed, total);
    for (i = 0; pick >= weights[i]; i++)
        pick -= weights[i];
    switch (i) {
    case 0:
        engine_move(w, x);
        break;
    case 1:
        deliver_event(w, x, true);
        break;
    case 2:
        relist(w, x);
        break;
    case 3:
        answer_inspect(w, x, true);
        break;
    case 4:
        answer_delete(w, x, true);
        break;
    case 5:
        fire_timer(w, x, OBS_TIMER_STEP);
        break;
    case 6:
        fire_timer(w, x, OBS_TIMER_WARN);
        break;
    default:
        fire_timer(w, x, OBS_TIMER_GIVEUP);
        break;
    }
}

/*
 * The end of the world: every container is removed by someone, and the
 * caller answers truthfully. Every record must then finish by itself
 * (nothing stuck waiting for what will never come) and the pool must be
 * whole again.
 */
static void
drain(struct walk *w)
{
    int i, round;

    for (i = 0; i < NREC; i++) {
        struct rec *x = &w->recs[i];

        if (x->live && x->eng != E_GONE) {
            x->eng = E_GONE;
            queue_event(x, ob(OBS_EVENT_DESTROY));
        }
    }
    for (round = 0; round < 200; round++) {
        bool any = false;

        for (i = 0; i < NREC; i++) {
            struct rec *x = &w->recs[i];
            bool stuck = false;

            if (!x->live)
                continue;
            any = true;
            w->now += 10;
            if (x->nev)
                deliver_event(w, x, false);
            else if (x->inspecting)
                answer_inspect(w, x, false);
            else if (x->deleting)
                answer_delete(w, x, false);
            else if (x->step_armed)
                fire_timer(w, x, OBS_TIMER_STEP);
            else if (x->c.state == LC_KEPT || x->c.state == LC_ABANDONED)
                relist(w, x); /* see the parking regression tests */
            else
                stuck = x->slot != SLOT_QUEUED;
            if (stuck) {
                snprintf(where, sizeof(where),
                         "drain: record %d stuck in %s, nothing outstanding",
                         i, lc_state_name(x->c.state));
                set_where_text();
                CHECK(!stuck);
            }
            grant_slots(w);
        }
        if (!any)
            break;
    }
    for (i = 0; i < NREC; i++) {
        snprintf(where, sizeof(where), "drain: record %d still %s", i,
                 lc_state_name(w->recs[i].c.state));
        set_where_text();
        CHECK(!w->recs[i].live);
    }
    snprintf(where, sizeof(where), "drain: pool");
    set_where_text();
    CHECK(w->held == 0);
}

static void
test_walk_realistic(void **state)
{
    static struct walk w;
    long total = 200000;
    int i;

    (void)state;
    memset(&w, 0, sizeof(w));
    check_dump = dump_history;
    w.seed = 0x5eed5eed12345678ull;
    w.now = 1000;
    for (i = 0; i < NREC; i++)
        spawn(&w, &w.recs[i]);
    for (w.n = 0; w.n < total; w.n++) {
        struct rec *x = &w.recs[rng_below(&w.seed, NREC)];

        w.now += rng_below(&w.seed, 700);
        if (!x->live) {
            poke_forgotten(&w, x);
            spawn(&w, x);
        } else {
            walk_one(&w, x);
        }
        grant_slots(&w);
    }
    drain(&w);
    check_dump = NULL;
    cur_rec = NULL;

    print_message("realistic walk: %ld steps, %ld reports (%ld removed, "
                  "%ld kept, %ld gave up), %ld forgotten\n",
                  total, w.reports, w.removed_reports, w.kept_reports,
                  w.gaveup_reports, w.forgets);
    /* The walk must have gone everywhere for its silence to mean much. */
    for (i = 0; i < LC_NSTATES; i++) {
        if (w.visits[i] == 0)
            print_error("realistic walk never reached %s\n",
                        lc_state_name((enum lc_state)i));
        assert_true(w.visits[i] > 0);
    }
    assert_true(w.reports > 2000);
    assert_true(w.removed_reports > 500);
    assert_true(w.kept_reports > 100);
    assert_true(w.gaveup_reports > 10);
    assert_true(w.anomalies_seen & LC_AN_EXIT_CODE_MISMATCH);
    assert_true(w.anomalies_seen & LC_AN_CLEANUP_SLOW);
    assert_true(w.anomalies_seen & LC_AN_GAVE_UP);
    assert_true(w.anomalies_seen & LC_AN_DELETE_RETRIED);
    assert_true(w.anomalies_seen & LC_AN_EXIT_UNKNOWN);
}

/* Anything at any time: stale results, timers never armed, grants never
 * asked for, clocks that go backwards. */
static void
test_walk_adversarial(void **state)
{
    static const int params[] = {PR_REMOVE, PR_REMOVE_DELAY, PR_KEEP,
                                 PR_REMOVE_GIVEUP};
    static const enum lc_run runs[] = {
        LC_RUN_CREATED,  LC_RUN_RUNNING, LC_RUN_PAUSED, LC_RUN_RESTARTING,
        LC_RUN_REMOVING, LC_RUN_EXITED,  LC_RUN_DEAD,
    };
    struct lc recs[8];
    int reports[8];
    bool covered[LC_NSTATES][OBS_NKINDS];
    uint64_t seed = 0xadd5eed0badf00dull, now = 1000;
    long n, total = 200000;
    int i, k;

    (void)state;
    memset(covered, 0, sizeof(covered));
    for (i = 0; i < 8; i++) {
        struct lc_params p = recipe_params(params[i % 4]);

        lc_init(&recs[i], &p);
        reports[i] = 0;
    }
    for (n = 0; n < total; n++) {
        int ri = (int)rng_below(&seed, 8);
        struct lc *c = &recs[ri];
        struct lc before = *c;
        struct lc_result r;
        struct lc_obs o;
        unsigned roll = rng_below(&seed, 1000);

        if (c->state == LC_DONE && roll < 200) {
            struct lc_params p = recipe_params(params[roll % 4]);

            lc_init(c, &p);
            reports[ri] = 0;
            if (roll % 3 == 0) {
                before = *c;
                set_where("adversarial walk", c, NULL, n);
                lc_start_exited(c, now, &r);
                check_step(&before, NULL, &r, c);
            }
            continue;
        }
        memset(&o, 0, sizeof(o));
        o.kind = (enum lc_obs_kind)rng_below(&seed, OBS_NKINDS);
        o.has_exit_code = rng_chance(&seed, 70);
        o.exit_code = (int)rng_below(&seed, 300) - 20;
        o.inspect.run = runs[rng_below(&seed, 7)];
        o.inspect.has_exit_code = rng_chance(&seed, 80);
        o.inspect.exit_code = (int)rng_below(&seed, 256);
        o.inspect.finished = rng_chance(&seed, 70);
        o.inspect.oom_killed = rng_chance(&seed, 5);
        k = (int)rng_below(&seed, 4);
        o.rnd = k == 0 ? 0 : k == 1 ? UINT32_MAX : (uint32_t)rng_next(&seed);
        /* Mostly forward, sometimes backwards. */
        if (rng_chance(&seed, 2))
            o.now_ms = now > 5000 ? now - 5000 : 0;
        else
            o.now_ms = now += rng_below(&seed, 5000);
        covered[c->state][o.kind] = true;
        set_where("adversarial walk", c, &o, n);
        lc_step(c, &o, &r);
        check_step(&before, &o, &r, c);
        if (!cleanup_state(before.state) && cleanup_state(c->state))
            reports[ri] = 0;
        reports[ri] += count_act(&r, ACT_REPORT);
        CHECK(reports[ri] <= 1);
        CHECK(c->cleanup_ms <= now);
    }
    for (i = 0; i < LC_NSTATES; i++)
        for (k = 0; k < OBS_NKINDS; k++) {
            if (!covered[i][k])
                print_error("adversarial walk never fed %s in %s\n",
                            lc_obs_name((enum lc_obs_kind)k),
                            lc_state_name((enum lc_state)i));
            assert_true(covered[i][k]);
        }
}

/* ------------------------------------------------------------------ */
/* 3. Scenarios                                                        */

static const struct lc_params *
p_remove(void)
{
    static struct lc_params p;

    p = mkparams(POLICY_REMOVE, 0, WARN, 0);
    return &p;
}

/* die(42), settled by inspect, slot, DELETE, then both halves of the join:
 * `order` picks when the destroy event and the inspect 404 come. */
enum join_order {
    DESTROY_AFTER_DELETE_THEN_404, /* DELETE 2xx, destroy, 404 */
    DESTROY_BEFORE_DELETE_ANSWER,  /* destroy, DELETE 2xx, 404 */
    GONE_THEN_DESTROY,             /* DELETE 2xx, 404, poll, destroy */
};

static void
happy_path(enum join_order order)
{
    struct sc s;
    const struct lc_result *r;

    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    assert_true(s.c.ran);

    s.now = 10000;
    r = sc_step(&s, ob_die(42));
    assert_int_equal(s.c.state, LC_SETTLING);
    ACTS(r, ACT_DEADLINES, ACT_INSPECT);
    assert_int_equal(r->acts[0].ms, WARN);
    assert_int_equal(r->acts[0].ms2, 0);
    assert_true(s.c.die_seen && s.c.die_has_code);
    assert_int_equal(s.c.die_code, 42);
    assert_false(s.c.exit_known);

    s.now = 10010;
    STEP(&s, ob_insp(LC_RUN_EXITED, 42), LC_QUEUED, ACT_WANT_SLOT);
    assert_true(s.c.exit_known);
    assert_int_equal(s.c.exit_code, 42);
    assert_int_equal(s.c.source, LC_SRC_INSPECT);

    s.now = 10020;
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    assert_true(s.c.has_slot);
    assert_int_equal(s.c.delete_attempts, 1);

    s.now = 10100;
    switch (order) {
    case DESTROY_AFTER_DELETE_THEN_404:
        STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
        assert_true(s.c.removed_by_us);
        s.now = 10150;
        STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, NOACT);
        assert_true(s.c.destroy_seen);
        s.now = 10200;
        STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
             ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
        break;
    case DESTROY_BEFORE_DELETE_ANSWER:
        STEP(&s, ob(OBS_EVENT_DESTROY), LC_REMOVING, NOACT);
        s.now = 10150;
        STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
        s.now = 10200;
        STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
             ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
        break;
    case GONE_THEN_DESTROY:
        STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
        s.now = 10150;
        r = sc_step(&s, ob(OBS_INSPECT_GONE));
        assert_int_equal(s.c.state, LC_CONFIRMING);
        ACTS(r, ACT_STEP_TIMER);
        assert_int_equal(act_ms(r, ACT_STEP_TIMER), POLL);
        /* The poll goes on until the destroy arrives. */
        STEP(&s, ob(OBS_TIMER_STEP), LC_CONFIRMING, ACT_INSPECT);
        STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
        s.now = 10200;
        STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_DROP_SLOT,
             ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
        break;
    }
    REPORT(&s, .exit_known = true, .exit_code = 42, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 42, .anomalies = 0,
           .removed = true, .removed_by_us = true, .delete_attempts = 1,
           .cleanup_ms = 200);
    assert_false(s.c.has_slot);
    assert_int_equal(s.reports, 1);

    /* Forgotten: silent, but a late slot is handed back. */
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, NOACT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, NOACT);
    STEP(&s, ob(OBS_SLOT), LC_DONE, ACT_DROP_SLOT);
}

static void
test_happy_path(void **state)
{
    (void)state;
    happy_path(DESTROY_AFTER_DELETE_THEN_404);
}

static void
test_happy_path_destroy_before_delete_answer(void **state)
{
    (void)state;
    happy_path(DESTROY_BEFORE_DELETE_ANSWER);
}

static void
test_happy_path_gone_then_destroy(void **state)
{
    (void)state;
    happy_path(GONE_THEN_DESTROY);
}

/* The seed: the engine's die event says 255, inspect says 7. */
static void
test_seed_exit_code_mismatch(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(255), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 7), LC_QUEUED, ACT_WANT_SLOT);
    assert_int_equal(s.c.exit_code, 7);
    assert_int_equal(s.c.source, LC_SRC_INSPECT);
    assert_int_equal(s.c.die_code, 255);
    assert_true(s.c.anomalies & LC_AN_EXIT_CODE_MISMATCH);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    s.now += 41234;
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 7, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 255,
           .anomalies = LC_AN_EXIT_CODE_MISMATCH, .removed = true,
           .removed_by_us = true, .delete_attempts = 1, .cleanup_ms = 41234);
}

/* 255 is also a real exit code: die 255 and inspect 255 agree. */
static void
test_seed_genuine_255(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(255), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 255), LC_QUEUED, ACT_WANT_SLOT);
    assert_int_equal(s.c.exit_code, 255);
    assert_int_equal(s.c.anomalies, 0);
}

/* The inspect answer first (relist), the bogus die event later: the true
 * code stays, the mismatch is still flagged. */
static void
test_seed_die_after_inspect(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_found(LC_RUN_EXITED), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    assert_false(s.c.die_seen);
    STEP(&s, ob_insp(LC_RUN_EXITED, 7), LC_QUEUED, ACT_WANT_SLOT);
    assert_int_equal(s.c.anomalies, 0);
    STEP(&s, ob_die(255), LC_QUEUED, NOACT);
    assert_int_equal(s.c.exit_code, 7);
    assert_int_equal(s.c.source, LC_SRC_INSPECT);
    assert_int_equal(s.c.die_code, 255);
    assert_int_equal(s.c.anomalies, LC_AN_EXIT_CODE_MISMATCH);
}

/* A restart policy: the exit is not final; no report until it is. */
static void
restart(enum lc_run run)
{
    struct sc s;

    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(1), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(run, 0), LC_RUNNING, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
    assert_false(s.c.exited);
    assert_false(s.c.die_seen);
    assert_int_equal(s.c.anomalies, 0);
    /* Stale timers that fire anyway do nothing. */
    STEP(&s, ob(OBS_TIMER_WARN), LC_RUNNING, NOACT);
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_RUNNING, NOACT);
    STEP(&s, ob(OBS_TIMER_STEP), LC_RUNNING, NOACT);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    /* Restarted once more, by the event this time, while queued. */
    STEP(&s, ob_die(2), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 2), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
    /* The final exit. */
    s.now = 50000;
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, NOACT);
    s.now = 50300;
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 0, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 0, .anomalies = 0,
           .removed = true, .removed_by_us = true, .delete_attempts = 1,
           .cleanup_ms = 300);
    assert_int_equal(s.reports, 1);
}

static void
test_restart_policy_restarting(void **state)
{
    (void)state;
    restart(LC_RUN_RESTARTING);
}

static void
test_restart_policy_running(void **state)
{
    (void)state;
    restart(LC_RUN_RUNNING);
}

/* docker run --rm: the engine removes it; we never send a DELETE. */
static void
test_removed_by_someone_else(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(6), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    s.now += 5;
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_SETTLING, NOACT);
    s.now += 5;
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 6, .source = LC_SRC_EVENT,
           .die_has_code = true, .die_code = 6, .anomalies = 0,
           .removed = true, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 10);
}

/* --rm, but the 404 comes before the destroy event. */
static void
test_removed_by_someone_else_gone_first(void **state)
{
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(6), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    r = sc_step(&s, ob(OBS_INSPECT_GONE));
    assert_int_equal(s.c.state, LC_CONFIRMING);
    ACTS(r, ACT_STEP_CANCEL, ACT_STEP_TIMER);
    assert_int_equal(act_ms(r, ACT_STEP_TIMER), POLL);
    s.now += 20;
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 6, .source = LC_SRC_EVENT,
           .die_has_code = true, .die_code = 6, .anomalies = 0,
           .removed = true, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 20);
}

/* Its die was missed (stream cut): destroyed while we thought it ran. */
static void
test_gone_before_inspect_no_die(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, ACT_DEADLINES, ACT_INSPECT);
    assert_false(s.c.exit_known);
    s.now += 30;
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = false, .source = LC_SRC_NONE,
           .die_has_code = false, .anomalies = LC_AN_EXIT_UNKNOWN,
           .removed = true, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 30);
}

/* A die event without a code, then gone before inspect could tell. */
static void
test_gone_before_inspect_die_without_code(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob(OBS_EVENT_DIE), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_CANCEL,
         ACT_STEP_TIMER);
    STEP(&s, ob(OBS_ABSENT), LC_DONE, ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL,
         ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = false, .source = LC_SRC_NONE,
           .die_has_code = false, .anomalies = LC_AN_EXIT_UNKNOWN,
           .removed = true, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 0);
}

/* Two 500s then 204: spaced by growing backoff, three attempts. */
static void
test_delete_retried(void **state)
{
    struct sc s;
    const struct lc_result *r;
    uint64_t d1, d2;

    (void)state;
    sc_init(&s, p_remove());
    s.rnd = 0; /* the lower edge of the jitter: exactly d/2 */
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    r = sc_step(&s, ob(OBS_DELETE_FAILED));
    assert_int_equal(s.c.state, LC_REMOVING);
    ACTS(r, ACT_STEP_TIMER);
    d1 = act_ms(r, ACT_STEP_TIMER);
    assert_int_equal(d1, BASE / 2);
    assert_true(s.c.has_slot);
    STEP(&s, ob(OBS_TIMER_STEP), LC_REMOVING, ACT_DELETE);
    r = sc_step(&s, ob(OBS_DELETE_FAILED));
    ACTS(r, ACT_STEP_TIMER);
    d2 = act_ms(r, ACT_STEP_TIMER);
    assert_int_equal(d2, BASE);
    assert_true(d2 > d1);
    STEP(&s, ob(OBS_TIMER_STEP), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    assert_int_equal(s.c.delete_failures, 0);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, NOACT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 0, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 0,
           .anomalies = LC_AN_DELETE_RETRIED, .removed = true,
           .removed_by_us = true, .delete_attempts = 3, .cleanup_ms = 0);
}

/* Many failures: the delay grows to the cap and stays within bounds. */
static void
test_delete_retry_capped(void **state)
{
    struct sc s;
    int i;

    (void)state;
    sc_init(&s, p_remove());
    s.rnd = UINT32_MAX;
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    for (i = 1; i <= 40; i++) {
        uint64_t d;

        sc_step(&s, ob(OBS_DELETE_FAILED));
        d = act_ms(&s.r, ACT_STEP_TIMER);
        assert_true(d >= BASE / 2 && d <= RMAX);
        if (i >= 7) /* 100 * 2^6 > RMAX: capped from here on */
            assert_true(d >= RMAX / 2);
        STEP(&s, ob(OBS_TIMER_STEP), LC_REMOVING, ACT_DELETE);
    }
    assert_int_equal(s.c.delete_attempts, 41);
    assert_int_equal(s.reports, 0);
}

/* 409: the engine is removing it already; poll until gone. */
static void
test_delete_conflict_polls(void **state)
{
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(3), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 3), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    r = sc_step(&s, ob(OBS_DELETE_CONFLICT));
    assert_int_equal(s.c.state, LC_CONFIRMING);
    ACTS(r, ACT_STEP_TIMER);
    assert_int_equal(act_ms(r, ACT_STEP_TIMER), POLL);
    STEP(&s, ob(OBS_TIMER_STEP), LC_CONFIRMING, ACT_INSPECT);
    r = sc_step(&s, ob_insp(LC_RUN_REMOVING, 3));
    ACTS(r, ACT_STEP_TIMER);
    assert_int_equal(act_ms(r, ACT_STEP_TIMER), POLL);
    assert_int_equal(s.c.state, LC_CONFIRMING);
    STEP(&s, ob(OBS_TIMER_STEP), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    s.now += 900;
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 3, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 3, .anomalies = 0,
           .removed = true, .removed_by_us = false, .delete_attempts = 1,
           .cleanup_ms = 900);
}

/* 409, but the other removal did not happen: back to DELETE, slot kept. */
static void
test_delete_conflict_then_still_exited(void **state)
{
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, p_remove());
    s.rnd = 0;
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(3), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 3), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_CONFLICT), LC_CONFIRMING, ACT_STEP_TIMER);
    STEP(&s, ob(OBS_TIMER_STEP), LC_CONFIRMING, ACT_INSPECT);
    r = sc_step(&s, ob_insp(LC_RUN_EXITED, 3));
    assert_int_equal(s.c.state, LC_REMOVING);
    ACTS(r, ACT_STEP_TIMER);
    assert_int_equal(act_ms(r, ACT_STEP_TIMER), BASE / 2);
    assert_true(s.c.has_slot);
    assert_true(s.c.anomalies & LC_AN_DELETE_RETRIED);
    STEP(&s, ob(OBS_TIMER_STEP), LC_REMOVING, ACT_DELETE);
    assert_int_equal(s.c.delete_attempts, 2);
    STEP(&s, ob(OBS_DELETE_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    assert_true(s.c.gone_polled);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 3, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 3,
           .anomalies = LC_AN_DELETE_RETRIED, .removed = true,
           .removed_by_us = false, .delete_attempts = 2, .cleanup_ms = 0);
}

/* The seed's engine blocks inspect for seconds: failures are retried with
 * backoff, never end the wait, and never make a report. */
static void
test_inspect_timeouts_retried(void **state)
{
    static const uint64_t want[] = {50, 100, 200, 400, 800, 1500, 1500};
    struct sc s;
    size_t i;

    (void)state;
    sc_init(&s, p_remove());
    s.rnd = 0;
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(255), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        sc_step(&s, ob(OBS_INSPECT_FAILED));
        assert_int_equal(s.c.state, LC_SETTLING);
        ACTS(&s.r, ACT_STEP_TIMER);
        assert_int_equal(act_ms(&s.r, ACT_STEP_TIMER), want[i]);
        STEP(&s, ob(OBS_TIMER_STEP), LC_SETTLING, ACT_INSPECT);
        if (i == 3)
            STEP(&s, ob(OBS_TIMER_WARN), LC_SETTLING, ACT_WARN);
    }
    assert_int_equal(s.reports, 0);
    STEP(&s, ob_insp(LC_RUN_EXITED, 7), LC_QUEUED, ACT_WANT_SLOT);
    assert_int_equal(s.c.inspect_failures, 0);
    assert_int_equal(s.c.exit_code, 7);
    assert_int_equal(s.c.anomalies,
                     LC_AN_EXIT_CODE_MISMATCH | LC_AN_CLEANUP_SLOW);
    /* The count starts again for the confirmation's inspects. */
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    sc_step(&s, ob(OBS_INSPECT_FAILED));
    assert_int_equal(act_ms(&s.r, ACT_STEP_TIMER), 50);
    assert_int_equal(s.c.state, LC_CONFIRMING);
}

/* delay_ms: wait exactly that long, then queue. */
static void
test_policy_delay(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, DELAY, WARN, 0);
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    r = sc_step(&s, ob_insp(LC_RUN_EXITED, 0));
    assert_int_equal(s.c.state, LC_DELAYING);
    ACTS(r, ACT_STEP_TIMER);
    assert_int_equal(act_ms(r, ACT_STEP_TIMER), DELAY);
    /* Nothing else moves it on. */
    STEP(&s, ob(OBS_SLOT), LC_DELAYING, ACT_DROP_SLOT);
    STEP(&s, ob(OBS_DELETE_FAILED), LC_DELAYING, NOACT);
    STEP(&s, ob(OBS_INSPECT_FAILED), LC_DELAYING, NOACT);
    STEP(&s, ob(OBS_TIMER_STEP), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
}

/* A started container inside the delay goes back to running. */
static void
test_policy_delay_restart(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, DELAY, WARN, 0);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_DELAYING, ACT_STEP_TIMER);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
}

/* The slot queue: nothing happens until a slot comes; leaving the queue
 * any other way gives the place back. */
static void
test_queue(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(5), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 5), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_TIMER_STEP), LC_QUEUED, NOACT);
    STEP(&s, ob_die(5), LC_QUEUED, NOACT);
    STEP(&s, ob_found(LC_RUN_EXITED), LC_QUEUED, NOACT);
    STEP(&s, ob(OBS_DELETE_DONE), LC_QUEUED, NOACT);
    STEP(&s, ob(OBS_INSPECT_FAILED), LC_QUEUED, NOACT);
    STEP(&s, ob(OBS_TIMER_WARN), LC_QUEUED, ACT_WARN);
    s.now += 100;
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, ACT_DROP_SLOT,
         ACT_STEP_CANCEL, ACT_INSPECT);
    /* A grant that crossed the drop is handed back. */
    STEP(&s, ob(OBS_SLOT), LC_CONFIRMING, ACT_DROP_SLOT);
    assert_false(s.c.has_slot);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 5, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 5,
           .anomalies = LC_AN_CLEANUP_SLOW, .removed = true,
           .removed_by_us = false, .delete_attempts = 0, .cleanup_ms = 100);
}

/* Leaving the queue because inspect says 404 also gives the place back. */
static void
test_queue_left_on_inspect_gone(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(5), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 5), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_DROP_SLOT,
         ACT_STEP_CANCEL, ACT_STEP_TIMER);
}

/* keep: report the exit, leave the container, report the next exit too,
 * and forget it silently when it is removed. */
static void
test_keep_policy(void **state)
{
    struct lc_params p = mkparams(POLICY_KEEP, 0, WARN, 0);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(9), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 9), LC_KEPT, ACT_DEADLINES_CANCEL,
         ACT_STEP_CANCEL, ACT_REPORT);
    REPORT(&s, .exit_known = true, .exit_code = 9, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 9, .anomalies = 0,
           .removed = false, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 0);
    /* Kept is quiet. */
    STEP(&s, ob(OBS_TIMER_WARN), LC_KEPT, NOACT);
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_KEPT, NOACT);
    STEP(&s, ob_found(LC_RUN_EXITED), LC_KEPT, NOACT);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
    STEP(&s, ob_die(10), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 10), LC_KEPT, ACT_DEADLINES_CANCEL,
         ACT_STEP_CANCEL, ACT_REPORT);
    REPORT(&s, .exit_known = true, .exit_code = 10, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 10, .anomalies = 0,
           .removed = false, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 0);
    assert_int_equal(s.reports, 2);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_FORGET);
    assert_int_equal(s.reports, 2);
}

/* keep: a die without the start event (missed) is a new exit too. */
static void
test_keep_policy_die_without_start(void **state)
{
    struct lc_params p = mkparams(POLICY_KEEP, 0, WARN, 0);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(9), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 9), LC_KEPT, ACT_DEADLINES_CANCEL,
         ACT_STEP_CANCEL, ACT_REPORT);
    STEP(&s, ob_die(4), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    assert_int_equal(s.c.anomalies, 0);
    assert_false(s.c.exit_known);
    STEP(&s, ob_insp(LC_RUN_EXITED, 4), LC_KEPT, ACT_DEADLINES_CANCEL,
         ACT_STEP_CANCEL, ACT_REPORT);
    assert_int_equal(s.c.exit_code, 4);
    STEP(&s, ob(OBS_ABSENT), LC_DONE, ACT_FORGET);
    assert_int_equal(s.reports, 2);
}

/* warn_after and give_up_after. */
static void
test_warn_and_give_up(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, 0, WARN, GIVEUP);
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    s.now = 100000;
    r = sc_step(&s, ob_die(1));
    ACTS(r, ACT_DEADLINES, ACT_INSPECT);
    assert_int_equal(r->acts[0].ms, WARN);
    assert_int_equal(r->acts[0].ms2, GIVEUP);
    STEP(&s, ob_insp(LC_RUN_EXITED, 1), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_CONFLICT), LC_CONFIRMING, ACT_STEP_TIMER);
    s.now = 100000 + WARN;
    STEP(&s, ob(OBS_TIMER_WARN), LC_CONFIRMING, ACT_WARN);
    assert_int_equal(s.c.anomalies, LC_AN_CLEANUP_SLOW);
    STEP(&s, ob(OBS_TIMER_STEP), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_REMOVING, 1), LC_CONFIRMING, ACT_STEP_TIMER);
    assert_int_equal(s.reports, 0);
    s.now = 100000 + GIVEUP;
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_ABANDONED, ACT_DROP_SLOT,
         ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL, ACT_REPORT);
    REPORT(&s, .exit_known = true, .exit_code = 1, .source = LC_SRC_INSPECT,
           .die_has_code = true, .die_code = 1,
           .anomalies = LC_AN_CLEANUP_SLOW | LC_AN_GAVE_UP, .removed = false,
           .removed_by_us = false, .delete_attempts = 1, .cleanup_ms = GIVEUP);
    assert_false(s.c.has_slot);
    /* Abandoned is quiet; a stale poll result changes nothing. */
    STEP(&s, ob(OBS_TIMER_STEP), LC_ABANDONED, NOACT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_ABANDONED, NOACT);
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_ABANDONED, NOACT);
    STEP(&s, ob(OBS_SLOT), LC_ABANDONED, ACT_DROP_SLOT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_FORGET);
    assert_int_equal(s.reports, 1);
}

/* Giving up with a DELETE still in flight: its late answer is ignored. */
static void
test_give_up_with_delete_in_flight(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, 0, 0, GIVEUP);
    struct sc s;
    const struct lc_result *r;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    r = sc_step(&s, ob_die(1));
    assert_int_equal(r->acts[0].ms, 0); /* no warning configured */
    STEP(&s, ob_insp(LC_RUN_EXITED, 1), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_ABANDONED, ACT_DROP_SLOT,
         ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL, ACT_REPORT);
    STEP(&s, ob(OBS_DELETE_DONE), LC_ABANDONED, NOACT);
    assert_false(s.c.delete_inflight);
    assert_false(s.c.removed_by_us);
    STEP(&s, ob(OBS_ABSENT), LC_DONE, ACT_FORGET);
    assert_int_equal(s.reports, 1);
}

/* Relist: found exited while we thought it ran. */
static void
test_relist_found_exited(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_found(LC_RUN_RUNNING), LC_RUNNING, NOACT);
    STEP(&s, ob_found(LC_RUN_EXITED), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    assert_false(s.c.die_seen);
    STEP(&s, ob_insp(LC_RUN_EXITED, 4), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    /* A relist that no longer lists it stands in for the destroy. */
    STEP(&s, ob(OBS_ABSENT), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 4, .source = LC_SRC_INSPECT,
           .die_has_code = false, .anomalies = 0, .removed = true,
           .removed_by_us = true, .delete_attempts = 1, .cleanup_ms = 0);
}

/* A relist that lists a container dead or removing also starts an exit. */
static void
test_relist_found_dead_or_removing(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_found(LC_RUN_DEAD), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_found(LC_RUN_REMOVING), LC_SETTLING, ACT_DEADLINES,
         ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_REMOVING, 2), LC_CONFIRMING, ACT_STEP_TIMER);
    assert_int_equal(s.c.exit_code, 2);
    assert_int_equal(s.c.source, LC_SRC_INSPECT);
}

/* Created, never started, then removed: nothing to report. */
static void
test_created_never_started(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob_found(LC_RUN_CREATED), LC_RUNNING, NOACT);
    assert_false(s.c.ran);
    STEP(&s, ob_insp(LC_RUN_CREATED, 0), LC_RUNNING, NOACT);
    assert_false(s.c.ran);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_FORGET);
    assert_int_equal(s.reports, 0);

    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_ABSENT), LC_DONE, ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL,
         ACT_FORGET);
    assert_int_equal(s.reports, 0);

    /* The 404 first, then the destroy: still nothing to report. */
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_FORGET);
    assert_int_equal(s.reports, 0);
}

/* A relist that lists it running is as good as a start event. */
static void
test_relist_running_marks_ran(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob_found(LC_RUN_RUNNING), LC_RUNNING, NOACT);
    assert_true(s.c.ran);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, ACT_DEADLINES, ACT_INSPECT);
}

/* First seen already exited (startup): straight to settling. */
static void
test_start_exited(void **state)
{
    struct sc s;

    (void)state;
    sc_start_exited(&s, p_remove());
    assert_int_equal(s.c.state, LC_SETTLING);
    assert_int_equal(s.r.from, LC_RUNNING);
    assert_int_equal(s.r.to, LC_SETTLING);
    assert_non_null(s.r.reason);
    ACTS(&s.r, ACT_DEADLINES, ACT_INSPECT);
    assert_true(s.c.ran && s.c.exited);
    assert_int_equal(s.c.exited_at_ms, 1000);
    s.now = 2500;
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_GONE), LC_CONFIRMING, ACT_STEP_TIMER);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 0, .source = LC_SRC_INSPECT,
           .die_has_code = false, .anomalies = 0, .removed = true,
           .removed_by_us = false, .delete_attempts = 1, .cleanup_ms = 1500);
}

/* First seen exited, then it turns out to be restarting. */
static void
test_start_exited_restarting(void **state)
{
    struct sc s;

    (void)state;
    sc_start_exited(&s, p_remove());
    STEP(&s, ob_insp(LC_RUN_RESTARTING, 1), LC_RUNNING, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
    assert_true(s.c.ran);
    assert_int_equal(s.reports, 0);
}

/* The clock is the caller's: a result with an earlier time than the exit
 * gives a zero duration, not a wrapped one. */
static void
test_cleanup_ms_never_wraps(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    s.now = 5000;
    STEP(&s, ob_die(1), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_SETTLING, NOACT);
    s.now = 10;
    STEP(&s, ob(OBS_INSPECT_GONE), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    assert_int_equal(s.c.cleanup_ms, 0);
}

/* Every step says why; from and to are filled in even with no change. */
static void
test_result_reason_and_from(void **state)
{
    struct lc c;
    struct lc_result r;
    struct lc_params p = mkparams(POLICY_REMOVE, 0, WARN, 0);
    struct lc_obs o = ob_die(1);

    (void)state;
    lc_init(&c, &p);
    assert_int_equal(c.state, LC_RUNNING);
    memset(&r, 0xa5, sizeof(r)); /* lc_step must fill in everything */
    lc_step(&c, &o, &r);
    assert_int_equal(r.from, LC_RUNNING);
    assert_int_equal(r.to, LC_SETTLING);
    assert_non_null(r.reason);
    o = ob(OBS_TIMER_STEP);
    memset(&r, 0xa5, sizeof(r));
    lc_step(&c, &o, &r);
    assert_int_equal(r.from, LC_SETTLING);
    assert_int_equal(r.to, LC_SETTLING);
    assert_int_equal(r.nacts, 0);
}

/* ------------------------------------------------------------------ */
/* Names                                                               */

static void
test_state_names(void **state)
{
    int i, j;

    (void)state;
    for (i = 0; i < LC_NSTATES; i++) {
        const char *n = lc_state_name((enum lc_state)i);

        assert_non_null(n);
        assert_string_not_equal(n, "invalid");
        assert_true(strlen(n) > 0);
        for (j = 0; j < i; j++)
            assert_string_not_equal(n, lc_state_name((enum lc_state)j));
    }
    assert_string_equal(lc_state_name(LC_NSTATES), "invalid");
    assert_string_equal(lc_state_name((enum lc_state) - 1), "invalid");
    assert_string_equal(lc_state_name((enum lc_state)1000), "invalid");
}

static void
test_obs_names(void **state)
{
    int i, j;

    (void)state;
    for (i = 0; i < OBS_NKINDS; i++) {
        const char *n = lc_obs_name((enum lc_obs_kind)i);

        assert_non_null(n);
        assert_string_not_equal(n, "invalid");
        assert_true(strlen(n) > 0);
        for (j = 0; j < i; j++)
            assert_string_not_equal(n, lc_obs_name((enum lc_obs_kind)j));
    }
    assert_string_equal(lc_obs_name(OBS_NKINDS), "invalid");
    assert_string_equal(lc_obs_name((enum lc_obs_kind) - 1), "invalid");
}

static void
test_anomaly_names(void **state)
{
    static const struct {
        enum lc_anomaly a;
        const char *name;
    } want[] = {
        /* The contract's report names these three exactly. */
        {LC_AN_EXIT_CODE_MISMATCH, "engine_exit_code_mismatch"},
        {LC_AN_TASK_DELETE_TIMEOUT, "task_delete_timeout"},
        {LC_AN_TASK_REAPED, "task_reaped"},
        {LC_AN_CLEANUP_SLOW, NULL},
        {LC_AN_GAVE_UP, NULL},
        {LC_AN_DELETE_RETRIED, NULL},
        {LC_AN_EXIT_UNKNOWN, NULL},
    };
    size_t i, j;
    uint32_t all = 0;

    (void)state;
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *n = lc_anomaly_name(want[i].a);

        assert_non_null(n);
        assert_true(strlen(n) > 0);
        if (want[i].name)
            assert_string_equal(n, want[i].name);
        for (j = 0; j < i; j++)
            assert_string_not_equal(n, lc_anomaly_name(want[j].a));
        /* One bit each, none shared. */
        assert_int_equal(want[i].a & (want[i].a - 1), 0);
        assert_int_equal(all & want[i].a, 0);
        all |= want[i].a;
    }
    /* Not a single flag: no name. */
    assert_null(lc_anomaly_name((enum lc_anomaly)0));
    assert_null(lc_anomaly_name(
        (enum lc_anomaly)(LC_AN_GAVE_UP | LC_AN_CLEANUP_SLOW)));
    assert_null(lc_anomaly_name((enum lc_anomaly)(1u << 20)));
}

static void
test_source_names(void **state)
{
    (void)state;
    assert_null(lc_source_name(LC_SRC_NONE));
    assert_string_equal(lc_source_name(LC_SRC_CONTAINERD), "containerd");
    assert_string_equal(lc_source_name(LC_SRC_INSPECT), "inspect");
    assert_string_equal(lc_source_name(LC_SRC_EVENT), "event");
}

static void
test_run_parse(void **state)
{
    static const struct {
        const char *s;
        enum lc_run run;
    } ok[] = {
        {"created", LC_RUN_CREATED},   {"running", LC_RUN_RUNNING},
        {"paused", LC_RUN_PAUSED},     {"restarting", LC_RUN_RESTARTING},
        {"removing", LC_RUN_REMOVING}, {"exited", LC_RUN_EXITED},
        {"dead", LC_RUN_DEAD},
    };
    static const char *const bad[] = {
        "",        "Running", "EXITED",  "exited ",  " exited", "exit",
        "stopped", "up",      "unknown", "runningx", "dea",
    };
    size_t i;
    enum lc_run out;

    (void)state;
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        out = (enum lc_run)99;
        assert_int_equal(lc_run_parse(ok[i].s, &out), 0);
        assert_int_equal(out, ok[i].run);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out = (enum lc_run)99;
        assert_int_equal(lc_run_parse(bad[i], &out), -1);
        assert_int_equal(out, 99); /* untouched on failure */
    }
    out = (enum lc_run)99;
    assert_int_equal(lc_run_parse(NULL, &out), -1);
    assert_int_equal(out, 99);
}

/* ------------------------------------------------------------------ */
/* Regressions: each test below failed against an earlier lifecycle.c. */

/*
 * Was a bug: a relist that lists the container running (or paused, or
 * restarting) while it waits in DELAYING or QUEUED is ignored. A relist
 * stands in for events missed while the stream was down; here it stands in
 * for a missed start event, and on_inspect already treats the same answer
 * as "started again before removal". As it is, the record goes on to send
 * a (forced) DELETE for a container the engine has restarted.
 */
static void
test_regress_found_running_while_delaying(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, DELAY, WARN, 0);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_DELAYING, ACT_STEP_TIMER);
    STEP(&s, ob_found(LC_RUN_RUNNING), LC_RUNNING, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL);
}

static void
test_regress_found_running_while_queued(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(0), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 0), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob_found(LC_RUN_RUNNING), LC_RUNNING, ACT_DROP_SLOT,
         ACT_STEP_CANCEL, ACT_DEADLINES_CANCEL);
}

/*
 * Was a bug: struct lc_inspect.finished is never read. lifecycle.h says the
 * inspect source is "State.ExitCode once FinishedAt is set"; an answer
 * whose FinishedAt is the zero time carries a placeholder ExitCode (0),
 * yet it overrides the die event's code and raises a false
 * engine_exit_code_mismatch.
 */
static void
test_regress_inspect_code_without_finished_at(void **state)
{
    struct sc s;
    struct lc_obs o = ob_insp(LC_RUN_DEAD, 0);

    (void)state;
    o.inspect.finished = false;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(3), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, o, LC_QUEUED, ACT_WANT_SLOT);
    /* The die event's 3 is the best known code, not the placeholder 0. */
    assert_int_equal(s.c.exit_code, 3);
    assert_int_equal(s.c.source, LC_SRC_EVENT);
    assert_int_equal(s.c.anomalies & LC_AN_EXIT_CODE_MISMATCH, 0);
}

/*
 * Was a bug: giving up while SETTLING (inspect never answered, as with the
 * seed's blocked inspects) reports exit_known=false and source NONE even
 * though the die event carried a code, and without exit_code_unknown.
 * LC_SRC_NONE means "unknowable (container gone before inspect)"; here the
 * code is known from the event, and the contract wants exit_code null only
 * if unknowable.
 */
static void
test_regress_give_up_settling_drops_die_code(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, 0, WARN, GIVEUP);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(5), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_FAILED), LC_SETTLING, ACT_STEP_TIMER);
    s.now += GIVEUP;
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_ABANDONED, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT);
    REPORT(&s, .exit_known = true, .exit_code = 5, .source = LC_SRC_EVENT,
           .die_has_code = true, .die_code = 5, .anomalies = LC_AN_GAVE_UP,
           .removed = false, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = GIVEUP);
}

/* Same, with no die seen at all: a null exit code must say why. */
static void
test_regress_give_up_settling_unknown_unflagged(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, 0, WARN, GIVEUP);
    struct sc s;

    (void)state;
    sc_start_exited(&s, &p);
    STEP(&s, ob(OBS_INSPECT_FAILED), LC_SETTLING, ACT_STEP_TIMER);
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_ABANDONED, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT);
    assert_false(s.c.exit_known);
    assert_true(s.c.anomalies & LC_AN_EXIT_UNKNOWN);
}

/*
 * Was a bug: a die event that carries no exit code, arriving after the exit
 * was already settled from an earlier die's code (a replayed event, say),
 * erases die_has_code. The report then says exit_code_source "event" with
 * engine_exit_code null, though the contract's engine_exit_code is "null
 * if none seen" and one was. A later die must not make the record
 * contradict itself.
 */
static void
test_regress_codeless_die_erases_die_code(void **state)
{
    struct sc s;

    (void)state;
    sc_init(&s, p_remove());
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(6), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob(OBS_INSPECT_GONE), LC_CONFIRMING, ACT_STEP_CANCEL,
         ACT_STEP_TIMER);
    assert_int_equal(s.c.source, LC_SRC_EVENT);
    STEP(&s, ob(OBS_EVENT_DIE), LC_CONFIRMING, NOACT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_DONE, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    REPORT(&s, .exit_known = true, .exit_code = 6, .source = LC_SRC_EVENT,
           .die_has_code = true, .die_code = 6, .anomalies = 0,
           .removed = true, .removed_by_us = false, .delete_attempts = 0,
           .cleanup_ms = 0);
}

/*
 * The caller of a parked record: answers what it asks for as a container
 * that is gone would, fires its step timer, but sends no more destroy
 * events (the engine sends one per container). Returns true once DONE.
 */
static bool
settles_without_destroy(struct sc *s)
{
    int i;

    for (i = 0; i < 20 && s->c.state != LC_DONE; i++) {
        if (s->c.inspect_inflight)
            sc_step(s, ob(OBS_INSPECT_GONE));
        else if (s->c.delete_inflight)
            sc_step(s, ob(OBS_DELETE_GONE));
        else if (cleanup_state(s->c.state))
            sc_step(s, ob(OBS_TIMER_STEP));
        else
            break; /* nothing outstanding: parked */
    }
    return s->c.state == LC_DONE;
}

/*
 * Was a bug: a record whose destroy was already seen can park in KEPT or
 * ABANDONED, where only a destroy (or a relist's absent) forgets it; the
 * engine sends one destroy per container, so the record stays tracked
 * until some later relist, if any.
 *
 * keep policy, docker run --rm: die(6); the destroy event overtakes the
 * inspect answer, which was taken before the removal and says exited.
 * Expected: the removal is confirmed (inspect 404) and the record is
 * forgotten. Actual: KEPT, reported as not removed, destroy_seen true,
 * nothing outstanding, never forgotten.
 */
static void
test_regress_keep_destroy_before_inspect_answer_parks(void **state)
{
    struct lc_params p = mkparams(POLICY_KEEP, 0, WARN, 0);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(6), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_SETTLING, NOACT);
    sc_step(&s, ob_insp(LC_RUN_EXITED, 6)); /* taken before the removal */
    if (!settles_without_destroy(&s))
        print_error("parked in %s with destroy_seen=%d\n",
                    lc_state_name(s.c.state), (int)s.c.destroy_seen);
    assert_int_equal(s.c.state, LC_DONE);
    assert_int_equal(s.reports, 1);
}

/*
 * remove policy, give-up: the destroy arrives, but inspect keeps timing
 * out (the seed's engine) until give_up_after_ms. Expected: the record is
 * eventually forgotten once it can see the 404. Actual: ABANDONED with
 * destroy_seen true and nothing outstanding; no second destroy will come.
 */
static void
test_regress_abandoned_after_destroy_parks(void **state)
{
    struct lc_params p = mkparams(POLICY_REMOVE, 0, WARN, GIVEUP);
    struct sc s;

    (void)state;
    sc_init(&s, &p);
    STEP(&s, ob(OBS_EVENT_START), LC_RUNNING, NOACT);
    STEP(&s, ob_die(6), LC_SETTLING, ACT_DEADLINES, ACT_INSPECT);
    STEP(&s, ob_insp(LC_RUN_EXITED, 6), LC_QUEUED, ACT_WANT_SLOT);
    STEP(&s, ob(OBS_SLOT), LC_REMOVING, ACT_DELETE);
    STEP(&s, ob(OBS_DELETE_DONE), LC_CONFIRMING, ACT_INSPECT);
    STEP(&s, ob(OBS_EVENT_DESTROY), LC_CONFIRMING, NOACT);
    STEP(&s, ob(OBS_INSPECT_FAILED), LC_CONFIRMING, ACT_STEP_TIMER);
    /* Its destroy was seen already: report and forget at once. */
    STEP(&s, ob(OBS_TIMER_GIVEUP), LC_DONE, ACT_DROP_SLOT, ACT_STEP_CANCEL,
         ACT_DEADLINES_CANCEL, ACT_REPORT, ACT_FORGET);
    assert_int_equal(s.c.state, LC_DONE);
    assert_int_equal(s.reports, 1);
}

int
main(void)
{
    const struct CMUnitTest sweep[] = {
        cmocka_unit_test(test_sweep_recipes_reach_every_state),
        cmocka_unit_test(test_sweep_all_observations),
        cmocka_unit_test(test_sweep_transition_table),
    };
    const struct CMUnitTest walks[] = {
        cmocka_unit_test(test_walk_realistic),
        cmocka_unit_test(test_walk_adversarial),
    };
    const struct CMUnitTest scenarios[] = {
        cmocka_unit_test(test_happy_path),
        cmocka_unit_test(test_happy_path_destroy_before_delete_answer),
        cmocka_unit_test(test_happy_path_gone_then_destroy),
        cmocka_unit_test(test_seed_exit_code_mismatch),
        cmocka_unit_test(test_seed_genuine_255),
        cmocka_unit_test(test_seed_die_after_inspect),
        cmocka_unit_test(test_restart_policy_restarting),
        cmocka_unit_test(test_restart_policy_running),
        cmocka_unit_test(test_removed_by_someone_else),
        cmocka_unit_test(test_removed_by_someone_else_gone_first),
        cmocka_unit_test(test_gone_before_inspect_no_die),
        cmocka_unit_test(test_gone_before_inspect_die_without_code),
        cmocka_unit_test(test_delete_retried),
        cmocka_unit_test(test_delete_retry_capped),
        cmocka_unit_test(test_delete_conflict_polls),
        cmocka_unit_test(test_delete_conflict_then_still_exited),
        cmocka_unit_test(test_inspect_timeouts_retried),
        cmocka_unit_test(test_policy_delay),
        cmocka_unit_test(test_policy_delay_restart),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_queue_left_on_inspect_gone),
        cmocka_unit_test(test_keep_policy),
        cmocka_unit_test(test_keep_policy_die_without_start),
        cmocka_unit_test(test_warn_and_give_up),
        cmocka_unit_test(test_give_up_with_delete_in_flight),
        cmocka_unit_test(test_relist_found_exited),
        cmocka_unit_test(test_relist_found_dead_or_removing),
        cmocka_unit_test(test_created_never_started),
        cmocka_unit_test(test_relist_running_marks_ran),
        cmocka_unit_test(test_start_exited),
        cmocka_unit_test(test_start_exited_restarting),
        cmocka_unit_test(test_cleanup_ms_never_wraps),
        cmocka_unit_test(test_result_reason_and_from),
    };
    const struct CMUnitTest names[] = {
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_obs_names),
        cmocka_unit_test(test_anomaly_names),
        cmocka_unit_test(test_source_names),
        cmocka_unit_test(test_run_parse),
    };
    const struct CMUnitTest regressions[] = {
        cmocka_unit_test(test_regress_found_running_while_delaying),
        cmocka_unit_test(test_regress_found_running_while_queued),
        cmocka_unit_test(test_regress_inspect_code_without_finished_at),
        cmocka_unit_test(test_regress_give_up_settling_drops_die_code),
        cmocka_unit_test(test_regress_give_up_settling_unknown_unflagged),
        cmocka_unit_test(
            test_regress_keep_destroy_before_inspect_answer_parks),
        cmocka_unit_test(test_regress_abandoned_after_destroy_parks),
        cmocka_unit_test(test_regress_codeless_die_erases_die_code),
    };
    int failed = 0;

    failed +=
        cmocka_run_group_tests_name("lifecycle sweep", sweep, NULL, NULL);
    failed +=
        cmocka_run_group_tests_name("lifecycle walks", walks, NULL, NULL);
    failed += cmocka_run_group_tests_name("lifecycle scenarios", scenarios,
                                          NULL, NULL);
    failed +=
        cmocka_run_group_tests_name("lifecycle names", names, NULL, NULL);
    failed += cmocka_run_group_tests_name("lifecycle regressions", regressions,
                                          NULL, NULL);
    return failed ? 1 : 0;
}
