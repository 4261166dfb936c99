/*
 * pgsink internals shared by pq.c, schema.c and writer.c. Not included from outside
 * src/pgsink/.
 */
#pragma once

#include <libpq-fe.h> /* types only: libpq is dlopen'ed (pq.c), never linked */
#include <stdbool.h>
#include <stdint.h>

#include "pgsink/pgsink.h"

/* The libpq functions the sink calls, resolved with dlsym. One list: the struct, the loader
 * and the error naming the missing symbol come from it. */
#define NX_PQ_FUNCS(X)                                                                             \
	X(PQconnectdbParams, PGconn *, (const char *const *, const char *const *, int))            \
	X(PQstatus, ConnStatusType, (const PGconn *))                                              \
	X(PQerrorMessage, char *, (const PGconn *))                                                \
	X(PQfinish, void, (PGconn *))                                                              \
	X(PQexec, PGresult *, (PGconn *, const char *))                                            \
	X(PQresultStatus, ExecStatusType, (const PGresult *))                                      \
	X(PQresultErrorMessage, char *, (const PGresult *))                                        \
	X(PQclear, void, (PGresult *))                                                             \
	X(PQntuples, int, (const PGresult *))                                                      \
	X(PQgetvalue, char *, (const PGresult *, int, int))                                        \
	X(PQputCopyData, int, (PGconn *, const char *, int))                                       \
	X(PQputCopyEnd, int, (PGconn *, const char *))                                             \
	X(PQgetResult, PGresult *, (PGconn *))

struct nx_pq {
#define NX_PQ_FIELD(name, ret, args) ret(*name) args;
	NX_PQ_FUNCS(NX_PQ_FIELD)
#undef NX_PQ_FIELD
};

/* pq.c: dlopen soname and resolve every function. 0 or -ENOENT with why filled. */
int nx_pq_load(struct nx_pq *pq, const char *soname, char *why, size_t cap);

/* schema.c (writer thread): run `sql` and expect no rows or rows; 0, or -1 with the server's
 * message in err. */
int nx_pg_exec(const struct nx_pq *pq, PGconn *c, const char *sql, char *err, size_t cap);
/* Migrate to NX_PGSINK_SCHEMA_VERSION under an advisory lock. 0, or -1 with err (a newer
 * schema, a log_entries nxdns did not make, a refused statement). */
int nx_pg_migrate(const struct nx_pq *pq, PGconn *c, char *err, size_t cap);
/* Day partitions for [now - 1 day, now + 2 days] (UTC), then retention (retention_days > 0):
 * drop the partitions that end before now - retention_days, delete older rows of the default
 * partition. Returns the partitions dropped, or -1 with err. */
int nx_pg_partitions(const struct nx_pq *pq, PGconn *c, int64_t now_ms, unsigned retention_days,
		     char *err, size_t cap);
