/*
 * The web admin's files, embedded at build time (scripts/ui-embed generates ui_assets.c from
 * the Vite build of ui/) and served by the admin listener from .rodata: no file system, no
 * allocation per request, one binary to deploy.
 *
 * Threading: the table is immutable; nx_admin_handle_static runs on the control thread like
 * every admin handler. Ownership: everything is static storage (file-backed pages of the
 * binary, in /api/memory's `code`, not charged to the ledger).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nx_admin_req;

/* One embedded file. Plain value: every field is static storage. */
struct nx_admin_asset {
	const char *path;	  /* URL path: "/" (index.html) or "/assets/<name>-<hash>.<ext>" */
	const char *content_type; /* full Content-Type value */
	const uint8_t *raw;	  /* the file as built */
	size_t raw_len;
	const uint8_t *gz; /* gzip -9 of raw, NULL when that is not smaller */
	size_t gz_len;
	const char *etag;    /* strong ETag of raw, quoted */
	const char *etag_gz; /* strong ETag of the gzip coding (differs per coding), quoted */
	bool immutable;	     /* content-hashed name: cached for a year, never revalidated */
};

/* The table (generated), terminated by a row whose path is NULL; nx_admin_n_assets rows. */
extern const struct nx_admin_asset nx_admin_assets[];
extern const size_t nx_admin_n_assets;

/* The asset served at `path`, or NULL. */
const struct nx_admin_asset *nx_admin_asset_find(const char *path);

/*
 * Whether an Accept-Encoding value accepts gzip: a "gzip" (or "x-gzip", or "*") coding whose
 * q is not 0. NULL (no header) is false: without the header we send the identity coding.
 */
bool nx_admin_accepts_gzip(const char *accept_encoding);

/* Whether an If-None-Match value matches `etag` (weak comparison, RFC 9110 13.1.2; "*"). */
bool nx_admin_etag_matches(const char *if_none_match, const char *etag);

/* Route handler for GET/HEAD "/" and "/assets/": 200 or 304, else 404 JSON. */
int nx_admin_handle_static(struct nx_admin_req *req);
