/*
 * Following a primary (src/sync/): GET /api/sync/export (what a replica pulls; conditional
 * on If-None-Match), GET /api/sync/replicas (who pulled, by token and address),
 * GET /api/sync/status and POST /api/sync/now (a replica's own pull, through the daemon's
 * hooks). Control thread only.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "admin/impl.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "sync/sync.h"

/* The peer's address as text ("" when MHD cannot say). */
static void peer_text(const struct nx_admin_req *req, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	out[0] = '\0';
	if (sa && sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
			  (socklen_t)cap);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			inet_ntop(AF_INET, a6->s6_addr + 12, out, (socklen_t)cap);
		} else {
			inet_ntop(AF_INET6, a6, out, (socklen_t)cap);
		}
	}
}

/* Remember a replica's export request (token requests only: a browser is no replica). */
static void note_replica(struct nx_admin_req *req, unsigned status, const char *gen)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_conf(a);
	if (req->via != NX_ADMIN_VIA_TOKEN || req->token < 0 || !c ||
	    (size_t)req->token >= c->n_admin_tokens) {
		return;
	}
	const char *name = c->admin_tokens[req->token].name;
	char addr[64];
	peer_text(req, addr, sizeof(addr));
	struct nx_admin_replica *slot = NULL, *free_slot = NULL, *oldest = NULL;
	for (size_t i = 0; i < NX_ADMIN_SYNC_REPLICAS && !slot; i++) {
		struct nx_admin_replica *r = &a->replicas[i];
		if (!r->used) {
			free_slot = free_slot ? free_slot : r;
		} else if (!strcmp(r->token, name) && !strcmp(r->address, addr)) {
			slot = r;
		} else if (!oldest || r->last_ms < oldest->last_ms) {
			oldest = r;
		}
	}
	if (!slot) {
		slot = free_slot;
		if (!slot) {
			a->ctr[NX_ADMIN_CTR_SYNC_REPLICAS_EVICTED]++;
			slot = oldest;
		}
		*slot = (struct nx_admin_replica){.used = true};
		snprintf(slot->token, sizeof(slot->token), "%s", name);
		snprintf(slot->address, sizeof(slot->address), "%s", addr);
	}
	slot->last_ms = nx_now_wall_ms();
	slot->status = status;
	snprintf(slot->generation, sizeof(slot->generation), "%s", gen ? gen : "");
	slot->pulls++;
}

static void export_free(void *cls)
{
	char *doc = cls;
	nx_sync_export_free(doc, strlen(doc)); /* JSON text: no NUL inside */
}

int nx_admin_handle_sync_export(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	if (!c) {
		return 0;
	}
	char *doc;
	size_t len;
	char gen[NX_SYNC_GEN_LEN], etag[NX_SYNC_ETAG_MAX], err[NX_SYNC_ERR_MAX];
	int rc = nx_sync_export(c, &doc, &len, gen, etag, err, sizeof(err));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "sync export refused: %s", err);
		note_replica(req, 500, NULL);
		return nx_admin_reply_error(req, 500, "export_failed", NULL, "%s", err);
	}
	const char *inm = nx_admin_req_header(req, MHD_HTTP_HEADER_IF_NONE_MATCH);
	bool same = inm && !strcmp(inm, etag);
	note_replica(req, same ? 304 : 200, gen);
	struct MHD_Response *r;
	if (same) {
		nx_sync_export_free(doc, len);
		r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer_with_free_callback_cls(len, doc, export_free,
									   doc);
		if (!r) {
			nx_sync_export_free(doc, len);
		} else if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						   "application/json") != MHD_YES) {
			MHD_destroy_response(r);
			r = NULL;
		}
	}
	if (r && (MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES ||
		  MHD_add_response_header(r, "X-Nxdns-Generation", gen) != MHD_YES)) {
		MHD_destroy_response(r);
		r = NULL;
	}
	return nx_admin_reply_response(req, same ? 304 : 200, r);
}

int nx_admin_handle_sync_replicas(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	json_t *list = json_array();
	for (size_t i = 0; list && i < NX_ADMIN_SYNC_REPLICAS; i++) {
		const struct nx_admin_replica *r = &a->replicas[i];
		if (r->used) {
			json_array_append_new(
			    list, json_pack("{s:s, s:s, s:I, s:i, s:s?, s:I}", "token", r->token,
					    "address", r->address, "last_sync",
					    (json_int_t)r->last_ms, "status", (int)r->status,
					    "generation", r->generation[0] ? r->generation : NULL,
					    "pulls", (json_int_t)r->pulls));
		}
	}
	return nx_admin_reply_json(req, 200, json_pack("{s:o}", "replicas", list));
}

int nx_admin_handle_sync_status(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	json_t *st = h->sync_status ? h->sync_status(h->ud)
				    : json_pack("{s:b, s:s}", "replica", 0, "result", "off");
	return nx_admin_reply_json(req, 200, st);
}

int nx_admin_handle_sync_now(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	int rc = h->sync_now ? h->sync_now(h->ud) : NX_ENOTFOUND;
	if (rc == NX_ENOTFOUND) {
		return nx_admin_reply_error(req, 404, "not_configured", NULL,
					    "this server follows no primary (sync.primary)");
	}
	if (rc == NX_ENOSLOT) {
		return nx_admin_reply_error(req, 409, "sync_running", NULL,
					    "a pull from the primary is running");
	}
	if (rc) {
		return nx_admin_reply_error(req, 500, "sync_failed", NULL, "%s", nx_strerror(rc));
	}
	return nx_admin_reply_json(req, 202, json_pack("{s:b}", "started", 1));
}
