/*
 * Data-driven checks against vectors nobody on the team wrote: dnspython's wire tests
 * (shared/suites/dnspython-wire) and a must-not-crash replay of BIND's and PowerDNS's fuzzing
 * seeds. Skipped when NX_SHARED_DIR is absent (a user's clone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"

static uint8_t buf[NX_DNS_MSG_MAX + 1024];
static uint8_t out[NX_DNS_MSG_MAX];

/* Split a TSV line in place; returns the number of fields. */
static int split_tab(char *line, char **f, int max)
{
	int n = 0;
	line[strcspn(line, "\r\n")] = 0;
	f[n++] = line;
	for (char *p = line; *p && n < max; p++) {
		if (*p == '\t') {
			*p = 0;
			f[n++] = p + 1;
		}
	}
	return n;
}

static FILE *open_suite(const char *rel)
{
	const char *d = shared_dir();
	if (!d) {
		return NULL;
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/suites/%s", d, rel);
	return fopen(path, "r");
}

static void dnspython_names(void **state)
{
	FILE *f = open_suite("dnspython-wire/name-from-wire.tsv");
	if (!f) {
		skip();
	}
	char line[4096];
	int rows = 0;
	assert_non_null(fgets(line, sizeof(line), f)); /* header */
	while (fgets(line, sizeof(line), f)) {
		char *fld[8];
		int nf = split_tab(line, fld, 8);
		assert_true(nf >= 4);
		int len = hex_decode(fld[0], buf, sizeof(buf));
		assert_true(len > 0);
		size_t off = strtoul(fld[1], NULL, 10);
		bool ok = strcmp(fld[2], "ok") == 0;
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, buf, (size_t)len);
		rd.pos = off;
		uint8_t name[NX_DNS_NAME_MAX];
		size_t nl = nx_dns_rd_name(&rd, name);
		if (!ok) {
			if (rd.err == 0) {
				fail_msg("row %d (%s at %zu) should fail: %s", rows + 1, fld[0],
					 off, fld[3]);
			}
			rows++;
			continue;
		}
		assert_int_equal(rd.err, 0);
		char text[NX_DNS_TEXT_MAX + 1];
		int tl = nx_dns_name_to_text(name, nl, text, sizeof(text) - 1);
		assert_true(tl > 0);
		if (strcmp(text, ".") != 0) {
			strcat(text, ".");
		}
		assert_string_equal(text, fld[3]);
		assert_true(nf >= 5);
		assert_int_equal(rd.pos - off, strtoul(fld[4], NULL, 10));
		/* skip_name consumes the same bytes */
		nx_dns_rd_init(&rd, buf, (size_t)len);
		rd.pos = off;
		nx_dns_rd_skip_name(&rd);
		assert_int_equal(rd.pos - off, strtoul(fld[4], NULL, 10));
		rows++;
	}
	fclose(f);
	assert_true(rows >= 9);
}

static void dnspython_messages(void **state)
{
	FILE *f = open_suite("dnspython-wire/message-from-wire.tsv");
	if (!f) {
		skip();
	}
	char line[4096];
	int rows = 0, good = 0;
	assert_non_null(fgets(line, sizeof(line), f));
	while (fgets(line, sizeof(line), f)) {
		char *fld[8];
		int nf = split_tab(line, fld, 8);
		assert_true(nf >= 3);
		int len = hex_decode(fld[0], buf, sizeof(buf));
		assert_true(len >= 0);
		struct nx_dns_msg m;
		int rc = nx_dns_msg_parse(buf, (size_t)len, &m);
		if (strcmp(fld[1], "ok") == 0) {
			assert_int_equal(rc, 0);
			good++;
			/* the one good vector: id 1234 RD, wwww.dnspython.org IN A, DO, 4096 */
			assert_int_equal(m.id, 1234);
			assert_int_equal(m.flags, NX_DNS_F_RD);
			char text[NX_DNS_TEXT_MAX];
			assert_true(
			    nx_dns_name_to_text(m.q.name, m.q.name_len, text, sizeof(text)) > 0);
			assert_string_equal(text, "wwww.dnspython.org");
			assert_int_equal(m.q.qtype, NX_DNS_T_A);
			assert_true(m.edns.present);
			assert_true(m.edns.do_bit);
			assert_int_equal(m.edns.udp_size, 4096);
		} else {
			if (rc != NX_EMALFORMED) {
				fail_msg("row %d should be rejected: %s", rows + 1, fld[2]);
			}
			if (len >= NX_DNS_HDR_LEN) {
				/* header still there for a FORMERR */
				assert_int_equal(m.id, (buf[0] << 8) | buf[1]);
			}
		}
		rows++;
	}
	fclose(f);
	assert_int_equal(good, 1);
	assert_true(rows >= 6);
}

struct replay_stats {
	int files, parsed, relayed;
};

/* Everything that parses must relay and answer FORMERR-style into parseable output. */
static void replay_one(const uint8_t *data, size_t len, struct replay_stats *st)
{
	struct nx_dns_msg m, r;
	st->files++;
	if (nx_dns_msg_parse(data, len, &m) < 0) {
		return;
	}
	st->parsed++;
	struct nx_dns_reply_ctx ctx = {
	    .id = (uint16_t)~m.id,
	    .qflags = m.flags,
	    .q = m.has_question ? &m.q : NULL,
	    .edns = m.edns.present,
	    .do_bit = m.edns.do_bit,
	    .max_size = nx_dns_udp_limit(&m),
	};
	bool tc;
	int n = nx_dns_relay(out, sizeof(out), data, &m, &ctx, 30, -1, NULL, &tc);
	assert_true(n > 0);
	assert_true((size_t)n <= ctx.max_size);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &r), 0);
	assert_int_equal(r.id, ctx.id);
	assert_int_equal(r.edns.present, ctx.edns);
	assert_int_equal((r.flags & NX_DNS_F_TC) != 0, tc || (m.flags & NX_DNS_F_TC));
	st->relayed++;
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_FORMERR, NX_DNS_EDE_OTHER, "x");
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &r), 0);
}

static void replay_dir(const char *rel, struct replay_stats *st)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/suites/%s", shared_dir(), rel);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strstr(e->d_name, "README") ||
		    strstr(e->d_name, "LICENSE")) {
			continue;
		}
		char path[2048];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		size_t len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		replay_one(buf, len, st);
	}
	closedir(d);
}

static void replay_bind9(void **state)
{
	if (!shared_dir()) {
		skip();
	}
	struct replay_stats st = {0};
	replay_dir("bind9-fuzz-seeds/dns_message_parse", &st);
	replay_dir("bind9-fuzz-seeds/dns_name_fromwire", &st);
	print_message("bind9 seeds: %d files, %d parsed, %d relayed\n", st.files, st.parsed,
		      st.relayed);
	assert_true(st.files >= 300);
	/* most are real captures from BIND's system tests */
	assert_true(st.parsed >= st.files / 2);
}

static void replay_pdns(void **state)
{
	if (!shared_dir()) {
		skip();
	}
	struct replay_stats st = {0};
	replay_dir("pdns-fuzz-seeds/raw-dns-packets", &st);
	print_message("pdns seeds: %d files, %d parsed\n", st.files, st.parsed);
	assert_int_equal(st.files, 5);
	assert_int_equal(st.parsed, 5); /* basic, ECS, DS, referral, root NS: all well-formed */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(dnspython_names),
	    cmocka_unit_test(dnspython_messages),
	    cmocka_unit_test(replay_bind9),
	    cmocka_unit_test(replay_pdns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
