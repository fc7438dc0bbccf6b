/*
 * store_schema — the SQL of reapd.db: the migrations that build its
 * schema, version by version, and the text of every statement the store
 * prepares. Data only; store_open.c runs the migrations and prepares the
 * statements. Private to the store's files (store_int.h).
 */
#ifndef REAPD_STORE_SCHEMA_H
#define REAPD_STORE_SCHEMA_H

#include "store_int.h"

/* store_schema_migrations[v] takes user_version v to v + 1. */
extern const char *const store_schema_migrations[STORE_SCHEMA_VERSION];

/* The SQL of statement `id`, for each enum stmt_id. */
extern const char *const store_schema_sql[S_COUNT];

#endif
