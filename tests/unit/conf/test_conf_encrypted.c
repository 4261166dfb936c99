/*
 * The server side of encrypted DNS: listener.dot / doh and their limits, the tls section,
 * access.admit_client_ids, and clients named by client id (id:<client-id>) with the policy
 * lookups that take one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <unistd.h>

#include "helpers.h"

static void listener_defaults(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("");
	assert_int_equal(c->n_listen_dot, 0); /* nothing listens unless asked */
	assert_null(c->listen_dot);
	assert_int_equal(c->n_listen_doh, 0);
	assert_null(c->listen_doh);
	assert_int_equal(c->tls_handshake_timeout_ms, 5000);
	assert_int_equal(c->doh_max_streams, 100);
	assert_int_equal(c->permit_wait_ms, 2000);
	assert_null(c->tls_cert);
	assert_null(c->tls_key);
	assert_null(c->tls_server_name);
	assert_false(c->admin_tls);
	assert_false(c->admit_client_ids);
	nx_conf_free(c);
}

static void listener_values(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("listener:\n"
				    "  dns: [\"127.0.0.1:53\"]\n"
				    "  dot: [\"127.0.0.1\", \"[::1]:8853\"]\n"
				    "  doh: [\"127.0.0.1\"]\n"
				    "  tls_handshake_timeout_ms: 100\n"
				    "  doh_max_streams: 1000\n"
				    "  permit_wait_ms: 0\n");
	assert_int_equal(c->n_listen_dot, 2);
	assert_string_equal(c->listen_dot[0].text, "127.0.0.1");
	const struct sockaddr_in *s = (const void *)&c->listen_dot[0].ss;
	assert_int_equal(ntohs(s->sin_port), 853);
	const struct sockaddr_in6 *s6 = (const void *)&c->listen_dot[1].ss;
	assert_int_equal(ntohs(s6->sin6_port), 8853);
	assert_int_equal(c->n_listen_doh, 1);
	s = (const void *)&c->listen_doh[0].ss;
	assert_int_equal(ntohs(s->sin_port), 443);
	assert_int_equal(c->tls_handshake_timeout_ms, 100);
	assert_int_equal(c->doh_max_streams, 1000);
	assert_int_equal(c->permit_wait_ms, 0);
	nx_conf_free(c);
	/* one address on several listeners is fine when the ports differ */
	c = load_ok("listener:\n  dns: [\"0.0.0.0:53\"]\n  dot: [\"0.0.0.0\"]\n  doh: "
		    "[\"0.0.0.0\"]\n");
	nx_conf_free(c);
}

static void listener_errors(void **state)
{
	(void)state;
	load_bad("listener:\n  doh_max_streams: 0\n",
		 "t.yaml:2:20: listener.doh_max_streams: 0 is out of range 1..1000");
	load_bad("listener:\n  doh_max_streams: 1001\n",
		 "t.yaml:2:20: listener.doh_max_streams: 1001 is out of range 1..1000");
	load_bad("listener:\n  tls_handshake_timeout_ms: 99\n",
		 "t.yaml:2:29: listener.tls_handshake_timeout_ms: 99 is out of range 100..60000");
	load_bad("listener:\n  permit_wait_ms: 60001\n",
		 "t.yaml:2:19: listener.permit_wait_ms: 60001 is out of range 0..60000");
	load_bad("listener:\n  dot: [\"127.0.0.1:x\"]\n",
		 "t.yaml:2:9: listener.dot[0]: bad address '127.0.0.1:x': port is not a number");
	load_bad("listener:\n  doh: \"127.0.0.1\"\n",
		 "t.yaml:2:8: listener.doh: expected a list, got a scalar");
	load_bad("listener:\n  doh: [\"https://127.0.0.1/dns-query\"]\n",
		 "t.yaml:2:9: listener.doh[0]: bad address 'https://127.0.0.1/dns-query': "
		 "expected addr:port, not a URL");
	/* dns, dot and doh are all TCP: one address:port serves one of them */
	load_bad("listener:\n  dns: [\"127.0.0.1:853\"]\n  dot: [\"127.0.0.1\"]\n",
		 "t.yaml:3:3: listener.dot[0]: '127.0.0.1' is also listener.dns[0] (one TCP port "
		 "serves one protocol)");
	load_bad("listener:\n  dot: [\"[::1]:443\"]\n  doh: [\"127.0.0.1\", \"[::1]\"]\n",
		 "t.yaml:3:3: listener.doh[1]: '[::1]' is also listener.dot[0] (one TCP port "
		 "serves one protocol)");
	/* the default dns listeners count too (no position in the file: the doh key's) */
	load_bad("listener:\n  doh: [\"0.0.0.0:53\"]\n",
		 "t.yaml:2:3: listener.doh[0]: '0.0.0.0:53' is also listener.dns[0] (one TCP "
		 "port serves one protocol)");
}

static void tls_section(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("tls:\n  cert: certs/c.pem\n  key: /k.pem\n"
				    "  server_name: DNS.Home.Example.\n");
	char cwd[PATH_MAX], want[PATH_MAX + 32];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/certs/c.pem", cwd);
	assert_string_equal(c->tls_cert, want);
	assert_string_equal(c->tls_key, "/k.pem");
	assert_string_equal(c->tls_server_name, "dns.home.example");
	assert_false(c->admin_tls); /* the admin stays plain until asked */
	nx_conf_free(c);
	/* admin HTTPS without a certificate: valid, the generated one will serve */
	c = load_ok("admin:\n  tls: true\n");
	assert_true(c->admin_tls);
	assert_null(c->tls_cert);
	nx_conf_free(c);
	c = load_ok("tls:\n  server_name: \"\"\n");
	assert_null(c->tls_server_name);
	nx_conf_free(c);
}

static void tls_errors(void **state)
{
	(void)state;
	load_bad("tls:\n  server_name: dns..example\n",
		 "t.yaml:2:16: tls.server_name: 'dns..example' is not a host name: empty label, "
		 "label longer than 63 bytes or name longer than 255");
	load_bad("tls:\n  server_name: \"dns home\"\n",
		 "t.yaml:2:16: tls.server_name: 'dns home' is not a host name: names may contain "
		 "only letters, digits, '-', '_' and dots");
	load_bad("tls:\n  server_name: [a]\n",
		 "t.yaml:2:16: tls.server_name: expected a host name, got a list");
	load_bad("tls:\n  crt: c.pem\n",
		 "t.yaml:2:3: unknown key 'tls.crt' (did you mean 'tls.cert'?)");
	load_bad("tls: 5\n", "t.yaml:1:6: tls: expected a mapping, got a scalar");
}

/* ---- client ids ---- */

static const char clients_yaml[] = "groups:\n"
				   "  kids: {}\n"
				   "clients:\n"
				   "  - name: laptop\n"
				   "    ids: [\"192.168.1.20\"]\n"
				   "  - name: phone\n"
				   "    ids: [\"id:phone-anna\", \"192.168.1.30\", \"id:0\"]\n"
				   "    groups: [kids]\n";

static struct sockaddr_in v4(const char *ip)
{
	struct sockaddr_in s = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

static void client_ids(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok(clients_yaml);
	assert_int_equal(c->n_clients, 2);
	assert_int_equal(c->clients[0].n_client_ids, 0);
	assert_null(c->clients[0].client_ids);
	const struct nx_conf_client *p = &c->clients[1];
	assert_int_equal(p->n_ids, 1); /* the address alone */
	assert_int_equal(p->n_client_ids, 2);
	assert_string_equal(p->client_ids[0], "phone-anna");
	assert_string_equal(p->client_ids[1], "0");

	assert_int_equal(nx_conf_client_by_id(c, "phone-anna"), 1);
	assert_int_equal(nx_conf_client_by_id(c, "0"), 1);
	assert_int_equal(nx_conf_client_by_id(c, "Phone-Anna"), -1); /* ids are lower case */
	assert_int_equal(nx_conf_client_by_id(c, "phone"), -1);
	assert_int_equal(nx_conf_client_by_id(c, ""), -1);
	assert_int_equal(nx_conf_client_by_id(c, NULL), -1);

	/* the id wins over the address; an unknown or empty id falls back to the address */
	struct sockaddr_in laptop = v4("192.168.1.20"), other = v4("10.9.9.9");
	int idx = -2;
	bool filt = false;
	uint64_t mask = 1;
	nx_conf_client_policy_id(c, (struct sockaddr *)&laptop, "phone-anna", &mask, &filt, &idx);
	assert_int_equal(idx, 1);
	assert_int_equal(mask, c->clients[1].groups_mask_sources);
	assert_true(filt);
	nx_conf_client_policy_id(c, (struct sockaddr *)&laptop, "nobody", NULL, NULL, &idx);
	assert_int_equal(idx, 0);
	nx_conf_client_policy_id(c, (struct sockaddr *)&laptop, "", NULL, NULL, &idx);
	assert_int_equal(idx, 0);
	nx_conf_client_policy_id(c, (struct sockaddr *)&other, NULL, NULL, NULL, &idx);
	assert_int_equal(idx, -1);
	nx_conf_client_policy_id(c, (struct sockaddr *)&other, "0", NULL, NULL, &idx);
	assert_int_equal(idx, 1);
	/* the address-only lookup is unchanged */
	nx_conf_client_policy(c, (struct sockaddr *)&laptop, NULL, NULL, &idx);
	assert_int_equal(idx, 0);

	assert_true(nx_conf_client_id_ok("a-1"));
	assert_false(nx_conf_client_id_ok("A"));
	assert_false(nx_conf_client_id_ok(""));
	assert_false(nx_conf_client_id_ok(NULL));
	nx_conf_free(c);

	/* a client named only by id is valid; admit_client_ids is its own switch */
	c = load_ok("access:\n  admit_client_ids: true\nclients:\n  - {name: roaming, ids: "
		    "[\"id:roaming\"]}\n");
	assert_true(c->admit_client_ids);
	assert_int_equal(c->clients[0].n_ids, 0);
	assert_null(c->clients[0].ids);
	struct sockaddr_in any = v4("203.0.113.1");
	nx_conf_client_policy(c, (struct sockaddr *)&any, NULL, NULL, &idx);
	assert_int_equal(idx, -1);
	assert_int_equal(nx_conf_client_by_id(c, "roaming"), 0);
	nx_conf_free(c);
}

static void client_id_errors(void **state)
{
	(void)state;
	load_bad("clients:\n  - {name: a, ids: [\"id:Phone\"]}\n",
		 "t.yaml:2:21: clients[0].ids[0]: bad client id 'Phone': 1..64 of a-z, 0-9 and "
		 "'-' after 'id:'");
	load_bad("clients:\n  - {name: a, ids: [\"id:\"]}\n",
		 "t.yaml:2:21: clients[0].ids[0]: bad client id '': 1..64 of a-z, 0-9 and '-' "
		 "after 'id:'");
	load_bad("clients:\n  - {name: a, ids: [\"id:a.b\"]}\n",
		 "t.yaml:2:21: clients[0].ids[0]: bad client id 'a.b': 1..64 of a-z, 0-9 and '-' "
		 "after 'id:'");
	load_bad("clients:\n  - {name: a, ids: [\"id:"
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]}\n",
		 "t.yaml:2:21: clients[0].ids[0]: bad client id "
		 "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx': 1..64 of "
		 "a-z, 0-9 and '-' after 'id:'");
	load_bad("clients:\n  - {name: a, ids: [\"id:x\", \"id:x\"]}\n",
		 "t.yaml:2:29: clients[0].ids[1]: client id 'x' is already clients[0]'s");
	load_bad("clients:\n  - {name: a, ids: [\"id:x\"]}\n  - {name: b, ids: [\"10.0.0.1\", "
		 "\"id:x\"]}\n",
		 "t.yaml:3:33: clients[1].ids[1]: client id 'x' is already clients[0]'s");
	/* an address entry after an id still gets its own messages and duplicate check */
	load_bad("clients:\n  - {name: a, ids: [\"id:x\", \"10.0.0.1\", \"10.0.0.1/32\"]}\n",
		 "t.yaml:2:41: clients[0].ids[2]: '10.0.0.1/32' is already clients[0].ids[0]");
	load_bad("clients:\n  - {name: a, ids: [\"id:x\", \"ip:10.0.0.1\"]}\n",
		 "t.yaml:2:29: clients[0].ids[1]: bad address 'ip:10.0.0.1': not an IP address or "
		 "address/prefix");
	load_bad("access:\n  admit_client_ids: 1\n",
		 "t.yaml:2:21: access.admit_client_ids: expected true or false, got '1'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(listener_defaults), T(listener_values), T(listener_errors),  T(tls_section),
	    T(tls_errors),	  T(client_ids),      T(client_id_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
