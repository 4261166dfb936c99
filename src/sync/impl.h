/*
 * sync/ internals shared by its files (export.c, apply.c, replica.c). Never included from
 * outside src/sync/ (tests/unit/sync excepted). Control thread only.
 */
#pragma once

#include "sync/sync.h"

#define NX_SYNC_FORMAT 1 /* the export document's "format": a replica refuses others */

/* The whole file into a ledger buffer (NX_OWNER_sync) of *len + 1 bytes, NUL-terminated.
 * 0, NX_ELIMIT (larger than max), -errno. */
int nx_sync_read_file(const char *path, size_t max, char **out, size_t *len);

/* Generation (16 hex digits) and ETag ("\"<sha256 hex>\"") of a document. */
void nx_sync_etag_of(const char *doc, size_t len, char gen[NX_SYNC_GEN_LEN],
		     char etag[NX_SYNC_ETAG_MAX]);
