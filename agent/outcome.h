/*
 * outcome — the report of one container's exit and cleanup, made from its
 * record when the lifecycle says so (ACT_REPORT).
 *
 * It settles the report's id (from the exit's time, so a restart makes
 * the same one again), refuses one an earlier run already made under
 * another id, writes it to reports.jsonl and then the store (persist.h),
 * counts it in the metrics and hands it to the reaper's report callback
 * (delivery). Part of the reaper (reaper_int.h).
 */
#ifndef REAPD_OUTCOME_H
#define REAPD_OUTCOME_H

#include <stdbool.h>

struct rec;

/* Makes c's report (nothing when its policy does not report). false only
 * when it could not be made for want of memory, and then nothing of it
 * was written: make it again (outcome_report_later). */
bool outcome_report(struct rec *c);
/* Makes it again in a second; c is forgotten only after it
 * (c->forget_due). */
void outcome_report_later(struct rec *c);

#endif
