/*
 * A replica that follows a primary (sync.primary): the export document a primary serves, the
 * replica's pull (conditional GET on an interval and on demand) and its apply (the same check
 * as a reload, the last good config kept on any error).
 *
 * What travels: the synced keys (nx_sync_key_synced: every filter.* key, groups, clients,
 * local_records), each as the YAML flow text the primary's file holds (its default when the
 * file omits it), and the content of every `path` source. What stays the replica's own:
 * everything else. Listeners, admin, tls, state_dir and sync name this host; upstreams,
 * access, cache, logging and query_budget stay too, since a second resolver is often at
 * another site (its own ISP resolver, its own LAN's forward zones, its own ACL ranges) or
 * on smaller hardware (cache size, permits).
 *
 * Document (JSON, format 1): {"format": 1, "keys": {KEY: YAML-flow-text, ...},
 * "files": {SOURCE-NAME: base64 of the file, ...}}. Its SHA-256 is the ETag and, cut to 16
 * hex digits, the "generation" a replica reports: equal configs give equal generations, on
 * any primary restart.
 *
 * Threading: everything here runs on the control thread (the replica's transfer is libcurl
 * multi on the control loop, src/filter/fetch.h): nothing touches the DNS path; applying
 * rewrites the file and reloads as an API edit does.
 * Memory: the document while it is built, parsed or applied is charged to NX_OWNER_sync and
 * released before the call returns; struct nx_sync (a few KiB of status) too, while it lives.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "conf/conf.h"

/* Bytes of one `path` source's content in an export: a hand-kept list is kilobytes (1 MiB is
 * ~40k names); the big lists are URL sources, which each replica downloads itself. */
#define NX_SYNC_FILE_MAX (1u * 1024 * 1024)
/* Bytes of a whole export document (base64 files + keys): the replica's download cap. Building
 * or reading one holds it about three times over for a moment (base64, JSON, its text), so
 * this keeps the transient peak near 12 MiB at worst. */
#define NX_SYNC_EXPORT_MAX (4u * 1024 * 1024)
/* A pull's whole-transfer timeout: the primary answers from memory. */
#define NX_SYNC_TIMEOUT_MS 30000u
#define NX_SYNC_GEN_LEN 17  /* 16 hex digits + NUL */
#define NX_SYNC_ETAG_MAX 80 /* "\"" + 64 hex digits + "\"" + NUL, with room */
#define NX_SYNC_ERR_MAX 512 /* bytes of the last error the status shows */
#define NX_SYNC_DIR "sync"  /* under state_dir: the export download and path sources */
#define NX_SYNC_EXPORT_PATH "/api/sync/export"

/* Is the dotted schema key one a replica takes from its primary? */
bool nx_sync_key_synced(const char *key);

/*
 * The admin route check: on a replica, a change through (method, path, body) would edit a
 * synced key. Returns the key (static text) it would edit, or NULL when the request may run
 * (reads, refreshes, pause, settings of host keys). body (NUL-terminated, may be NULL) is
 * looked at only for PUT /api/settings.
 */
const char *nx_sync_route_synced(const char *method, const char *path, const char *body);

/*
 * The primary's export document for config c: its file c->path is loaded again (keys and path
 * sources' files as the file says, anchors resolved away, comments dropped). 0 and *out
 * (NUL-terminated, *len bytes; release with nx_sync_export_free) plus gen and etag; or
 * NX_ECONFIG (the file does not load or cannot be parsed), NX_ELIMIT (a path source over NX_SYNC_FILE_MAX or the document over
 * NX_SYNC_EXPORT_MAX), -errno (a file cannot be read), -ENOMEM; err says which.
 */
int nx_sync_export(const struct nx_conf *c, char **out, size_t *len, char gen[NX_SYNC_GEN_LEN],
		   char etag[NX_SYNC_ETAG_MAX], char *err, size_t errlen);
void nx_sync_export_free(char *doc, size_t len);

/*
 * Write an export document into the replica's config file c->path: check the document
 * (format, every synced key present, string values, each path source's content decodable
 * and within NX_SYNC_FILE_MAX), write path sources' content under state_dir/sync/ (named by
 * content hash, so the running config's files are never overwritten), point those sources
 * there, then nx_conf_rewrite_many (the loader's check; a refused result writes nothing).
 * 0: the file holds the primary's keys (the caller reloads); NX_EMALFORMED (a document the
 * replica cannot read), NX_ECONFIG (the loader refused it), -errno; err says why.
 */
int nx_sync_apply(const struct nx_conf *c, const char *doc, size_t len, char *err, size_t errlen);

/* Remove files under state_dir/sync/ that no source of c points at (after an apply). */
void nx_sync_prune(const struct nx_conf *c);

/* ---- the replica's pull ------------------------------------------------------------------ */

struct nx_sync;

struct nx_sync_hooks {
	/* The config in effect (borrowed until the next reload). */
	const struct nx_conf *(*conf)(void *ud);
	/* Reload the file as SIGHUP does: 0 once in effect, or < 0 with err. */
	int (*reload)(void *ud, char *err, size_t errlen);
	void *ud; /* borrowed: outlives the sync */
};

/*
 * Start following conf()->sync_primary on `loop` (the control loop): the first pull at once,
 * then every sync.interval. *out is owned by the caller (nx_sync_free). 0, -ENOMEM, -EIO.
 * Without sync.primary nothing is started and *out is still made (status says "off").
 */
int nx_sync_new(uv_loop_t *loop, const struct nx_sync_hooks *hooks, struct nx_sync **out);

/* Cancel a running pull and close the handles (memory freed in their close callbacks: run
 * the loop once more before uv_loop_close). NULL is a no-op. */
void nx_sync_free(struct nx_sync *s);

/* After a reload: re-arm the timer from sync.interval, start or stop following. */
void nx_sync_reconfigure(struct nx_sync *s);

/* Pull now. 0 started; NX_ENOSLOT a pull is running; NX_ENOTFOUND not a replica. */
int nx_sync_now(struct nx_sync *s);

/* GET /api/sync/status: {replica, primary, interval, running, last_attempt, last_sync,
 * result, error, generation, etag, pulls, applied}. New reference, NULL on no memory. */
json_t *nx_sync_status(const struct nx_sync *s);
