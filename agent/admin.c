/*
 * admin — the admin socket's writes; see admin.h.
 */
#include "admin.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "httpd.h"
#include "jsonw.h"
#include "log.h"
#include "outbox.h"
#include "report.h"
#include "store.h"

/* Logs an operator's write, for the record of who changed what. */
static void admin_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
admin_log(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_info(NULL, "admin: %s", msg);
}

/* POST /v1/reports/{report_id}/requeue and /v1/reports/requeue?state=dead */
void
admin_serve_requeue(struct store *st, struct outbox *ob,
                    struct evhttp_request *req, const char *report_id)
{
    struct httpd_qparam p[] = {{.key = "state"}};
    struct evkeyvalq kv;
    uint64_t n = 0;
    char err[256];
    yajl_gen g = NULL;
    int rc;

    if (httpd_parse_query(req, &kv, p, 1, err, sizeof(err)) != 0)
        goto bad;
    if (report_id == NULL && (!p[0].set || strcmp(p[0].sval, "dead") != 0)) {
        snprintf(err, sizeof(err), "state=dead is required");
        goto bad;
    }
    if (report_id != NULL && p[0].set) {
        snprintf(err, sizeof(err), "no query parameters here");
        goto bad;
    }
    if (st == NULL) {
        httpd_send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (report_id != NULL) {
        rc = store_requeue(st, report_id, report_now_ms());
        n = rc == STORE_OK;
    } else {
        rc = store_requeue_dead(st, report_now_ms(), &n);
    }
    if (rc == STORE_NOT_FOUND) {
        httpd_send_error(req, 404, "Not Found", "no such report (or pruned)");
        goto out;
    }
    if (rc == STORE_CONFLICT) {
        httpd_send_error(req, 409, "Conflict",
                         "the report is delivered already");
        goto out;
    }
    if (rc < 0) {
        httpd_send_error(req, 500, "Internal Server Error", store_errmsg(st));
        goto out;
    }
    if (report_id != NULL)
        log_fields(LOG_LEVEL_INFO, NULL,
                   &(struct log_fields){.report_id = report_id},
                   "admin: report %s requeued", report_id);
    else
        admin_log("%llu dead letters requeued", (unsigned long long)n);
    outbox_kick(ob);
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        goto out;
    }
    yajl_gen_map_open(g);
    jw_key_int(g, "requeued", (long long)n);
    if (report_id != NULL) {
        jw_key_str(g, "report_id", report_id);
    }
    yajl_gen_map_close(g);
    httpd_send_json(req, 200, "OK", g);
    yajl_gen_free(g);
    goto out;
bad:
    httpd_send_error(req, 400, "Bad Request", err);
out:
    evhttp_clear_headers(&kv);
}
