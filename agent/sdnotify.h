/*
 * sdnotify — systemd's service notification protocol (sd_notify(3)):
 * READY=1 once reapd has reconciled with the engine, RELOADING=1 and
 * READY=1 around a SIGHUP, STOPPING=1, STATUS= lines, and WATCHDOG=1
 * from a loop timer, so that a loop that stops turning stops the pings
 * and systemd restarts reapd (WatchdogSec= in the unit).
 *
 * The protocol is one datagram per message to the unix socket named by
 * NOTIFY_SOCKET; reapd speaks it itself rather than link libsystemd for
 * one sendto (docs/design.md, "Dependencies"). Sends never block: a
 * message the socket cannot take now is dropped and counted, since a
 * notification waiting for systemd must not hold the loop.
 */
#ifndef REAPD_SDNOTIFY_H
#define REAPD_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct sdnotify;

/*
 * From the environment: NOTIFY_SOCKET (an absolute path, or "@name" for
 * an abstract socket), WATCHDOG_USEC and WATCHDOG_PID (the watchdog is
 * reapd's only when WATCHDOG_PID is unset or reapd's own pid). Returns
 * NULL when NOTIFY_SOCKET is unset, or on an error, which is written to
 * `err` (size `errlen`; "" when simply unset). The caller owns the
 * result (sdnotify_free). The watchdog pings start at once, every half
 * of WATCHDOG_USEC, on `base`.
 */
struct sdnotify *sdnotify_new(struct event_base *base, char *err,
                              size_t errlen);
/* NULL is fine. Stops the pings. */
void sdnotify_free(struct sdnotify *n);

/* Sends `msg` (newline-separated assignments) as one datagram. 0, or -1
 * when it could not be sent (counted; see sdnotify_dropped). A NULL `n`
 * (not under systemd) is 0. */
int sdnotify_send(struct sdnotify *n, const char *msg);

/* READY=1 with a STATUS= line (the first time only READY=1 matters to
 * systemd; again after a reload it ends RELOADING=1). */
int sdnotify_ready(struct sdnotify *n, const char *status);
/* RELOADING=1 with MONOTONIC_USEC= (what systemd 253+ asks with it). */
int sdnotify_reloading(struct sdnotify *n);
int sdnotify_stopping(struct sdnotify *n);
/* STATUS=<status> alone; a newline in `status` is sent as a space. */
int sdnotify_status(struct sdnotify *n, const char *status);

/* The watchdog interval systemd asked for, in microseconds (0: none). */
uint64_t sdnotify_watchdog_usec(const struct sdnotify *n);
/* Messages sent and dropped (the socket would have blocked, or refused). */
uint64_t sdnotify_sent(const struct sdnotify *n);
uint64_t sdnotify_dropped(const struct sdnotify *n);

#endif
