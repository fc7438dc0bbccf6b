/*
 * main — reapd's command line, startup and shutdown.
 *
 * Wires the modules together on one loop: config -> log -> loop -> docker
 * -> reaper -> status, with SIGTERM/SIGINT for a clean stop and SIGHUP for
 * a config reload. Exit codes: 0 clean stop, 1 fatal runtime error,
 * 2 usage or config error.
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "feed.h"
#include "containerd.h"
#include "docker.h"
#include "log.h"
#include "loop.h"
#include "reaper.h"
#include "report.h"
#include "sdnotify.h"
#include "status.h"
#include "outbox.h"
#include "store.h"
#include "upstream.h"

#define DEFAULT_CONFIG "/etc/reapd/reapd.json"

struct app {
    const char *config_path; /* NULL: embedded default */
    struct config *cfg;
    bool log_level_forced, log_format_forced;
    enum log_level log_level;
    enum log_format log_format;
    struct loop *loop;
    struct reaper *reaper;
    struct upstream *up; /* NULL: no upstream.url */
    struct outbox *outbox;
    struct status *status;
    struct status *admin; /* the admin socket (admin.socket) */
    struct feed *feed;    /* reports made durable, to waits and streams */
    struct sdnotify *sd;  /* NULL: not under systemd's notify */
    bool sd_ready;        /* READY=1 sent */
    struct docker *docker;
    struct ctrd *ctrd; /* NULL: Docker-only mode */
    struct store *store;
    struct report_log *rl;
    int lock_fd;
    char *status_token; /* until the status listener owns it */
    struct event *sigterm, *sigint, *sighup;
};

/* upstream_opts from the config; the token is read from its file (the
 * caller frees it with upstream_token_free). 0 or -1 (logged). */
static int
upstream_options(const struct config *cfg, struct upstream_opts *o,
                 char **token)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    *token = NULL;
    if (cfg->upstream_token_file != NULL &&
        upstream_read_token(cfg->upstream_token_file, token, err,
                            sizeof(err)) != 0) {
        log_error(NULL, "upstream: %s", err);
        return -1;
    }
    o->url = cfg->upstream_url;
    o->timeout_ms = (long)cfg->upstream_timeout_ms;
    o->headers = cfg->upstream_headers;
    o->nheaders = cfg->nupstream_headers;
    o->token = *token;
    o->ca_file = cfg->upstream_ca_file;
    o->client_cert = cfg->upstream_client_cert;
    o->client_key = cfg->upstream_client_key;
    o->max_in_flight = (unsigned)cfg->upstream_max_in_flight;
    o->retry_base_ms = (uint64_t)cfg->upstream_retry_base_ms;
    o->retry_max_ms = (uint64_t)cfg->upstream_retry_max_ms;
    return 0;
}

static void
on_report_made(const char *json, size_t len, void *arg)
{
    (void)json;
    (void)len;
    outbox_kick(arg);
}

/* Where the engine's containerd listens, or NULL for Docker-only mode.
 * "auto" looks once, at startup: the standalone containerd's socket, then
 * the one dockerd starts for itself. */
static const char *
containerd_path(const struct config *cfg)
{
    static const char *const candidates[] = {
        "/run/containerd/containerd.sock",
        "/var/run/docker/containerd/containerd.sock",
    };
    size_t i;

    if (strcmp(cfg->containerd_socket, "off") == 0) {
        log_info(NULL, "mode: docker-only (containerd.socket is off): exit "
                       "codes from inspect and die events, task_deleted "
                       "null, no leaked-task reaping");
        return NULL;
    }
    if (strcmp(cfg->containerd_socket, "auto") != 0)
        return cfg->containerd_socket;
    for (i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
        if (access(candidates[i], F_OK) == 0)
            return candidates[i];
    log_warn(NULL,
             "mode: docker-only: no containerd socket at %s or %s "
             "(containerd.socket is auto): exit codes from inspect "
             "and die events, task_deleted null, no leaked-task "
             "reaping",
             candidates[0], candidates[1]);
    return NULL;
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: reapd [-c FILE | --config FILE] [--check-config]\n"
            "             [--print-config]\n"
            "             [--log-level debug|info|warn|error]\n"
            "             [--log-format text|json] [--version] [--help]\n"
            "\n"
            "Watches the Docker engine, settles the true exit code of each\n"
            "container a policy covers, removes it, confirms removal and\n"
            "reports it. Without -c, reads " DEFAULT_CONFIG " if it\n"
            "exists, else runs on the embedded default.\n"
            "\n"
            "--check-config validates the config and exits (0, or 2 with\n"
            "FILE:LINE:COL lines); --print-config prints the effective\n"
            "config as JSON, defaults filled in and secrets redacted,\n"
            "as GET /v1/config shows it.\n");
}

static void
print_errors(const struct config_errors *errs)
{
    size_t i;

    for (i = 0; i < errs->count; i++)
        fprintf(stderr, "%s\n", errs->lines[i]);
}

/* Loads the config named on the command line (or the default). */
static int
load_config(const char *path, struct config **out)
{
    struct config_errors errs = {0};
    int rc;

    if (path == NULL) {
        *out = config_default();
        return *out != NULL ? 0 : -1;
    }
    rc = config_load(path, out, &errs);
    if (rc != 0)
        print_errors(&errs);
    config_errors_clear(&errs);
    return rc;
}

/* mkdir -p for the state directory. */
static int
make_dirs(const char *path)
{
    char buf[4096];
    size_t i, n = strlen(path);

    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char saved = buf[i];

            buf[i] = '\0';
            if (mkdir(buf, 0750) != 0 && errno != EEXIST)
                return -1;
            buf[i] = saved;
        }
    }
    return 0;
}

/* One reapd per state_dir: two would make the same reports, race for the
 * same removals and write the same database. The lock goes with the
 * process, also on kill -9. Returns the fd to keep open, or -1. */
static int
lock_state_dir(const char *dir)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s/reapd.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) {
        log_error(NULL, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        log_error(NULL, "another reapd uses %s (%s is locked)", dir, path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Every status client holds a descriptor, as does every engine call: a
 * soft limit of 1024 under a hard one of 500k would run out first. */
static void
raise_open_files_limit(void)
{
    struct rlimit rl;
    unsigned long long was;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_warn(NULL, "open files: getrlimit: %s", strerror(errno));
        return;
    }
    was = (unsigned long long)rl.rlim_cur;
    if (rl.rlim_cur == rl.rlim_max) {
        log_info(NULL, "open files: limit %llu", was);
        return;
    }
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_warn(NULL,
                 "open files: cannot raise the limit from %llu to "
                 "%llu: %s; staying at %llu",
                 was, (unsigned long long)rl.rlim_max, strerror(errno), was);
        return;
    }
    log_info(NULL, "open files: limit raised from %llu to %llu", was,
             (unsigned long long)rl.rlim_cur);
}

static void
on_stop(evutil_socket_t sig, short what, void *arg)
{
    struct app *a = arg;

    (void)what;
    log_info(NULL, "signal %d: stopping", (int)sig);
    sdnotify_stopping(a->sd);
    event_base_loopexit(loop_base(a->loop), NULL);
}

/* A report is durable: waits for its container and the report streams
 * look again (on the next loop turn). */
static void
on_report_durable(const char *report_id, const char *container_id, void *arg)
{
    (void)report_id;
    feed_publish(arg, container_id);
}

/* systemd hears READY=1 after the first reconcile with the engine, and
 * in STATUS= whenever readiness turns (the unit's status line). */
static void
on_ready(bool ready, const char *why, void *arg)
{
    struct app *a = arg;
    char status[256];

    if (!ready) {
        snprintf(status, sizeof(status), "not ready: %s", why);
        sdnotify_status(a->sd, status);
        return;
    }
    snprintf(status, sizeof(status), "ready: watching %s",
             a->cfg->docker_socket);
    if (a->sd_ready) {
        sdnotify_status(a->sd, status);
    } else if (sdnotify_ready(a->sd, status) == 0) {
        a->sd_ready = true;
    }
}

/* The SIGHUP reload: true when the new config is in force, false when it
 * was rejected (logged) and the old one stays. */
static bool
reload(struct app *a)
{
    struct config *next = NULL;
    struct config_errors errs = {0};
    char *status_token = NULL, err[256];
    size_t i;

    if (a->config_path == NULL) {
        log_info(NULL, "SIGHUP: running on the embedded default; nothing "
                       "to reload");
        return true;
    }
    if (config_load(a->config_path, &next, &errs) != 0) {
        for (i = 0; i < errs.count; i++)
            log_error(NULL, "reload rejected: %s", errs.lines[i]);
        log_error(NULL,
                  "SIGHUP: %s is invalid; the old config stays in "
                  "force",
                  a->config_path);
        config_errors_clear(&errs);
        status_note_reload(a->status, false);
        return false;
    }
    /* Read before anything is swapped, so a bad token file rejects the
     * whole reload. */
    if (status_read_token(next, &status_token, err, sizeof(err)) != 0) {
        log_error(NULL, "reload rejected: status.token_file: %s", err);
        log_error(NULL, "SIGHUP: the old config stays in force");
        config_free(next);
        status_note_reload(a->status, false);
        return false;
    }
    if (strcmp(next->docker_socket, a->cfg->docker_socket) != 0 ||
        strcmp(next->status_listen, a->cfg->status_listen) != 0 ||
        strcmp(next->admin_socket, a->cfg->admin_socket) != 0 ||
        strcmp(next->state_dir, a->cfg->state_dir) != 0)
        log_warn(NULL, "SIGHUP: docker.socket, status.listen, admin.socket "
                       "and state_dir take effect at the next start");
    if ((next->upstream_url == NULL) != (a->cfg->upstream_url == NULL))
        log_warn(NULL, "SIGHUP: turning upstream delivery on or off takes "
                       "effect at the next start");
    else if (a->up != NULL) {
        struct upstream_opts uo;
        char *token = NULL;

        if (upstream_options(next, &uo, &token) != 0) {
            upstream_token_free(status_token);
            config_free(next);
            log_error(NULL, "SIGHUP: the old config stays in force");
            status_note_reload(a->status, false);
            return false;
        }
        if (upstream_update(a->up, &uo, err, sizeof(err)) != 0) {
            log_error(NULL, "reload rejected: upstream: %s", err);
            upstream_token_free(token);
            upstream_token_free(status_token);
            config_free(next);
            log_error(NULL, "SIGHUP: the old config stays in force");
            status_note_reload(a->status, false);
            return false;
        }
        upstream_token_free(token);
    }
    /* Records copied their policy when first tracked, so containers in
     * flight keep the rules they started with; the old config can go. */
    reaper_set_config(a->reaper, next);
    /* Before the old config is freed: /v1/config reads it. */
    status_set_config(a->status, next, status_token);
    status_set_config(a->admin, next, NULL);
    status_note_reload(a->status, true);
    config_free(a->cfg);
    a->cfg = next;
    if (!a->log_level_forced || !a->log_format_forced)
        log_setup(a->log_level_forced ? a->log_level : next->log_level,
                  a->log_format_forced ? a->log_format : next->log_format);
    log_info(NULL, "SIGHUP: reloaded %s (%zu policies)", a->config_path,
             next->policies.count);
    return true;
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
    struct app *a = arg;
    bool ok;

    (void)sig;
    (void)what;
    /* Before READY=1, systemd is still waiting for the start: a reload
     * then is only a STATUS= line. */
    if (a->sd_ready)
        sdnotify_reloading(a->sd);
    ok = reload(a);
    if (a->sd_ready)
        sdnotify_ready(a->sd, ok ? "ready: config reloaded"
                                 : "ready: reload rejected, the old config "
                                   "stays in force");
    else if (!ok)
        sdnotify_status(a->sd, "reload rejected, the old config stays in "
                               "force");
}

/* The command line: -1 to go on, else the exit code to end with. */
static int
parse_args(struct app *a, int argc, char **argv, bool *check, bool *print)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 'C'},
        {"print-config", no_argument, NULL, 'P'},
        {"log-level", required_argument, NULL, 'l'},
        {"log-format", required_argument, NULL, 'f'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    while ((opt = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            a->config_path = optarg;
            break;
        case 'C':
            *check = true;
            break;
        case 'P':
            *print = true;
            break;
        case 'l':
            if (log_level_parse(optarg, &a->log_level) != 0) {
                fprintf(stderr, "reapd: bad --log-level \"%s\"\n", optarg);
                return 2;
            }
            a->log_level_forced = true;
            break;
        case 'f':
            if (log_format_parse(optarg, &a->log_format) != 0) {
                fprintf(stderr, "reapd: bad --log-format \"%s\"\n", optarg);
                return 2;
            }
            a->log_format_forced = true;
            break;
        case 'V':
            printf("reapd %s\n", REAPD_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "reapd: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return -1;
}

/* --print-config: the effective config as JSON; the exit code. */
static int
print_config(const struct config *cfg)
{
    size_t len;
    char *json = config_to_json(cfg, true, &len);

    if (json == NULL) {
        fprintf(stderr, "reapd: out of memory\n");
        return 1;
    }
    fwrite(json, 1, len, stdout);
    fputc('\n', stdout);
    free(json);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The state directory made, checked, locked, and its report log open:
 * 0, or the exit code (logged). */
static int
open_state_dir(struct app *a)
{
    char err[512];

    /* A token anyone may read guards nothing: a setup error, refused
     * before anything is made. */
    if (status_read_token(a->cfg, &a->status_token, err, sizeof(err)) != 0) {
        log_error(NULL, "status.token_file: %s", err);
        return 2;
    }
    if (make_dirs(a->cfg->state_dir) != 0) {
        log_error(NULL, "cannot create state_dir %s: %s", a->cfg->state_dir,
                  strerror(errno));
        return 1;
    }
    /* A state_dir someone else can write to would let them plant the
     * reports reapd delivers: a setup error, refused before anything is
     * created in it. */
    if (report_state_dir_check(a->cfg->state_dir, err, sizeof(err)) != 0) {
        log_error(NULL, "%s", err);
        return 2;
    }
    a->lock_fd = lock_state_dir(a->cfg->state_dir);
    if (a->lock_fd < 0)
        return 1;
    a->rl = report_log_open(a->cfg->state_dir);
    if (a->rl == NULL) {
        log_error(NULL, "cannot open %s/reports.jsonl: %s", a->cfg->state_dir,
                  strerror(errno));
        return 1;
    }
    return 0;
}

/* The loop, systemd's notify socket, the engine's client, the reaper and
 * its store: 0 or -1 (logged). */
static int
open_core(struct app *a)
{
    char err[512];

    a->loop = loop_new();
    if (a->loop == NULL)
        return -1;
    a->sd = sdnotify_new(loop_base(a->loop), err, sizeof(err));
    if (a->sd == NULL && err[0] != '\0')
        log_error(NULL, "systemd notify: %s; not notifying", err);
    else if (a->sd != NULL)
        log_info(NULL, "systemd notify: on (watchdog every %llu ms)",
                 (unsigned long long)sdnotify_watchdog_usec(a->sd) / 2000u);
    a->docker = docker_new(a->loop, a->cfg->docker_socket,
                           (long)a->cfg->docker_request_timeout_ms,
                           (long)a->cfg->docker_reconnect_max_ms);
    if (a->docker == NULL)
        return -1;
    a->reaper = reaper_new(a->loop, a->docker, a->cfg, a->rl);
    if (a->reaper == NULL)
        return -1;
    if (store_open(a->cfg->state_dir, &a->store, err, sizeof(err)) !=
        STORE_OK) {
        log_error(NULL, "state: %s", err);
        return -1;
    }
    if (a->cfg->retention_max_db_bytes > 0 &&
        store_set_size_limit(a->store,
                             (uint64_t)a->cfg->retention_max_db_bytes,
                             NULL) != STORE_OK)
        log_warn(NULL, "state: cannot cap the database size: %s",
                 store_errmsg(a->store));
    reaper_set_store(a->reaper, a->store);
    log_info(NULL, "state: %s", store_path(a->store));
    return 0;
}

/* The outbox and the upstream, when upstream.url is set: 0 or -1. */
static int
open_delivery(struct app *a)
{
    struct upstream_opts uo;
    char *token = NULL, err[512];

    if (a->cfg->upstream_url == NULL) {
        log_info(NULL,
                 "upstream: none; reports stay in %s/reports.jsonl "
                 "and the state database",
                 a->cfg->state_dir);
        return 0;
    }
    a->outbox = outbox_new(a->loop, a->store, NULL);
    if (a->outbox == NULL || upstream_options(a->cfg, &uo, &token) != 0)
        return -1;
    if (upstream_new(a->loop, &uo, outbox_upstream_cbs(), a->outbox, &a->up,
                     err, sizeof(err)) != 0) {
        upstream_token_free(token);
        log_error(NULL, "upstream: %s", err);
        return -1;
    }
    upstream_token_free(token);
    outbox_set_upstream(a->outbox, a->up);
    reaper_on_report(a->reaper, on_report_made, a->outbox);
    log_info(NULL, "upstream: delivering reports (at least once)");
    return 0;
}

/* The containerd channel, unless Docker-only: 0 or -1. */
static int
open_containerd(struct app *a)
{
    const char *path = containerd_path(a->cfg);

    if (path == NULL)
        return 0;
    a->ctrd = ctrd_new(a->loop, path, a->cfg->containerd_namespace,
                       (long)a->cfg->docker_request_timeout_ms,
                       (long)a->cfg->docker_reconnect_max_ms, NULL);
    if (a->ctrd == NULL)
        return -1;
    reaper_set_containerd(a->reaper, a->ctrd);
    log_info(NULL,
             "mode: containerd channel on %s (namespace %s): true "
             "exit codes from TaskExit, task deletion confirmed, "
             "leaked tasks reaped per policy",
             path, a->cfg->containerd_namespace);
    return 0;
}

/* The status listener, the admin socket and the feed of durable
 * reports they wait on: 0 or -1. */
static int
open_listeners(struct app *a)
{
    a->status = status_new(a->loop, a->cfg->status_listen, a->reaper);
    if (a->status == NULL)
        return -1;
    status_set_store(a->status, a->store);
    /* The status endpoint owns the token from here on. */
    status_set_config(a->status, a->cfg, a->status_token);
    a->status_token = NULL;
    a->admin = status_new_admin(a->loop, a->cfg->admin_socket, a->reaper);
    if (a->admin == NULL)
        return -1;
    status_set_store(a->admin, a->store);
    status_set_config(a->admin, a->cfg, NULL);
    a->feed = feed_new(loop_base(a->loop));
    if (a->feed == NULL)
        return -1;
    store_on_report(a->store, on_report_durable, a->feed);
    status_set_feed(a->status, a->feed);
    status_set_feed(a->admin, a->feed);
    status_set_outbox(a->status, a->outbox);
    status_set_outbox(a->admin, a->outbox);
    status_set_upstream(a->status, a->up);
    return 0;
}

static int
add_signals(struct app *a)
{
    struct event_base *base = loop_base(a->loop);

    a->sigterm = evsignal_new(base, SIGTERM, on_stop, a);
    a->sigint = evsignal_new(base, SIGINT, on_stop, a);
    a->sighup = evsignal_new(base, SIGHUP, on_hup, a);
    if (a->sigterm == NULL || a->sigint == NULL || a->sighup == NULL ||
        event_add(a->sigterm, NULL) || event_add(a->sigint, NULL) ||
        event_add(a->sighup, NULL))
        return -1;
    return 0;
}

/* Everything main made, in the reverse order. */
static void
app_close(struct app *a)
{
    if (a->sigterm != NULL)
        event_free(a->sigterm);
    if (a->sigint != NULL)
        event_free(a->sigint);
    if (a->sighup != NULL)
        event_free(a->sighup);
    upstream_token_free(a->status_token);
    status_free(a->status);
    status_free(a->admin);
    if (a->store != NULL)
        store_on_report(a->store, NULL, NULL);
    feed_free(a->feed);
    reaper_free(a->reaper);
    sdnotify_free(a->sd);
    upstream_free(a->up);
    outbox_free(a->outbox);
    if (a->store != NULL && store_close(a->store) != STORE_OK)
        log_error(NULL, "state: closing the database failed");
    ctrd_free(a->ctrd);
    docker_free(a->docker);
    loop_free(a->loop);
    report_log_close(a->rl);
    if (a->lock_fd >= 0)
        close(a->lock_fd);
    config_free(a->cfg);
}

int
main(int argc, char **argv)
{
    struct app a;
    bool check = false, print = false;
    int result = 1;

    memset(&a, 0, sizeof(a));
    a.lock_fd = -1;
#if defined(__GLIBC__)
    /* glibc gives the top of the heap back past 128 KiB free, and an exit
     * frees about that much just before the next one takes it again: two
     * brk calls per exit, each with a TLB shootdown and page faults. A
     * relist's answer, the one big allocation, is mapped apart from the
     * heap (json.c), so nothing needs a trim. */
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
    result = parse_args(&a, argc, argv, &check, &print);
    if (result >= 0)
        return result;
    if (a.config_path == NULL && access(DEFAULT_CONFIG, F_OK) == 0)
        a.config_path = DEFAULT_CONFIG;
    if (load_config(a.config_path, &a.cfg) != 0)
        return 2;
    if (print || check) {
        result = print ? print_config(a.cfg) : 0;
        if (!print)
            printf("%s: OK\n", a.config_path ? a.config_path : "<default>");
        config_free(a.cfg);
        return result;
    }
    log_setup(a.log_level_forced ? a.log_level : a.cfg->log_level,
              a.log_format_forced ? a.log_format : a.cfg->log_format);
    log_detect_journal();
    signal(SIGPIPE, SIG_IGN);

    log_info(NULL, "reapd %s starting: node %s, config %s", REAPD_VERSION,
             a.cfg->node, a.config_path ? a.config_path : "<default>");
    raise_open_files_limit();
    result = open_state_dir(&a);
    if (result != 0)
        goto out;
    result = 1;
    if (open_core(&a) != 0 || open_delivery(&a) != 0 ||
        open_containerd(&a) != 0 || open_listeners(&a) != 0 ||
        add_signals(&a) != 0)
        goto out;
    reaper_on_ready(a.reaper, on_ready, &a);
    if (reaper_start(a.reaper) != 0)
        goto out;
    log_info(NULL, "watching %s", a.cfg->docker_socket);

    if (event_base_dispatch(loop_base(a.loop)) != 0) {
        log_error(NULL, "event loop failed");
        goto out;
    }
    log_info(NULL, "stopped");
    result = 0;
out:
    app_close(&a);
    return result;
}
