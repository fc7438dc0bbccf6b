/*
 * store_wal — the WAL's checkpoints (store.h: store_checkpoint and the
 * rest); this header is the WAL hook store_open.c registers. Private to
 * the store's files (store_int.h).
 */
#ifndef REAPD_STORE_WAL_H
#define REAPD_STORE_WAL_H

#include <sqlite3.h>

/* SQLite's WAL hook (sqlite3_wal_hook), `arg` the struct store: counts
 * the pages in the WAL after each commit, and calls the callback of
 * store_on_wal once they pass its bound. */
int store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages);

#endif
