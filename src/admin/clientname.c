/*
 * Clients by name in the API: the name a row, a live event or a top-clients key is shown under
 * (`client_name`), and the rows a `client=` filter that is not an address selects.
 *
 * A client's name is the config's client that claims the row's client id or address (the same
 * longest-prefix rule as its policy: conf nx_conf_client_policy_id), else the PTR name of its
 * address from the forward zones (hooks.client_ptr: daemon/names.h, cached, looked up off the
 * DNS path; the first read of a new address may show none yet). Joined when the API answers,
 * not stored with the record, so the writer pays nothing and a renamed client shows under its
 * new name in old rows too. An address with neither has none (null).
 *
 * Threading: control thread (the config in effect is borrowed until the next reload).
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "admin/impl.h"

/* The address of a row's client text ("192.168.1.2", "fd00::1"), or false ("hidden"). */
static bool text_addr(const char *text, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (text && inet_pton(AF_INET, text, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		return true;
	}
	if (text && inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		return true;
	}
	return false;
}

bool nx_admin_client_is_addr(const char *text)
{
	struct sockaddr_storage ss;
	return text_addr(text, &ss);
}

/* The config's client that claims the row, or NULL. */
static const char *config_name(const struct nx_admin *a, const char *client,
			       const char *client_id)
{
	const struct nx_conf *c = nx_admin_conf(a);
	if (!c || !c->n_clients) {
		return NULL;
	}
	struct sockaddr_storage ss;
	bool addr = text_addr(client, &ss);
	if (!addr && !(client_id && *client_id)) {
		return NULL;
	}
	int idx = -1;
	nx_conf_client_policy_id(c, addr ? (const struct sockaddr *)&ss : NULL, client_id, NULL, NULL,
				 &idx);
	return idx >= 0 ? c->clients[idx].name : NULL;
}

const char *nx_admin_client_name(const struct nx_admin *a, const char *client,
				 const char *client_id)
{
	const char *n = config_name(a, client, client_id);
	if (!n && a->hooks.client_ptr && nx_admin_client_is_addr(client)) {
		n = a->hooks.client_ptr(a->hooks.ud, client);
	}
	return n;
}

bool nx_admin_client_ptr_named(const struct nx_admin *a, const char *name)
{
	return a->hooks.client_ptr_named && a->hooks.client_ptr_named(a->hooks.ud, name);
}

int nx_admin_client_index(const struct nx_admin *a, const char *name)
{
	const struct nx_conf *c = nx_admin_conf(a);
	for (size_t i = 0; c && name && i < c->n_clients; i++) {
		if (strcmp(c->clients[i].name, name) == 0) {
			return (int)i;
		}
	}
	return -1;
}

bool nx_admin_client_named(const char *client, const char *client_id, void *ud)
{
	const struct nx_admin_client_match *m = ud;
	const char *n = nx_admin_client_name(m->admin, client, client_id);
	return n && strcmp(n, m->name) == 0;
}

int nx_admin_client_name_set(const struct nx_admin *a, json_t *o)
{
	const char *name = nx_admin_client_name(a, json_string_value(json_object_get(o, "client")),
						json_string_value(json_object_get(o, "client_id")));
	return json_object_set_new(o, "client_name", name ? json_string(name) : json_null());
}
