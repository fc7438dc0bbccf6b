/*
 * admin — the writes of the admin socket: a report's delivery started
 * over (POST /v1/reports/{report_id}/requeue) and every dead letter's at
 * once (POST /v1/reports/requeue?state=dead). Each is logged ("admin:
 * ..."), for the record of who changed what, and the outbox is woken to
 * deliver at once.
 *
 * Only the router (status.c) calls these, for the admin socket alone;
 * the socket's mode (0600) is the access control. Its other POSTs,
 * drain and audit, are waits: readapi.h.
 */
#ifndef REAPD_ADMIN_H
#define REAPD_ADMIN_H

struct evhttp_request;
struct outbox;
struct store;

/*
 * Requeues report `report_id`, or with NULL every dead letter (the query
 * must then say state=dead), in `st` (borrowed; NULL: 503), and kicks
 * `ob` (borrowed; NULL without an upstream). Answers `req`: 200 with how
 * many were requeued, 404 for an unknown or pruned report, 409 for a
 * delivered one, 400 for a query it does not take.
 */
void admin_serve_requeue(struct store *st, struct outbox *ob,
                         struct evhttp_request *req, const char *report_id);

#endif
