/*
 * fuzz — helpers shared by the fuzz targets; see fuzz.h.
 */
#include "fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "containerd.h"
#include "docker.h"
#include "log.h"

void
fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    fflush(stderr);
    abort();
}

uint8_t
fuzz_byte(struct fuzz_in *in)
{
    uint8_t b;

    if (in->n == 0)
        return 0;
    b = in->p[0];
    in->p++;
    in->n--;
    return b;
}

void
fuzz_chunks_init(struct fuzz_chunks *c, struct fuzz_in *in, unsigned count)
{
    unsigned i;

    memset(c, 0, sizeof(*c));
    for (i = 0; i < count && i < FUZZ_MAX_CHUNKS && in->n > 0; i++)
        c->sizes[c->count++] = (size_t)fuzz_byte(in) + 1;
}

size_t
fuzz_chunks_next(struct fuzz_chunks *c, size_t left)
{
    size_t n;

    if (c->count == 0)
        return left;
    n = c->sizes[c->next];
    c->next = (c->next + 1) % c->count;
    return n < left ? n : left;
}

void
fuzz_quiet_logs(void)
{
    static int done;
    int fd;

    if (done)
        return;
    done = 1;
    fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0)
        log_set_fd(fd);
    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_TEXT);
}

static char tmpdir[256];

/* Removes the private directory and the files in it (it has no
 * subdirectories). */
static void
tmpdir_remove(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char path[512];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(tmpdir);
}

const char *
fuzz_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    struct stat st;

    if (tmpdir[0] != '\0')
        return tmpdir;
    if (base == NULL || base[0] == '\0')
        base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
                       access("/dev/shm", W_OK) == 0
                   ? "/dev/shm"
                   : "/tmp";
    snprintf(tmpdir, sizeof(tmpdir), "%s/reapd-fuzz-XXXXXX", base);
    if (mkdtemp(tmpdir) == NULL) {
        perror(tmpdir);
        abort();
    }
    atexit(tmpdir_remove);
    return tmpdir;
}

uint64_t
fuzz_hash(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

bool
fuzz_is_hex(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

/* A time as docker.h hands it out: absent, or set and not Go's zero. */
static void
check_time(const char *t)
{
    if (t == NULL)
        return;
    FUZZ_CHECK(t[0] != '\0');
    FUZZ_CHECK(strncmp(t, "0001-01-01", 10) != 0);
}

void
fuzz_check_container(const struct docker_container *c, bool inspect)
{
    size_t i, bytes = 0;

    FUZZ_CHECK(c != NULL);
    FUZZ_CHECK(fuzz_is_hex(c->id, 64));
    FUZZ_CHECK(docker_valid_id(c->id));
    FUZZ_CHECK((unsigned)c->state.run <= LC_RUN_DEAD);
    if (c->name != NULL)
        FUZZ_CHECK(strlen(c->name) <= LIMIT_NAME_BYTES);
    if (c->image != NULL)
        FUZZ_CHECK(strlen(c->image) <= LIMIT_IMAGE_BYTES);
    /* No policy names a label here, so every label shares the limits. */
    FUZZ_CHECK(c->nlabels <= LIMIT_LABELS);
    FUZZ_CHECK(c->nlabels == 0 || c->labels != NULL);
    for (i = 0; i < c->nlabels; i++) {
        const struct policy_label *l = &c->labels[i];

        FUZZ_CHECK(l->key != NULL && l->value != NULL);
        FUZZ_CHECK(strlen(l->key) <= LIMIT_LABEL_KEY);
        FUZZ_CHECK(strlen(l->value) <= LIMIT_LABEL_VALUE);
        bytes += strlen(l->key) + strlen(l->value);
    }
    FUZZ_CHECK(bytes <= LIMIT_LABEL_BYTES);
    check_time(c->started_at);
    check_time(c->finished_at);
    if (inspect)
        FUZZ_CHECK(c->state.finished == (c->finished_at != NULL));
    else
        FUZZ_CHECK(!c->state.has_exit_code);
}

void
fuzz_check_ctrd_id(const char *s, bool may_be_empty)
{
    size_t i, n;

    FUZZ_CHECK(s != NULL);
    n = strlen(s);
    FUZZ_CHECK(n <= 128);
    FUZZ_CHECK(may_be_empty || n > 0);
    for (i = 0; i < n; i++)
        FUZZ_CHECK(s[i] > 0x20 && s[i] < 0x7f);
}

void
fuzz_check_task(const struct ctrd_task *t)
{
    FUZZ_CHECK(t != NULL);
    fuzz_check_ctrd_id(t->container_id, false);
    fuzz_check_ctrd_id(t->id, true);
    FUZZ_CHECK((unsigned)t->status <= CTRD_TASK_PAUSING);
    FUZZ_CHECK(t->exited_at_ns >= 0);
}

void
fuzz_ctrd_envelope(const uint8_t *msg, size_t len)
{
    static const struct ctrd_event zero;
    struct ctrd_decoded *d = (struct ctrd_decoded *)&d, *d2 = NULL;
    struct ctrd_event ev, ev2;
    int rc;

    rc = ctrd_decode_envelope(msg, len, &d, &ev);
    FUZZ_CHECK(rc >= -1 && rc <= 1);
    FUZZ_CHECK(ctrd_decode_envelope(msg, len, &d2, &ev2) == rc);
    if (rc != 0) {
        FUZZ_CHECK(d == NULL && d2 == NULL);
        FUZZ_CHECK(memcmp(&ev, &zero, sizeof(ev)) == 0);
        return;
    }
    FUZZ_CHECK(d != NULL && d2 != NULL);
    FUZZ_CHECK(ev.kind == CTRD_EV_TASK_EXIT || ev.kind == CTRD_EV_TASK_DELETE);
    fuzz_check_ctrd_id(ev.container_id, false);
    fuzz_check_ctrd_id(ev.id, true);
    FUZZ_CHECK(ev.exited_at_ns >= 0 && ev.timestamp_ns >= 0);
    FUZZ_CHECK(ev.kind == ev2.kind && ev.pid == ev2.pid &&
               ev.exit_status == ev2.exit_status &&
               ev.exited_at_ns == ev2.exited_at_ns &&
               ev.timestamp_ns == ev2.timestamp_ns);
    FUZZ_CHECK(strcmp(ev.container_id, ev2.container_id) == 0);
    FUZZ_CHECK(strcmp(ev.id, ev2.id) == 0);
    ctrd_decoded_free(d);
    ctrd_decoded_free(d2);
}

void
fuzz_ctrd_list(const uint8_t *msg, size_t len)
{
    struct ctrd_decoded *d = (struct ctrd_decoded *)&d;
    const struct ctrd_task *ts = (const struct ctrd_task *)&ts;
    size_t n = 1, i;

    if (ctrd_decode_list(msg, len, &d, &ts, &n) != 0) {
        FUZZ_CHECK(d == NULL && ts == NULL && n == 0);
        return;
    }
    FUZZ_CHECK(d != NULL);
    /* Each task takes at least the two bytes of a field header. */
    FUZZ_CHECK(n <= len / 2);
    FUZZ_CHECK(n == 0 || ts != NULL);
    for (i = 0; i < n; i++)
        fuzz_check_task(&ts[i]);
    ctrd_decoded_free(d);
}

void
fuzz_ctrd_get(const uint8_t *msg, size_t len)
{
    struct ctrd_decoded *d = (struct ctrd_decoded *)&d;
    const struct ctrd_task *t = (const struct ctrd_task *)&t;

    if (ctrd_decode_get(msg, len, &d, &t) != 0) {
        FUZZ_CHECK(d == NULL && t == NULL);
        return;
    }
    FUZZ_CHECK(d != NULL);
    fuzz_check_task(t);
    ctrd_decoded_free(d);
}
