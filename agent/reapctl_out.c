/*
 * reapctl_out — what reapctl writes; see reapctl_out.h.
 *
 * A document is written back out with yajl_gen from the tree json.h
 * built, never copied from reapd's bytes, so what reaches stdout is
 * always one well-formed line whatever reapd sent.
 */
#include "reapctl_out.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <yajl/yajl_gen.h>

static const struct json_limits answer_limits = {
    .max_bytes = CTL_BODY_MAX,
    .max_depth = 64,
    .max_items = 1u << 20,
    .max_string = CTL_BODY_MAX,
};

void
out_warn(const char *fmt, ...)
{
    va_list ap;

    fputs("reapctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void
out_tame(const char *s, size_t len, char *out, size_t outlen)
{
    size_t i;

    for (i = 0; i < len && i + 1 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];

        out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    out[i] = '\0';
}

/* ---- printing JSON --------------------------------------------------- */

/* Depth is bounded by answer_limits.max_depth. */
static yajl_gen_status
emit(yajl_gen g, const struct json_node *n)
{
    yajl_gen_status st = yajl_gen_status_ok;
    size_t i;

    if (n->key != NULL)
        st = yajl_gen_string(g, (const unsigned char *)n->key, n->key_len);
    if (st != yajl_gen_status_ok)
        return st;
    switch (n->type) {
    case JSON_NULL:
        return yajl_gen_null(g);
    case JSON_BOOL:
        return yajl_gen_bool(g, n->boolean);
    case JSON_NUMBER:
        return yajl_gen_number(g, n->str, n->len);
    case JSON_STRING:
        return yajl_gen_string(g, (const unsigned char *)n->str, n->len);
    case JSON_OBJECT:
    case JSON_ARRAY:
        st = n->type == JSON_OBJECT ? yajl_gen_map_open(g)
                                    : yajl_gen_array_open(g);
        for (i = 0; i < n->count && st == yajl_gen_status_ok; i++)
            st = emit(g, n->items[i]);
        if (st != yajl_gen_status_ok)
            return st;
        return n->type == JSON_OBJECT ? yajl_gen_map_close(g)
                                      : yajl_gen_array_close(g);
    }
    return yajl_gen_invalid_string;
}

int
out_json(const struct json_node *n, bool flush, char *err, size_t errlen)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    const unsigned char *text;
    size_t len;
    int result = -1;

    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (emit(g, n) != yajl_gen_status_ok ||
        yajl_gen_get_buf(g, &text, &len) != yajl_gen_status_ok) {
        snprintf(err, errlen, "cannot write reapd's answer out as JSON");
        goto out;
    }
    if (fwrite(text, 1, len, stdout) != len || putchar('\n') == EOF ||
        (flush && fflush(stdout) != 0)) {
        snprintf(err, errlen, "cannot write to stdout: %s", strerror(errno));
        goto out;
    }
    result = 0;
out:
    yajl_gen_free(g);
    return result;
}

int
out_doc(const char *cmd, const struct json_node *n, bool flush)
{
    char err[256];

    if (out_json(n, flush, err, sizeof(err)) == 0)
        return 0;
    out_warn("%s: %s", cmd, err);
    return CTL_EXIT_FAIL;
}

/* ---- reapd's answers ------------------------------------------------- */

struct json_node *
out_parse(const char *s, size_t len, char *err, size_t errlen)
{
    return json_parse(s, len, &answer_limits, 0, err, errlen, NULL);
}

struct json_node *
out_answer_json(const struct ctl *c, const char *cmd)
{
    struct json_node *root;
    const char *body;
    char err[256];
    size_t len;

    body = ctl_body(c, &len);
    root = out_parse(body, len, err, sizeof(err));
    if (root == NULL) {
        out_warn("%s: malformed answer from reapd (HTTP %ld): %s", cmd,
                 ctl_code(c), err);
        return NULL;
    }
    if (root->type != JSON_OBJECT) {
        out_warn("%s: malformed answer from reapd (HTTP %ld): not a JSON "
                 "object",
                 cmd, ctl_code(c));
        json_free(root);
        return NULL;
    }
    return root;
}

void
out_answer_message(const struct ctl *c, char *out, size_t outlen)
{
    struct json_node *root;
    const struct json_node *e;
    const char *body;
    size_t len;

    snprintf(out, outlen, "no message");
    body = ctl_body(c, &len);
    root = out_parse(body, len, NULL, 0);
    e = json_get(root, "error");
    if (json_string(e) != NULL)
        out_tame(e->str, e->len, out, outlen);
    json_free(root);
}

int
out_answer_error(const struct ctl *c, const char *cmd)
{
    char msg[OUT_MESSAGE_MAX];
    long code = ctl_code(c);

    out_answer_message(c, msg, sizeof(msg));
    if (code == 405 && !ctl_on_socket(c))
        out_warn("%s: reapd's status listener at %s is read-only; write "
                 "commands go through its admin socket (--socket PATH, "
                 "default " CTL_DEFAULT_SOCKET ")",
                 cmd, ctl_target(c));
    else if (code == 401 && ctl_token_file(c) != NULL)
        out_warn("%s: reapd at %s refused the token of %s: %s", cmd,
                 ctl_target(c), ctl_token_file(c), msg);
    else if (code == 401)
        /* The read API names containers: without a token the status
         * listener keeps it to itself (reapd says where to go). */
        out_warn("%s: the status listener at %s serves the read API only "
                 "with a token: --token-file FILE (reapd's "
                 "status.token_file), or the admin socket as root (--socket "
                 "PATH); reapd: %s",
                 cmd, ctl_target(c), msg);
    else
        out_warn("%s: reapd answered %ld: %s", cmd, code, msg);
    return CTL_EXIT_FAIL;
}

int
out_answer(const struct ctl *c, const char *cmd, enum ctl_xfer x)
{
    struct json_node *root;
    int rc;

    if (x == CTL_STOPPED)
        return CTL_EXIT_FAIL;
    if (x != CTL_ANSWER) {
        out_warn("%s: %s", cmd, ctl_error(c));
        return CTL_EXIT_FAIL;
    }
    if (ctl_code(c) != 200)
        return out_answer_error(c, cmd);
    root = out_answer_json(c, cmd);
    if (root == NULL)
        return CTL_EXIT_FAIL;
    rc = out_doc(cmd, root, false);
    json_free(root);
    return rc;
}
