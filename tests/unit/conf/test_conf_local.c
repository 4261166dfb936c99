/* local_records: rdata encoding, sorting, lookup, and errors at file:line:col. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "dns/msg.h"
#include "helpers.h"

static const uint8_t nas[] = "\x03"
			     "nas"
			     "\x03"
			     "lan"; /* sizeof includes the root */
static const uint8_t files[] = "\x05"
			       "files"
			       "\x03"
			       "lan";
static const uint8_t missing[] = "\x04"
				 "nope"
				 "\x03"
				 "lan";

static const struct nx_conf_local *find1(const struct nx_conf *c, const uint8_t *name, size_t len,
					 uint16_t type)
{
	size_t first = 99, count = 99;
	assert_int_equal(nx_conf_local_find(c, name, len, type, &first, &count), 0);
	assert_int_equal(count, 1);
	return &c->locals[first];
}

static void test_encoding(void **state)
{
	(void)state;
	char txt300[301];
	for (int i = 0; i < 300; i++) {
		txt300[i] = (char)('a' + i % 26);
	}
	txt300[300] = '\0';
	char y[2048];
	snprintf(y, sizeof(y),
		 "local_records:\n"
		 "  - {name: NAS.lan., type: A, value: 192.168.1.10}\n"
		 "  - {name: nas.lan, type: aaaa, value: \"fd00::10\", ttl: 60}\n"
		 "  - {name: files.lan, type: CNAME, value: NAS.Lan}\n"
		 "  - {name: 10.1.168.192.in-addr.arpa, type: PTR, value: nas.lan.}\n"
		 "  - {name: nas.lan, type: TXT, value: \"%s\"}\n"
		 "  - {name: nas.lan, type: TXT, value: \"\"}\n"
		 "  - {name: nas.lan, type: TXT, value: v=spf1 -all, ttl: 0}\n",
		 txt300);
	struct nx_conf *c = load_ok(y);
	assert_int_equal(c->n_locals, 7);

	const struct nx_conf_local *r = find1(c, nas, sizeof(nas), NX_DNS_T_A);
	assert_int_equal(r->name_len, sizeof(nas));
	assert_memory_equal(r->name, nas, sizeof(nas)); /* lower-cased, no trailing dot issue */
	assert_string_equal(r->text, "NAS.lan.");
	assert_int_equal(r->ttl, 300);
	assert_int_equal(r->rdlen, 4);
	static const uint8_t a[4] = {192, 168, 1, 10};
	assert_memory_equal(r->rdata, a, 4);

	r = find1(c, nas, sizeof(nas), NX_DNS_T_AAAA);
	assert_int_equal(r->ttl, 60);
	assert_int_equal(r->rdlen, 16);
	static const uint8_t aaaa[16] = {0xfd, 0, [15] = 0x10};
	assert_memory_equal(r->rdata, aaaa, 16);

	/* CNAME: uncompressed wire name (lower-cased) */
	r = find1(c, files, sizeof(files), NX_DNS_T_CNAME);
	assert_int_equal(r->rdlen, sizeof(nas));
	assert_memory_equal(r->rdata, nas, sizeof(nas));

	static const uint8_t rev[] = "\x02"
				     "10"
				     "\x01"
				     "1"
				     "\x03"
				     "168"
				     "\x03"
				     "192"
				     "\x07"
				     "in-addr"
				     "\x04"
				     "arpa";
	r = find1(c, rev, sizeof(rev), NX_DNS_T_PTR);
	assert_int_equal(r->rdlen, sizeof(nas));
	assert_memory_equal(r->rdata, nas, sizeof(nas));

	/* TXT: three records, file order kept within the name and type */
	size_t first, count;
	assert_int_equal(nx_conf_local_find(c, nas, sizeof(nas), NX_DNS_T_TXT, &first, &count), 0);
	assert_int_equal(count, 3);
	r = &c->locals[first];
	assert_int_equal(r[0].rdlen, 302); /* 255 + 45 bytes in two character-strings */
	assert_int_equal(r[0].rdata[0], 255);
	assert_memory_equal(r[0].rdata + 1, txt300, 255);
	assert_int_equal(r[0].rdata[256], 45);
	assert_memory_equal(r[0].rdata + 257, txt300 + 255, 45);
	assert_int_equal(r[1].rdlen, 1); /* "" is one empty character-string */
	assert_int_equal(r[1].rdata[0], 0);
	assert_int_equal(r[2].rdlen, 12);
	assert_int_equal(r[2].rdata[0], 11);
	assert_memory_equal(r[2].rdata + 1, "v=spf1 -all", 11);
	assert_int_equal(r[2].ttl, 0);
	nx_conf_free(c);
}

static void test_txt_exact_chunks(void **state)
{
	(void)state;
	char y[2048], t[511];
	memset(t, 'x', 510);
	t[510] = '\0';
	snprintf(y, sizeof(y), "local_records:\n  - {name: t.lan, type: TXT, value: %s}\n", t);
	struct nx_conf *c = load_ok(y);
	assert_int_equal(c->locals[0].rdlen, 512); /* 255 + 255, no empty third string */
	assert_int_equal(c->locals[0].rdata[0], 255);
	assert_int_equal(c->locals[0].rdata[256], 255);
	nx_conf_free(c);
}

static void test_lookup(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("local_records:\n"
				    "  - {name: nas.lan, type: TXT, value: t}\n"
				    "  - {name: files.lan, type: CNAME, value: nas.lan}\n"
				    "  - {name: nas.lan, type: A, value: 192.168.1.10}\n"
				    "  - {name: nas.lan, type: A, value: 192.168.1.11}\n"
				    "  - {name: a.nas.lan, type: A, value: 192.168.1.12}\n");
	assert_int_equal(c->n_locals, 5);
	/* sorted: records of one name contiguous, types ascending, file order within */
	for (size_t i = 1; i < c->n_locals; i++) {
		const struct nx_conf_local *p = &c->locals[i - 1], *q = &c->locals[i];
		bool same = p->name_len == q->name_len && !memcmp(p->name, q->name, p->name_len);
		if (same) {
			assert_true(p->type <= q->type);
		}
	}

	/* mixed case query names match */
	static const uint8_t upper[] = "\x03"
				       "NaS"
				       "\x03"
				       "LAN";
	size_t first = 0, count = 0;
	assert_int_equal(nx_conf_local_find(c, upper, sizeof(upper), NX_DNS_T_A, &first, &count),
			 0);
	assert_int_equal(count, 2);
	assert_int_equal(c->locals[first].rdata[3], 10);
	assert_int_equal(c->locals[first + 1].rdata[3], 11);
	/* ANY: every type of the name */
	assert_int_equal(nx_conf_local_find(c, nas, sizeof(nas), NX_DNS_T_ANY, &first, &count), 0);
	assert_int_equal(count, 3);
	/* name exists, type does not: NODATA for the daemon */
	assert_int_equal(nx_conf_local_find(c, nas, sizeof(nas), NX_DNS_T_AAAA, &first, &count),
			 NX_ENOTFOUND);
	assert_int_equal(count, 0);
	assert_true(nx_conf_local_has_name(c, nas, sizeof(nas)));
	assert_true(nx_conf_local_has_name(c, upper, sizeof(upper)));
	/* a CNAME name answers its CNAME for any type the daemon asks with qtype CNAME */
	assert_int_equal(
	    nx_conf_local_find(c, files, sizeof(files), NX_DNS_T_CNAME, &first, &count), 0);
	assert_int_equal(count, 1);
	/* absent names, parents and children are not found */
	assert_false(nx_conf_local_has_name(c, missing, sizeof(missing)));
	static const uint8_t lan[] = "\x03"
				     "lan";
	assert_false(nx_conf_local_has_name(c, lan, sizeof(lan)));
	static const uint8_t child[] = "\x01"
				       "b"
				       "\x03"
				       "nas"
				       "\x03"
				       "lan";
	assert_false(nx_conf_local_has_name(c, child, sizeof(child)));
	assert_int_equal(
	    nx_conf_local_find(c, missing, sizeof(missing), NX_DNS_T_A, &first, &count),
	    NX_ENOTFOUND);
	assert_false(nx_conf_local_has_name(c, nas, 0));
	nx_conf_free(c);

	/* no records at all */
	c = load_ok("");
	assert_false(nx_conf_local_has_name(c, nas, sizeof(nas)));
	assert_int_equal(nx_conf_local_find(c, nas, sizeof(nas), NX_DNS_T_A, &first, &count),
			 NX_ENOTFOUND);
	nx_conf_free(c);
}

static void test_errors(void **state)
{
	(void)state;
	load_bad("local_records:\n  - {name: nas.lan, type: A, value: 192.168.1}\n",
		 "t.yaml:2:37: local_records[0].value: '192.168.1' is not an IPv4 address (type "
		 "A)");
	load_bad("local_records:\n  - {name: nas.lan, type: A, value: \"fd00::1\"}\n",
		 "t.yaml:2:37: local_records[0].value: 'fd00::1' is not an IPv4 address (type A)");
	load_bad("local_records:\n  - {name: nas.lan, type: AAAA, value: 192.168.1.1}\n",
		 "t.yaml:2:40: local_records[0].value: '192.168.1.1' is not an IPv6 address (type "
		 "AAAA)");
	load_bad("local_records:\n  - {name: a.lan, type: CNAME, value: \"b..lan\"}\n",
		 "t.yaml:2:39: local_records[0].value: 'b..lan' is not a host name (type CNAME): "
		 "empty label, label longer than 63 bytes or name longer than 255");
	load_bad("local_records:\n  - {name: a.lan, type: PTR, value: \"host name\"}\n",
		 "t.yaml:2:37: local_records[0].value: 'host name' is not a host name (type PTR): "
		 "names may contain only letters, digits, '-', '_' and dots");
	load_bad("local_records:\n  - {name: a.lan, type: NS, value: x}\n",
		 "t.yaml:2:25: local_records[0].type: 'NS' is not one of A, AAAA, CNAME, TXT, PTR, "
		 "MX, SRV, CAA");
	load_bad("local_records:\n  - {name: a.lan, type: MX, value: x}\n",
		 "t.yaml:2:36: local_records[0].value: 'x' is not 'PREFERENCE HOST' (a preference "
		 "of 0..65535) (type MX)");
	load_bad("local_records:\n  - {name: a.lan, type: MX, value: 70000 m.lan}\n",
		 "t.yaml:2:36: local_records[0].value: '70000 m.lan' is not 'PREFERENCE HOST' (a "
		 "preference of 0..65535) (type MX)");
	load_bad(
	    "local_records:\n  - {name: a.lan, type: MX, value: 10 m.lan extra}\n",
	    "t.yaml:2:36: local_records[0].value: '10 m.lan extra' is not 'PREFERENCE HOST' (a "
	    "host name after the preference) (type MX)");
	load_bad("local_records:\n  - {name: _sip._udp.lan, type: SRV, value: 10 5 sip.lan}\n",
		 "t.yaml:2:45: local_records[0].value: '10 5 sip.lan' is not 'PRIORITY WEIGHT PORT "
		 "HOST' (numbers of 0..65535) (type SRV)");
	load_bad(
	    "local_records:\n  - {name: a.lan, type: CAA, value: 0 is-sue x}\n",
	    "t.yaml:2:37: local_records[0].value: '0 is-sue x' is not 'FLAGS TAG VALUE' (flags "
	    "0..255, a tag of 1..15 letters or digits, a value) (type CAA)");
	load_bad(
	    "local_records:\n  - {name: a.lan, type: CAA, value: 256 issue x}\n",
	    "t.yaml:2:37: local_records[0].value: '256 issue x' is not 'FLAGS TAG VALUE' (flags "
	    "0..255, a tag of 1..15 letters or digits, a value) (type CAA)");
	load_bad("local_records:\n  - {name: \"a b.lan\", type: A, value: 1.2.3.4}\n",
		 "t.yaml:2:12: local_records[0].name: bad name 'a b.lan': names may contain only "
		 "letters, digits, '-', '_' and dots");
	load_bad("local_records:\n  - {name: a.lan, type: A}\n",
		 "t.yaml:2:5: local_records[0]: missing 'value'");
	load_bad("local_records:\n  - {name: a.lan, type: A, value: 1.2.3.4, ttl: 604801}\n",
		 "t.yaml:2:49: local_records[0].ttl: 604801 is out of range 0..604800");
	load_bad("local_records:\n  - {name: a.lan, type: A, value: 1.2.3.4, class: IN}\n",
		 "t.yaml:2:44: unknown key 'local_records[0].class'");
	load_bad("local_records:\n"
		 "  - {name: a.lan, type: A, value: 1.2.3.4}\n"
		 "  - {name: A.LAN, type: CNAME, value: b.lan}\n",
		 "t.yaml:3:12: local_records[1]: 'A.LAN' cannot have a CNAME and other records "
		 "(local_records[0] is A)");
	load_bad("local_records:\n"
		 "  - {name: a.lan, type: CNAME, value: b.lan}\n"
		 "  - {name: a.lan, type: TXT, value: x}\n",
		 "t.yaml:3:12: local_records[1]: 'a.lan' cannot have a CNAME and other records "
		 "(local_records[0] is CNAME)");
	load_bad("local_records:\n"
		 "  - {name: a.lan, type: CNAME, value: b.lan}\n"
		 "  - {name: a.lan, type: CNAME, value: c.lan}\n",
		 "t.yaml:3:12: local_records[1]: 'a.lan' already has a CNAME (local_records[0]); a "
		 "name has at most one");
	load_bad("local_records:\n  - {name: a.lan, type: CNAME, value: A.lan.}\n",
		 "t.yaml:2:12: local_records[0]: CNAME 'a.lan' points to itself");
	load_bad("local_records:\n"
		 "  - {name: a.lan, type: A, value: 1.2.3.4}\n"
		 "  - {name: a.lan, type: A, value: 1.2.3.4, ttl: 5}\n",
		 "t.yaml:3:12: local_records[1]: duplicate record (same as local_records[0])");
	load_bad("local_records:\n  - a.lan A 1.2.3.4\n",
		 "t.yaml:2:5: local_records[0]: expected a mapping {name, type, value, ttl}, got a "
		 "scalar");
}

/* MX, SRV and CAA values are encoded as RFC 1035, 2782 and 8659 rdata. */
static void test_mx_srv_caa(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("local_records:\n"
		    "  - {name: lan, type: MX, value: 10 Mail.lan.}\n"
		    "  - {name: _sip._udp.lan, type: SRV, value: \"10 5 5060 sip.lan\"}\n"
		    "  - {name: lan, type: CAA, value: '0 issue \"letsencrypt.org\"'}\n"
		    "  - {name: lan, type: caa, value: 128 iodef mailto:ca@lan}\n");
	static const uint8_t lan[] = "\x03lan";
	const struct nx_conf_local *r = find1(c, lan, sizeof(lan), NX_DNS_T_MX);
	static const uint8_t mx[] = "\x00\x0a\x04mail\x03lan"; /* names are stored lower-cased */
	assert_int_equal(r->rdlen, sizeof(mx));
	assert_memory_equal(r->rdata, mx, sizeof(mx));
	static const uint8_t sip[] = "\x04_sip\x04_udp\x03lan";
	r = find1(c, sip, sizeof(sip), 33);
	static const uint8_t srv[] = "\x00\x0a\x00\x05\x13\xc4\x03sip\x03lan";
	assert_int_equal(r->rdlen, sizeof(srv));
	assert_memory_equal(r->rdata, srv, sizeof(srv));
	size_t first = 0, count = 0;
	assert_int_equal(nx_conf_local_find(c, lan, sizeof(lan), 257, &first, &count), 0);
	assert_int_equal(count, 2);
	static const uint8_t caa0[] = "\x00\x05issueletsencrypt.org";
	assert_int_equal(c->locals[first].rdlen, sizeof(caa0) - 1);
	assert_memory_equal(c->locals[first].rdata, caa0, sizeof(caa0) - 1);
	static const uint8_t caa1[] = "\x80\x05iodefmailto:ca@lan";
	assert_int_equal(c->locals[first + 1].rdlen, sizeof(caa1) - 1);
	assert_memory_equal(c->locals[first + 1].rdata, caa1, sizeof(caa1) - 1);
	nx_conf_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_encoding), T(test_txt_exact_chunks), T(test_lookup),
	    T(test_errors),   T(test_mx_srv_caa),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
