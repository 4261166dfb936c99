/*
 * PUT /api/local-records?name&type[&value]: change one local record in one rewrite. The record
 * is named as DELETE names it (name and type, and the value when several records share them);
 * the body holds the members to change ({name?, type?, value?, ttl?}, the others stay). The
 * whole `local_records` value is written at once and the loader validates it, so a new record
 * it refuses leaves the old one (400 invalid_setting, key local_records, the file unchanged),
 * which an add and a delete from the client cannot promise.
 *
 * The list written is the one the file holds (read with libfyaml, as written: the order and
 * spelling of the other records stay), since the parsed config keeps records in wire form.
 * The record is found in it by comparing texts as the loader reads them: names without case or
 * a trailing dot, addresses as addresses, MX/SRV numbers as numbers. The answer is the GET view.
 *
 * Threading: control thread; the file read and the rewrite's fsync block it briefly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libfyaml.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/log.h"

#define VALUE_TOKENS_MAX 4  /* SRV "PRIORITY WEIGHT PORT HOST" has the most */
#define RECORD_TEXT_MAX 300 /* "TYPE name" for the log line: a name is <= 253 bytes */

/* `local_records` as the file writes it, as JSON (a new reference): [] when the file has no
 * such list, NULL when it cannot be read or emitted (the caller says so: nothing to edit). */
static json_t *locals_written(const struct nx_conf *c)
{
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS};
	struct fy_document *doc = fy_document_build_from_file(&pc, c->path);
	if (!doc) {
		return NULL;
	}
	struct fy_node *root = fy_document_root(doc);
	struct fy_node *list = root && fy_node_is_mapping(root)
				   ? fy_node_mapping_lookup_by_string(root, "local_records", 13)
				   : NULL;
	if (!list || !fy_node_is_sequence(list)) {
		fy_document_destroy(doc);
		return json_array();
	}
	char *text = fy_emit_node_to_string(list, FYECF_MODE_JSON_TP | FYECF_NO_ENDING_NEWLINE);
	fy_document_destroy(doc);
	json_t *out = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	if (out && !json_is_array(out)) {
		json_decref(out);
		out = NULL;
	}
	return out;
}

/* Host names as the loader compares them: no case, no trailing dot. */
static bool same_name(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	la -= la > 1 && a[la - 1] == '.';
	lb -= lb > 1 && b[lb - 1] == '.';
	return la == lb && !strncasecmp(a, b, la);
}

/* Split on blanks into at most VALUE_TOKENS_MAX tokens (copied into buf); -1 past that. */
static int tokens(const char *s, char *buf, size_t cap, char *tok[VALUE_TOKENS_MAX])
{
	snprintf(buf, cap, "%s", s);
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		if (n == VALUE_TOKENS_MAX) {
			return -1;
		}
		tok[n++] = t;
	}
	return n;
}

/* Do two value texts of one record type say the same thing? */
static bool same_value(const char *type, const char *a, const char *b)
{
	uint8_t x[16], y[16];
	if (!strcasecmp(type, "A") || !strcasecmp(type, "AAAA")) {
		int af = !strcasecmp(type, "A") ? AF_INET : AF_INET6;
		return inet_pton(af, a, x) == 1 && inet_pton(af, b, y) == 1 &&
		       !memcmp(x, y, af == AF_INET ? 4 : 16);
	}
	if (!strcasecmp(type, "CNAME") || !strcasecmp(type, "PTR")) {
		return same_name(a, b);
	}
	if (!strcasecmp(type, "MX") || !strcasecmp(type, "SRV")) {
		/* numbers, then a host name */
		char ba[512], bb[512];
		char *ta[VALUE_TOKENS_MAX], *tb[VALUE_TOKENS_MAX];
		int na = tokens(a, ba, sizeof(ba), ta), nb = tokens(b, bb, sizeof(bb), tb);
		if (na < 2 || na != nb || !same_name(ta[na - 1], tb[nb - 1])) {
			return false;
		}
		for (int i = 0; i < na - 1; i++) {
			char *ea, *eb;
			unsigned long va = strtoul(ta[i], &ea, 10), vb = strtoul(tb[i], &eb, 10);
			if (*ea || *eb || va != vb) {
				return false;
			}
		}
		return true;
	}
	return !strcmp(a, b); /* TXT, CAA: the text is the value */
}

static const char *member(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

int nx_admin_handle_locals_edit(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"name", JSON_STRING, false},
						       {"type", JSON_STRING, false},
						       {"value", JSON_STRING, false},
						       {"ttl", JSON_INTEGER, false},
						       {NULL}};
	const struct nx_conf *c = nx_admin_need_conf(req);
	if (!c) {
		return 0;
	}
	if (!c->path || c->path[0] == '<' || !req->admin->hooks.reload) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL,
					    "the server cannot rewrite its configuration file");
	}
	const char *name = nx_admin_req_arg(req, "name");
	const char *type = nx_admin_req_arg(req, "type");
	const char *value = nx_admin_req_arg(req, "value");
	if (!name || !*name) {
		return nx_admin_reply_error(
		    req, 400, "bad_request", "name",
		    "name the record: PUT /api/local-records?name&type[&value]");
	}
	if (!type || !*type) {
		return nx_admin_reply_error(req, 400, "bad_request", "type",
					    "name the record's type: ?name&type[&value]");
	}
	json_t *v[4];
	json_t *body = nx_admin_req_json(req, fields, v);
	if (!body) {
		return 0;
	}
	int rc = 0;
	json_t *list = locals_written(c);
	if (!list) {
		nx_log(NX_LOG_WARN, "admin", "cannot read local_records from %s", c->path);
		rc = nx_admin_reply_error(req, 500, "config_unreadable", NULL,
					  "cannot read local_records from %s", c->path);
		goto out;
	}
	ssize_t at = -1;
	size_t hits = 0, i;
	json_t *e;
	json_array_foreach(list, i, e)
	{
		const char *en = member(e, "name"), *et = member(e, "type"),
			   *ev = member(e, "value");
		if (en && et && same_name(en, name) && !strcasecmp(et, type) &&
		    (!value || (ev && same_value(type, ev, value)))) {
			at = at < 0 ? (ssize_t)i : at;
			hits++;
		}
	}
	if (!hits) {
		rc = nx_admin_reply_error(req, 404, "not_found", NULL, "no %s record of %s%s%s",
					  type, name, value ? " with value " : "",
					  value ? value : "");
		goto out;
	}
	if (hits > 1) {
		rc = nx_admin_reply_error(req, 409, "ambiguous", "value",
					  "%zu %s records of %s: name the one to change with "
					  "&value=",
					  hits, type, name);
		goto out;
	}
	json_t *entry = json_array_get(list, (size_t)at);
	char was[RECORD_TEXT_MAX];
	snprintf(was, sizeof(was), "%s %s", member(entry, "type"), member(entry, "name"));
	const char *k;
	json_t *x;
	json_object_foreach(body, k, x)
	{
		if (json_object_set(entry, k, x)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	const char *key = "local_records";
	rc = nx_admin_config_set(req, &key, &list, 1, NULL);
	if (rc == 0) {
		nx_log(NX_LOG_INFO, "admin", "local record %s changed through the API", was);
		rc = nx_admin_handle_locals_get(req);
	} else {
		rc = rc > 0 ? 0 : rc;
	}
out:
	json_decref(list);
	json_decref(body);
	return rc;
}
