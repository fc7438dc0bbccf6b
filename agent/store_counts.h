/*
 * store_counts — the report counts the store keeps as reports change, and
 * store_check (store.h). Private to the store's files (store_int.h).
 */
#ifndef REAPD_STORE_COUNTS_H
#define REAPD_STORE_COUNTS_H

#include "store_int.h"

/* At the opening: counts the reports by state (a scan, once) and reads
 * what store_counts says during a WAL copy (the oldest pending report,
 * the size). */
int store_counts_init(struct store *st);

#endif
