/*
 * reapctl — the command-line client of reapd, for executors and operators.
 *
 * It asks a running reapd over its admin socket (every command) or its TCP
 * status listener (--url, read-only), through reapctl_http.h, and writes
 * what reapd answered through reapctl_out.h: well-formed JSON, one
 * document per line, whatever reapd sent. This file is the command line:
 * the options, the commands and how each reads its answers. The exit
 * codes are the contract executors script against: see usage_exit.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "docker_parse.h"
#include "json.h"
#include "reapctl_http.h"
#include "reapctl_out.h"

#define EXIT_NOT_READY 1

/* For requests reapd answers at once; a long poll adds its wait. */
#define ANSWER_MS 30000
/* The longest ?wait= reapd accepts. */
#define POLL_MAX_S 300
/* How long `wait` keeps asking about a container reapd has not seen yet
 * (an executor calls it right after `docker run -d`), and for a reapd
 * that cannot be reached (restarting), and how often. */
#define GRACE_MS      5000
#define RETRY_MS      1000
#define TIMEOUT_MAX_S 1000000000L
#define REPORT_ID_MAX 64

/* Set by SIGINT/SIGTERM/SIGHUP: the transfer in progress and any retry
 * pause end, everything is freed, and the signal is raised again so the
 * caller sees how reapctl ended. */
static volatile sig_atomic_t stop_signal;

/* ---- usage ----------------------------------------------------------- */

/* A command: its own function, or (run NULL) one request without
 * arguments whose answer is printed. */
struct command {
    const char *name;
    int (*run)(struct ctl *c, int argc, char **argv);
    const char *help;
    const char *method, *path;
};

static const char usage_head[] =
    "Usage: reapctl [--socket PATH | --url URL] [--token-file FILE] "
    "COMMAND [ARGS]\n"
    "       reapctl --help | --version | COMMAND --help\n";

static const char usage_options[] =
    "\n"
    "The command-line client of reapd. It talks to reapd's admin socket\n"
    "(every command) or to its TCP status listener (read-only: not\n"
    "requeue, drain or audit).\n"
    "\n"
    "Options:\n"
    "  --socket PATH      reapd's admin socket (default: $REAPD_SOCKET, "
    "else\n"
    "                     " CTL_DEFAULT_SOCKET ")\n"
    "  --url URL          reapd's status listener instead, "
    "http://HOST:PORT\n"
    "                     (default: $REAPD_URL when $REAPD_SOCKET is "
    "unset)\n"
    "  --token-file FILE  send \"Authorization: Bearer TOKEN\", TOKEN "
    "being\n"
    "                     FILE's content (reapd's status.token_file;\n"
    "                     default: $REAPD_TOKEN_FILE). The status listener\n"
    "                     serves the read API only with it\n"
    "  --help             this text; COMMAND --help: that command's\n"
    "  --version          reapctl's version\n"
    "\n"
    "Commands:\n";

static const char usage_exit[] =
    "\n"
    "Exit status:\n"
    "  0    success\n"
    "  1    status: reapd answered but is not ready\n"
    "  N    wait --exit-code: the container's own exit code (0..255)\n"
    "  125  reapctl failed: bad usage, reapd cannot be reached, a "
    "timeout,\n"
    "       an unknown container or report, an error from reapd, or a\n"
    "       malformed answer (the message is on stderr)\n"
    "IDs are full container ids: 64 lowercase hex digits, as `docker run "
    "-d`\n"
    "prints them.\n";

static const char help_status[] =
    "  status\n"
    "      Prints reapd's state as JSON. Exits 0 when reapd is ready, 1 "
    "when\n"
    "      it answers but is not ready, 125 when it cannot be reached: a\n"
    "      health check.\n";
static const char help_containers[] =
    "  containers\n"
    "      Prints every container reapd tracks, with its lifecycle state.\n";
static const char help_show[] = "  show ID\n"
                                "      Prints one container reapd tracks.\n";
static const char help_leaks[] =
    "  leaks\n"
    "      Prints the containerd tasks the audit found with no container.\n";
static const char help_wait[] =
    "  wait ID [--timeout S] [--exit-code]\n"
    "      Waits until reapd has reported container ID's exit, then prints\n"
    "      the report on one line. --exit-code: exit with the container's\n"
    "      exit code instead of 0 (125 when reapd could not tell it). A\n"
    "      container reapd has not seen yet, and a reapd that cannot be\n"
    "      reached or is busy, are asked again every second for 5 s.\n"
    "      Without --timeout (whole seconds) it waits for ever.\n";
static const char help_reports[] =
    "  reports [--dead | --pending | --delivered] [--after SEQ] "
    "[--limit N]\n"
    "          [--container ID] [--follow]\n"
    "      Prints reports with their delivery state, one JSON object per\n"
    "      line: the newest first, or with --after the oldest after "
    "sequence\n"
    "      number SEQ first; at most N (1..1000, default 50). --follow "
    "prints\n"
    "      each report as reapd writes it, until interrupted (not with a\n"
    "      state or --limit).\n";
static const char help_requeue[] =
    "  requeue REPORT_ID | requeue --all-dead\n"
    "      Queues a report, or every dead letter, for delivery again.\n"
    "      Admin socket only.\n";
static const char help_drain[] =
    "  drain [--timeout S]\n"
    "      Waits until no container is being cleaned up and no report "
    "waits\n"
    "      for delivery, then prints the outcome. Without --timeout (whole\n"
    "      seconds) it waits for ever. Admin socket only.\n";
static const char help_audit[] =
    "  audit\n"
    "      Runs the audit of containerd's tasks now, prints its result.\n"
    "      Admin socket only.\n";

/* ---- small helpers --------------------------------------------------- */

static int usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Says what is wrong and where help is; returns CTL_EXIT_FAIL. */
static int
usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fputs("reapctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'reapctl %s%s--help'.\n", cmd != NULL ? cmd : "",
            cmd != NULL ? " " : "");
    return CTL_EXIT_FAIL;
}

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps `ms`, or less when a signal asks reapctl to stop. */
static void
nap(int64_t ms)
{
    int64_t end = now_ms() + ms, left;
    struct timespec ts;

    while (!stop_signal && (left = end - now_ms()) > 0) {
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (long)(left % 1000) * 1000000;
        nanosleep(&ts, NULL);
    }
}

static void
on_signal(int sig)
{
    stop_signal = sig;
}

/* A decimal number in 0..max, digits only (no sign, blanks or 0x). */
static int
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v > (max - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* Report ids go into a URL path as they are: printable ASCII that no URL
 * reads specially, and never a dot segment libcurl would fold. */
static bool
valid_report_id(const char *s)
{
    size_t i;

    if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (i = 0; s[i] != '\0'; i++) {
        if (i == REPORT_ID_MAX || s[i] <= ' ' || s[i] > '~' || s[i] == '/' ||
            s[i] == '?' || s[i] == '%' || s[i] == '#')
            return false;
    }
    return true;
}

static int
check_container_id(const char *cmd, const char *id)
{
    if (docker_valid_id(id))
        return 0;
    return usage_error(cmd,
                       "not a full container id: \"%.80s\" (64 lowercase "
                       "hex digits)",
                       id);
}

static int
fetch_and_print(struct ctl *c, const char *cmd, const char *method,
                const char *path)
{
    return out_answer(c, cmd, ctl_request(c, method, path, ANSWER_MS));
}

/* ---- argument parsing ------------------------------------------------ */

/*
 * Is argv[*i] option `name`? Its value, if it takes one (val != NULL), is
 * after '=' or the next argument. 1 (and *i past it), 0 if not this
 * option, -1 with a message if its value is missing.
 */
static int
take_opt(const char *cmd, int argc, char **argv, int *i, const char *name,
         const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);

    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
        return 0;
    if (val == NULL) {
        if (a[n] == '=') {
            usage_error(cmd, "%s takes no value", name);
            return -1;
        }
        (*i)++;
        return 1;
    }
    if (a[n] == '=') {
        *val = a + n + 1;
        (*i)++;
        return 1;
    }
    if (*i + 1 >= argc) {
        usage_error(cmd, "%s needs a value", name);
        return -1;
    }
    *val = argv[*i + 1];
    *i += 2;
    return 1;
}

/* --timeout's whole seconds into *out: 0, or CTL_EXIT_FAIL having said why. */
static int
parse_timeout(const char *cmd, const char *s, long *out)
{
    uint64_t v;

    if (parse_uint(s, TIMEOUT_MAX_S, &v) != 0)
        return usage_error(cmd, "--timeout wants whole seconds, not \"%.40s\"",
                           s);
    *out = (long)v;
    return 0;
}

static int
no_args(const char *cmd, int argc, char **argv)
{
    if (argc > 1)
        return usage_error(cmd, "unexpected argument \"%.80s\"", argv[1]);
    return 0;
}

/* ---- commands -------------------------------------------------------- */

static int
cmd_status(struct ctl *c, int argc, char **argv)
{
    const struct json_node *ready;
    struct json_node *root = NULL;
    int rc = CTL_EXIT_FAIL;
    enum ctl_xfer x;

    if (no_args("status", argc, argv) != 0)
        return CTL_EXIT_FAIL;
    x = ctl_request(c, "GET", "/v1/status", ANSWER_MS);
    if (x == CTL_STOPPED)
        goto out;
    if (x != CTL_ANSWER) {
        out_warn("status: %s", ctl_error(c));
        goto out;
    }
    /* A not-ready reapd may say so with 503; the document tells. */
    if (ctl_code(c) != 200 && ctl_code(c) != 503) {
        rc = out_answer_error(c, "status");
        goto out;
    }
    root = out_answer_json(c, "status");
    if (root == NULL)
        goto out;
    ready = json_get(root, "ready");
    if (ready == NULL || ready->type != JSON_BOOL) {
        if (ctl_code(c) != 200) {
            rc = out_answer_error(c, "status");
            goto out;
        }
        out_warn("status: malformed answer from reapd: no \"ready\"");
        goto out;
    }
    if (out_doc("status", root, false) != 0)
        goto out;
    rc = ready->boolean ? 0 : EXIT_NOT_READY;
out:
    json_free(root);
    return rc;
}

/* containers, leaks, audit: one request, its answer printed. */
static int
cmd_fetch(struct ctl *c, const struct command *cmd, int argc, char **argv)
{
    if (no_args(cmd->name, argc, argv) != 0)
        return CTL_EXIT_FAIL;
    return fetch_and_print(c, cmd->name, cmd->method, cmd->path);
}

static int
cmd_show(struct ctl *c, int argc, char **argv)
{
    char path[128];
    enum ctl_xfer x;

    if (argc != 2)
        return usage_error("show", "show wants one container id");
    if (check_container_id("show", argv[1]) != 0)
        return CTL_EXIT_FAIL;
    snprintf(path, sizeof(path), "/v1/containers/%s", argv[1]);
    x = ctl_request(c, "GET", path, ANSWER_MS);
    if (x == CTL_ANSWER && ctl_code(c) == 404) {
        out_warn("show: reapd does not track container %s", argv[1]);
        return CTL_EXIT_FAIL;
    }
    return out_answer(c, "show", x);
}

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The long-poll wait for an ask with `left` ms to the deadline: whole
 * seconds, at most what reapd accepts; 0 asks for an answer at once. */
static long
poll_wait(int64_t left)
{
    return left >= POLL_MAX_S * 1000L ? POLL_MAX_S : (long)(left / 1000);
}

/* wait's 200: the report, printed; the exit status it asks for. */
static int
wait_done(struct ctl *c, const char *id, bool want_code)
{
    struct json_node *root = out_answer_json(c, "wait");
    const struct json_node *code;
    const char *cid;
    char lit[32];
    int64_t v;
    int rc = CTL_EXIT_FAIL;

    if (root == NULL)
        return CTL_EXIT_FAIL;
    cid = json_string(json_get(root, "container_id"));
    if (cid == NULL || strcmp(cid, id) != 0 ||
        json_string(json_get(root, "report_id")) == NULL) {
        out_warn("wait: malformed answer from reapd: not a report of "
                 "container %s",
                 id);
        goto out;
    }
    if (out_doc("wait", root, true) != 0)
        goto out;
    if (!want_code) {
        rc = 0;
        goto out;
    }
    code = json_get(root, "exit_code");
    if (code == NULL || code->type == JSON_NULL) {
        out_warn("wait: reapd could not tell container %s's exit code", id);
        goto out;
    }
    if (json_int64(code, &v) != 0 || v < 0 || v > 255) {
        if (code->type == JSON_NUMBER)
            out_tame(code->str, code->len, lit, sizeof(lit));
        else
            snprintf(lit, sizeof(lit), "not a number");
        out_warn("wait: container %s's exit code is not in 0..255: %s", id,
                 lit);
        goto out;
    }
    rc = (int)v;
out:
    json_free(root);
    return rc;
}

/* Where a wait stands, between two asks. */
struct waiting {
    const char *id;
    bool want_code;                    /* --exit-code */
    long timeout;                      /* --timeout, whole seconds; -1: none */
    int64_t deadline;                  /* INT64_MAX: none */
    int64_t asked;                     /* when the last ask was sent */
    int64_t now;                       /* ... and answered */
    int64_t unknown_since, lost_since; /* -1: not now */
};

/* What wait's steps return to ask again: no exit status is negative. */
#define WAIT_AGAIN (-1)

/* wait's arguments into `w`: 0, or CTL_EXIT_FAIL having said why. */
static int
wait_args(int argc, char **argv, struct waiting *w)
{
    const char *v;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("wait", argc, argv, &i, "--timeout", &v)) != 0) {
            if (t < 0 || parse_timeout("wait", v, &w->timeout) != 0)
                return CTL_EXIT_FAIL;
        } else if ((t = take_opt("wait", argc, argv, &i, "--exit-code",
                                 NULL)) != 0) {
            if (t < 0)
                return CTL_EXIT_FAIL;
            w->want_code = true;
        } else if (argv[i][0] == '-') {
            return usage_error("wait", "unknown option \"%.80s\"", argv[i]);
        } else if (w->id != NULL) {
            return usage_error("wait", "wait takes one container id");
        } else {
            w->id = argv[i++];
        }
    }
    if (w->id == NULL)
        return usage_error("wait", "wait wants a container id");
    return check_container_id("wait", w->id);
}

/* reapd could not be reached, or is busy (`why`): asked again every
 * RETRY_MS for GRACE_MS. */
static int
wait_lost(struct waiting *w, const char *why)
{
    w->unknown_since = -1;
    if (w->lost_since < 0)
        w->lost_since = w->asked;
    if (w->now - w->lost_since >= GRACE_MS || w->now >= w->deadline) {
        out_warn("wait: %s", why);
        return CTL_EXIT_FAIL;
    }
    nap(min64(RETRY_MS, w->deadline - w->now));
    return WAIT_AGAIN;
}

/* A container reapd does not know (404), yet: asked again every
 * RETRY_MS for GRACE_MS. */
static int
wait_unknown(struct ctl *c, struct waiting *w)
{
    char msg[OUT_MESSAGE_MAX];

    if (w->unknown_since < 0)
        w->unknown_since = w->asked;
    if (w->now - w->unknown_since >= GRACE_MS || w->now >= w->deadline) {
        out_answer_message(c, msg, sizeof(msg));
        out_warn("wait: unknown container %s: reapd neither tracks "
                 "nor has reported it (%s)",
                 w->id, msg);
        return CTL_EXIT_FAIL;
    }
    nap(min64(RETRY_MS, w->deadline - w->now));
    return WAIT_AGAIN;
}

/* 202: the container's exit is not reported yet. */
static int
wait_pending(struct ctl *c, struct waiting *w)
{
    const struct json_node *st;
    struct json_node *root;
    char state[64];

    w->unknown_since = -1;
    root = out_answer_json(c, "wait");
    if (root == NULL)
        return CTL_EXIT_FAIL;
    st = json_get(root, "state");
    if (json_string(st) != NULL)
        out_tame(st->str, st->len, state, sizeof(state));
    else
        snprintf(state, sizeof(state), "not reported yet");
    json_free(root);
    if (w->now >= w->deadline) {
        out_warn("wait: timed out after %ld s: container %s is %s", w->timeout,
                 w->id, state);
        return CTL_EXIT_FAIL;
    }
    /* A reapd that answers 202 before the wait is up must not turn
     * this into a busy loop. */
    if (w->now - w->asked < RETRY_MS)
        nap(min64(RETRY_MS, w->deadline - w->now));
    return WAIT_AGAIN;
}

/* One ask, and what its answer means: an exit status, or WAIT_AGAIN. */
static int
wait_once(struct ctl *c, struct waiting *w)
{
    char path[160], msg[OUT_MESSAGE_MAX], why[512];
    enum ctl_xfer x;
    long p;

    w->asked = now_ms();
    p = poll_wait(w->deadline - w->asked);
    if (p > 0)
        snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=%ld",
                 w->id, p);
    else
        snprintf(path, sizeof(path), "/v1/containers/%s/report", w->id);
    x = ctl_request(c, "GET", path, p * 1000 + ANSWER_MS);
    w->now = now_ms();
    if (x == CTL_STOPPED)
        return CTL_EXIT_FAIL;
    /* A 503 is reapd busy (all connections taken) or not yet able to
     * read its reports: as passing as a restart. */
    if (x == CTL_ANSWER && ctl_code(c) == 503) {
        out_answer_message(c, msg, sizeof(msg));
        snprintf(why, sizeof(why), "reapd is unavailable: %s", msg);
        return wait_lost(w, why);
    }
    if (x == CTL_UNREACHABLE || x == CTL_CUT)
        return wait_lost(w, ctl_error(c));
    if (x != CTL_ANSWER) {
        out_warn("wait: %s", ctl_error(c));
        return CTL_EXIT_FAIL;
    }
    w->lost_since = -1;
    if (ctl_code(c) == 200)
        return wait_done(c, w->id, w->want_code);
    if (ctl_code(c) == 404)
        return wait_unknown(c, w);
    if (ctl_code(c) != 202)
        return out_answer_error(c, "wait");
    return wait_pending(c, w);
}

/*
 * Asks until the report is there. The deadline is the caller's; a
 * container reapd does not know yet (404) and a reapd that cannot be
 * reached or answers 503 are each given GRACE_MS, asked every RETRY_MS,
 * since an executor races `docker run -d` and reapd may be restarting.
 */
static int
cmd_wait(struct ctl *c, int argc, char **argv)
{
    struct waiting w = {.timeout = -1, .unknown_since = -1, .lost_since = -1};
    int rc;

    if (wait_args(argc, argv, &w) != 0)
        return CTL_EXIT_FAIL;
    w.deadline = w.timeout >= 0 ? now_ms() + w.timeout * 1000 : INT64_MAX;
    while ((rc = wait_once(c, &w)) == WAIT_AGAIN)
        ;
    return rc;
}

/* The report stream being followed (reports --follow). */
struct follow {
    const char *container; /* print only this container's reports */
};

/* One line of the report stream: blank, or an entry to print. */
static int
follow_line(const char *s, size_t len, char *why, size_t whylen, void *arg)
{
    const struct follow *f = arg;
    struct json_node *root;
    const char *cid;
    char err[256];
    int result = -1;
    size_t i;

    for (i = 0; i < len; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            break;
    }
    if (i == len)
        return 0;
    root = out_parse(s, len, err, sizeof(err));
    if (root == NULL || root->type != JSON_OBJECT) {
        snprintf(why, whylen, "malformed line in reapd's report stream: %s",
                 root == NULL ? err : "not a JSON object");
        goto out;
    }
    /* The stream carries every report; the filter is ours. */
    cid = json_string(json_get(json_get(root, "report"), "container_id"));
    if (f->container != NULL && (cid == NULL || strcmp(cid, f->container)))
        result = 0;
    else if (out_json(root, true, err, sizeof(err)) == 0)
        result = 0;
    else
        snprintf(why, whylen, "%s", err);
out:
    json_free(root);
    return result;
}

static int
follow_reports(struct ctl *c, const char *after, const char *container)
{
    struct follow f = {.container = container};
    bool opened, ended;
    enum ctl_xfer x;
    char path[96];

    snprintf(path, sizeof(path), "/v1/reports/stream%s%s",
             after != NULL ? "?after=" : "", after != NULL ? after : "");
    x = ctl_stream(c, path, "reapd's report stream", follow_line, &f, &opened,
                   &ended);
    if (x == CTL_STOPPED)
        return CTL_EXIT_FAIL;
    if (ended)
        out_warn("reports: %s", ctl_error(c));
    else if (x == CTL_ANSWER && ctl_code(c) != 200)
        return out_answer_error(c, "reports");
    else if (x == CTL_ANSWER)
        out_warn("reports: reapd ended the report stream");
    else if (opened)
        out_warn("reports: the report stream broke: %s", ctl_error(c));
    else
        out_warn("reports: %s", ctl_error(c));
    return CTL_EXIT_FAIL;
}

/* Appends "NAME=VALUE" to the query being built in `q`. */
static void
query_add(char *q, size_t qlen, const char *name, const char *value)
{
    size_t used = strlen(q);

    if (value != NULL)
        snprintf(q + used, qlen - used, "%c%s=%s", used == 0 ? '?' : '&', name,
                 value);
}

/* reports' arguments. */
struct reports_args {
    const char *state, *after, *limit, *container;
    bool follow;
};

/* Is argv[*i] --dead, --pending or --delivered? 1 (and *i past it), 0
 * if not, CTL_EXIT_FAIL having said why. */
static int
reports_state(int argc, char **argv, int *i, struct reports_args *a)
{
    static const char *const states[] = {"dead", "pending", "delivered"};
    char flag[16];
    size_t k;
    int t;

    for (k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
        snprintf(flag, sizeof(flag), "--%s", states[k]);
        if ((t = take_opt("reports", argc, argv, i, flag, NULL)) < 0)
            return CTL_EXIT_FAIL;
        if (t == 0)
            continue;
        if (a->state != NULL && a->state != states[k])
            return usage_error("reports", "one of --dead, --pending, "
                                          "--delivered only");
        a->state = states[k];
        return 1;
    }
    return 0;
}

/* reports' arguments into `a`: 0, or CTL_EXIT_FAIL having said why. */
static int
reports_args(int argc, char **argv, struct reports_args *a)
{
    const char *v;
    int i = 1, t;
    uint64_t n;

    while (i < argc) {
        if ((t = reports_state(argc, argv, &i, a)) != 0) {
            if (t != 1)
                return CTL_EXIT_FAIL;
        } else if ((t = take_opt("reports", argc, argv, &i, "--after", &v)) !=
                   0) {
            if (t < 0)
                return CTL_EXIT_FAIL;
            if (parse_uint(v, INT64_MAX, &n) != 0)
                return usage_error("reports",
                                   "--after wants a sequence number, not "
                                   "\"%.40s\"",
                                   v);
            a->after = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--limit", &v)) !=
                   0) {
            if (t < 0)
                return CTL_EXIT_FAIL;
            if (parse_uint(v, 1000, &n) != 0 || n < 1)
                return usage_error("reports",
                                   "--limit wants 1..1000, not \"%.40s\"", v);
            a->limit = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--container",
                                 &v)) != 0) {
            if (t < 0 || check_container_id("reports", v) != 0)
                return CTL_EXIT_FAIL;
            a->container = v;
        } else if ((t = take_opt("reports", argc, argv, &i, "--follow",
                                 NULL)) != 0) {
            if (t < 0)
                return CTL_EXIT_FAIL;
            a->follow = true;
        } else {
            return usage_error("reports", "unexpected argument \"%.80s\"",
                               argv[i]);
        }
    }
    if (a->follow && (a->state != NULL || a->limit != NULL))
        return usage_error("reports", "--follow takes no --%s",
                           a->state != NULL ? a->state : "limit");
    return 0;
}

/* The reports asked for, each on a line of its own, or none at all. */
static int
reports_list(struct ctl *c, const struct reports_args *a)
{
    const struct json_node *list;
    struct json_node *root = NULL;
    char query[256], path[300];
    int rc = CTL_EXIT_FAIL;
    enum ctl_xfer x;
    size_t k;

    query[0] = '\0';
    query_add(query, sizeof(query), "after", a->after);
    query_add(query, sizeof(query), "limit", a->limit);
    query_add(query, sizeof(query), "container_id", a->container);
    query_add(query, sizeof(query), "state", a->state);
    snprintf(path, sizeof(path), "/v1/reports%s", query);
    x = ctl_request(c, "GET", path, ANSWER_MS);
    if (x != CTL_ANSWER || ctl_code(c) != 200)
        return out_answer(c, "reports", x);
    root = out_answer_json(c, "reports");
    if (root == NULL)
        goto out;
    list = json_get(root, "reports");
    if (list == NULL || list->type != JSON_ARRAY) {
        out_warn("reports: malformed answer from reapd: no \"reports\" list");
        goto out;
    }
    /* All or nothing: a bad entry is found before any is printed. */
    for (k = 0; k < list->count; k++) {
        if (list->items[k]->type != JSON_OBJECT) {
            out_warn("reports: malformed answer from reapd: entry %zu is not "
                     "an object",
                     k);
            goto out;
        }
    }
    for (k = 0; k < list->count; k++) {
        if (out_doc("reports", list->items[k], false) != 0)
            goto out;
    }
    rc = 0;
out:
    json_free(root);
    return rc;
}

static int
cmd_reports(struct ctl *c, int argc, char **argv)
{
    struct reports_args a = {0};

    if (reports_args(argc, argv, &a) != 0)
        return CTL_EXIT_FAIL;
    if (a.follow)
        return follow_reports(c, a.after, a.container);
    return reports_list(c, &a);
}

static int
cmd_requeue(struct ctl *c, int argc, char **argv)
{
    const char *id = NULL;
    char path[128], msg[OUT_MESSAGE_MAX];
    bool all = false;
    enum ctl_xfer x;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("requeue", argc, argv, &i, "--all-dead", NULL)) !=
            0) {
            if (t < 0)
                return CTL_EXIT_FAIL;
            all = true;
        } else if (argv[i][0] == '-') {
            return usage_error("requeue", "unknown option \"%.80s\"", argv[i]);
        } else if (id != NULL) {
            return usage_error("requeue", "requeue takes one report id");
        } else {
            id = argv[i++];
        }
    }
    if (all == (id != NULL))
        return usage_error("requeue",
                           "requeue wants a report id or --all-dead");
    if (id != NULL && !valid_report_id(id))
        return usage_error("requeue", "not a report id: \"%.80s\"", id);
    if (all)
        snprintf(path, sizeof(path), "/v1/reports/requeue?state=dead");
    else
        snprintf(path, sizeof(path), "/v1/reports/%s/requeue", id);
    x = ctl_request(c, "POST", path, ANSWER_MS);
    if (x == CTL_ANSWER && id != NULL &&
        (ctl_code(c) == 404 || ctl_code(c) == 409)) {
        out_answer_message(c, msg, sizeof(msg));
        if (ctl_code(c) == 404)
            out_warn("requeue: reapd has no report %s (%s)", id, msg);
        else
            out_warn("requeue: report %s stays as it is: %s", id, msg);
        return CTL_EXIT_FAIL;
    }
    return out_answer(c, "requeue", x);
}

/* "N cleaning, N pending" of a 202 from /v1/drain. */
static void
drain_counts(const struct json_node *root, char *out, size_t outlen)
{
    const struct json_node *cl = json_get(root, "cleaning");
    const struct json_node *pe = json_get(root, "pending");

    snprintf(out, outlen, "%s cleaning, %s pending",
             cl != NULL && cl->type == JSON_NUMBER ? cl->str : "?",
             pe != NULL && pe->type == JSON_NUMBER ? pe->str : "?");
}

static int
cmd_drain(struct ctl *c, int argc, char **argv)
{
    int64_t deadline, asked, now;
    struct json_node *root;
    char path[64], counts[128];
    long timeout = -1, w;
    const char *v;
    enum ctl_xfer x;
    int i = 1, t;

    while (i < argc) {
        if ((t = take_opt("drain", argc, argv, &i, "--timeout", &v)) == 0)
            return usage_error("drain", "unexpected argument \"%.80s\"",
                               argv[i]);
        if (t < 0 || parse_timeout("drain", v, &timeout) != 0)
            return CTL_EXIT_FAIL;
    }
    deadline = timeout >= 0 ? now_ms() + timeout * 1000 : INT64_MAX;
    for (;;) {
        asked = now_ms();
        w = poll_wait(deadline - asked);
        if (w > 0)
            snprintf(path, sizeof(path), "/v1/drain?wait=%ld", w);
        else
            snprintf(path, sizeof(path), "/v1/drain");
        x = ctl_request(c, "POST", path, w * 1000 + ANSWER_MS);
        if (x != CTL_ANSWER || ctl_code(c) != 202)
            return out_answer(c, "drain", x);
        root = out_answer_json(c, "drain");
        if (root == NULL)
            return CTL_EXIT_FAIL;
        drain_counts(root, counts, sizeof(counts));
        json_free(root);
        now = now_ms();
        if (now >= deadline) {
            out_warn("drain: not drained after %ld s: %s", timeout, counts);
            return CTL_EXIT_FAIL;
        }
        /* As in wait: an early 202 is not a reason to spin. */
        if (now - asked < RETRY_MS)
            nap(min64(RETRY_MS, deadline - now));
    }
}

/* ---- main ------------------------------------------------------------ */

static const struct command commands[] = {
    {"status", cmd_status, help_status, NULL, NULL},
    {"containers", NULL, help_containers, "GET", "/v1/containers"},
    {"show", cmd_show, help_show, NULL, NULL},
    {"leaks", NULL, help_leaks, "GET", "/v1/leaks"},
    {"wait", cmd_wait, help_wait, NULL, NULL},
    {"reports", cmd_reports, help_reports, NULL, NULL},
    {"requeue", cmd_requeue, help_requeue, NULL, NULL},
    {"drain", cmd_drain, help_drain, NULL, NULL},
    {"audit", NULL, help_audit, "POST", "/v1/audit"},
};

/* All of it, or the part of one command. 0, or CTL_EXIT_FAIL when stdout
 * cannot take it. */
static int
usage(const struct command *only)
{
    size_t k;

    fputs(usage_head, stdout);
    if (only != NULL) {
        fputc('\n', stdout);
        fputs(only->help, stdout);
    } else {
        fputs(usage_options, stdout);
        for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
            fputs(commands[k].help, stdout);
        fputs(usage_exit, stdout);
    }
    return fflush(stdout) == 0 ? 0 : CTL_EXIT_FAIL;
}

static const char *
env(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

int
main(int argc, char **argv)
{
    const char *socket = NULL, *url = NULL, *token_file = NULL, *v;
    const struct command *cmd = NULL;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    struct ctl *c = NULL;
    char err[600];
    bool curl_up = false, bad_target;
    int i = 1, j, t, rc = CTL_EXIT_FAIL;
    size_t k;

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(NULL);
        if (strcmp(argv[i], "--version") == 0) {
            printf("reapctl %s\n", REAPD_VERSION);
            return fflush(stdout) == 0 ? 0 : CTL_EXIT_FAIL;
        }
        if ((t = take_opt(NULL, argc, argv, &i, "--socket", &v)) > 0)
            socket = v;
        else if (t == 0 &&
                 (t = take_opt(NULL, argc, argv, &i, "--url", &v)) > 0)
            url = v;
        else if (t == 0 &&
                 (t = take_opt(NULL, argc, argv, &i, "--token-file", &v)) > 0)
            token_file = v;
        else if (t == 0)
            return usage_error(NULL, "unknown option \"%.80s\"", argv[i]);
        if (t < 0)
            return CTL_EXIT_FAIL;
    }
    if (i >= argc)
        return usage_error(NULL, "no command given");
    for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
        if (strcmp(argv[i], commands[k].name) == 0)
            cmd = &commands[k];
    }
    if (cmd == NULL)
        return usage_error(NULL, "unknown command \"%.80s\"", argv[i]);
    for (j = i + 1; j < argc; j++) {
        if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0)
            return usage(cmd);
    }
    if (socket != NULL && url != NULL)
        return usage_error(NULL, "--socket or --url, not both");
    if (socket == NULL && url == NULL) {
        socket = env("REAPD_SOCKET");
        url = socket == NULL ? env("REAPD_URL") : NULL;
        if (socket == NULL && url == NULL)
            socket = CTL_DEFAULT_SOCKET;
    }
    if (token_file == NULL)
        token_file = env("REAPD_TOKEN_FILE");

    /* No SA_RESTART: a signal has to cut a retry pause short. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaction(sigs[k], &sa, NULL);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        out_warn("cannot initialise libcurl");
        goto out;
    }
    curl_up = true;
    c = ctl_new(socket, url, token_file, &stop_signal, &bad_target, err,
                sizeof(err));
    if (c == NULL) {
        if (bad_target)
            usage_error(NULL, "%s", err);
        else
            out_warn("%s", err);
        goto out;
    }
    rc = cmd->run != NULL ? cmd->run(c, argc - i, argv + i)
                          : cmd_fetch(c, cmd, argc - i, argv + i);
out:
    ctl_free(c);
    if (curl_up)
        curl_global_cleanup();
    if (fflush(stdout) != 0 && rc != CTL_EXIT_FAIL) {
        out_warn("cannot write to stdout: %s", strerror(errno));
        rc = CTL_EXIT_FAIL;
    }
    if (stop_signal) {
        /* End the way an interrupted program does, with nothing left
         * behind. */
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
    }
    return rc;
}
