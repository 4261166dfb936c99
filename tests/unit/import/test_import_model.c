/*
 * import/: the TOML reader on the forms FTL writes and those it refuses (with their line),
 * name making, the per-item loader check (a refused rule is reported, not added), the
 * config text loading back, and the arena returning every byte to the ledger.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"
#include "import/impl.h"

static int64_t owner_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_import].bytes;
}

/* The shape of FTL's test/pihole.toml. */
static const char ftl_toml[] = "# Pi-hole configuration file (v6.3.2)\n"
			       "[dns]\n"
			       "  # Upstream DNS Servers\n"
			       "  upstreams = [\n"
			       "    \"127.0.0.1#5555\",\n"
			       "    \"9.9.9.9\"\n"
			       "  ] ### CHANGED, default = []\n"
			       "  hosts = [\n"
			       "    \"1.1.1.1 abc-custom.com def-custom.de\",\n"
			       "    \"2.2.2.2 \\u00e4ste.com st\\u00e9\\\\.com\"\n"
			       "  ] ### CHANGED, default = []\n"
			       "  revServers = []\n"
			       "  port = 53\n"
			       "  [dns.blocking]\n"
			       "    active = true\n"
			       "    mode = \"NULL\"\n"
			       "    lit = 'C:\\no\\escape'\n"
			       "[dhcp]\n"
			       "  active = false # trailing comment\n"
			       "  leaseTime = \"\"\r\n";

static void toml_reads_ftl_forms(void **state)
{
	(void)state;
	struct nx_import *imp = nx_import_new("test", "mem");
	assert_non_null(imp);
	struct nx_toml_val *v = NULL;
	char err[128];
	assert_int_equal(nx_toml_parse(imp, ftl_toml, strlen(ftl_toml), &v, err, sizeof(err)), 0);
	const struct nx_toml_val *u = nx_toml_get(v, "dns.upstreams");
	assert_non_null(u);
	assert_true(u->is_array);
	assert_int_equal(u->elems.n, 2);
	assert_string_equal(u->elems.head->s, "127.0.0.1#5555");
	assert_string_equal(u->elems.head->next->s, "9.9.9.9");
	const struct nx_toml_val *h = nx_toml_get(v, "dns.hosts");
	assert_string_equal(h->elems.head->next->s, "2.2.2.2 \xc3\xa4ste.com st\xc3\xa9\\.com");
	assert_int_equal(nx_toml_get(v, "dns.revServers")->elems.n, 0);
	assert_string_equal(nx_toml_get(v, "dns.port")->scalar, "53");
	assert_string_equal(nx_toml_get(v, "dns.blocking.active")->scalar, "true");
	assert_string_equal(nx_toml_get(v, "dns.blocking.mode")->scalar, "NULL");
	assert_string_equal(nx_toml_get(v, "dns.blocking.lit")->scalar, "C:\\no\\escape");
	assert_string_equal(nx_toml_get(v, "dhcp.active")->scalar, "false");
	assert_string_equal(nx_toml_get(v, "dhcp.leaseTime")->scalar, "");
	assert_int_equal(nx_toml_get(v, "dhcp.active")->line, 19);
	assert_null(nx_toml_get(v, "dns.active"));
	nx_import_free(imp);
	assert_int_equal(owner_bytes(), 0);
}

static void toml_refuses_with_line(void **state)
{
	(void)state;
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"[dns]\n  x = \"open\n", "line 2: unterminated string"},
	    {"a = 1\nb = {x = 1}\n", "line 2: inline tables"},
	    {"a.b = 1\n", "line 1: dotted keys"},
	    {"[[x]]\n", "line 1: arrays of tables"},
	    {"a = \"\"\"x\"\"\"\n", "line 1: multi-line"},
	    {"a = [\n 1,\n", "unterminated array"},
	    {"a = [1 2]\n", "line 1: expected ','"},
	    {"a = 1 2\n", "line 1: unexpected text"},
	    {"a = \"\\q\"\n", "line 1: unknown escape"},
	    {"a = \"\\ud800\"\n", "line 1: bad \\u escape"},
	    {"= 1\n", "line 1: expected a key"},
	    {"a 1\n", "line 1: expected '='"},
	    {"[dns\n", "line 1: bad table header"},
	    {"a = [[1]]\n", "nested arrays"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nx_import *imp = nx_import_new("test", "mem");
		struct nx_toml_val *v = NULL;
		char err[128] = "";
		int rc = nx_toml_parse(imp, bad[i].text, strlen(bad[i].text), &v, err, sizeof(err));
		if (rc != NX_ECORRUPT || !strstr(err, bad[i].want)) {
			fail_msg("%zu: %s: rc %d, '%s', want '%s'", i, bad[i].text, rc, err,
				 bad[i].want);
		}
		nx_import_free(imp);
	}
	struct nx_import *imp = nx_import_new("test", "mem");
	struct nx_toml_val *v = NULL;
	char err[128];
	static const char nul[] = "a = 1\n\0b = 2\n";
	assert_int_equal(nx_toml_parse(imp, nul, sizeof(nul) - 1, &v, err, sizeof(err)),
			 NX_ECORRUPT);
	/* an unterminated string at the very end of the input: no read past it */
	static const char tail[] = {'a', '=', '"', 'x'};
	assert_int_equal(nx_toml_parse(imp, tail, sizeof(tail), &v, err, sizeof(err)), NX_ECORRUPT);
	nx_import_free(imp);
	assert_int_equal(owner_bytes(), 0);
}

static void names_are_valid_and_unique(void **state)
{
	(void)state;
	struct nx_import *imp = nx_import_new("test", "mem");
	assert_string_equal(nx_import_name(imp, "Kids devices!", "g", NULL), "kids-devices");
	nx_import_add_group(imp, "kids-devices", true);
	assert_string_equal(nx_import_name(imp, "KIDS  devices", "g", NULL), "kids-devices-2");
	assert_string_equal(nx_import_name(imp, "__--", "group", NULL), "group");
	assert_string_equal(nx_import_name(imp, "Default", "g", NULL), "default-2");
	assert_string_equal(nx_import_name(imp, "", "fallback", NULL), "fallback");
	char longtext[300];
	memset(longtext, 'a', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	const char *n = nx_import_name(imp, longtext, "g", NULL);
	assert_true(strlen(n) <= NX_CONF_NAME_MAX);
	nx_import_free(imp);
}

static void items_checked_by_the_loader(void **state)
{
	(void)state;
	struct nx_import *imp = nx_import_new("test", "mem");
	assert_true(nx_import_add_rule(imp, false, "ads.example.com", "rule 1"));
	assert_false(nx_import_add_rule(imp, false, "ads.example.com", "rule 1 again"));
	assert_false(nx_import_add_rule(imp, false, "/([/", "bad regex"));
	/* the AdGuard language is the loader's too; a browser modifier is not */
	assert_false(nx_import_add_rule(imp, true, "||x.example^$third-party", "browser modifier"));
	assert_true(nx_import_add_record(imp, "nas.lan", "A", "192.0.2.1", 0, "rec"));
	/* a CNAME beside an A record under one name: the loader refuses the pair */
	assert_false(nx_import_add_record(imp, "nas.lan", "CNAME", "x.lan", 0, "cname"));
	assert_false(nx_import_add_record(imp, "nas.lan", "A", "192.0.2.1", 0, "dup"));
	assert_false(nx_import_add_upstream(imp, "not an address", "up"));
	assert_true(nx_import_add_upstream(imp, "192.0.2.53:53", "up"));
	/* a rule for some groups: the groups must exist; names, *.x and AdGuard-syntax rules
	 * (regexes too) take them */
	struct nx_import_strv kids = {0};
	nx_import_strv_push(imp, &kids, "kids");
	assert_false(nx_import_add_rule_for(imp, false, "social.example", &kids, "no such group"));
	nx_import_add_group(imp, "kids", true);
	assert_true(nx_import_add_rule_for(imp, false, "social.example", &kids, "kids rule"));
	assert_true(nx_import_add_rule_for(imp, false, "/^re/", &kids, "grouped regex"));
	assert_int_equal(nx_import_count(imp, NX_IMPORT_IMPORTED), 5);
	assert_int_equal(nx_import_count(imp, NX_IMPORT_NOT_IMPORTED), 7);
	assert_int_equal(imp->deny.n, 3);
	assert_int_equal(imp->allow.n, 0);

	/* the config text loads, with what was added */
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_import_write_config(imp, fp, err, sizeof(err)), 0);
	fclose(fp);
	struct nx_conf *c = NULL;
	assert_int_equal(nx_conf_load_string("out", buf, len, &c, err, sizeof(err)), 0);
	assert_int_equal(c->n_locals, 1);
	assert_int_equal(c->n_deny_rules, 3);
	assert_non_null(c->deny_scopes);
	assert_int_equal(c->deny_scopes[1].n_groups, 1);
	assert_string_equal(c->deny_scopes[1].groups[0], "kids");
	assert_int_equal(c->deny_scopes[2].n_groups, 1); /* the regex keeps its group */
	assert_string_equal(c->deny_scopes[2].groups[0], "kids");
	nx_conf_free(c);
	assert_non_null(strstr(buf, "# nxdns configuration imported from test (mem)"));
	free(buf);

	/* the report: one line per item, the loader's reason on refusals */
	buf = NULL;
	fp = open_memstream(&buf, &len);
	nx_import_write_report(imp, fp);
	fclose(fp);
	assert_non_null(strstr(buf, "not imported: bad regex: '/([/': regex: missing terminating ]"));
	assert_non_null(strstr(buf, "not imported: rule 1 again: a duplicate"));
	assert_non_null(strstr(buf, "summary: 5 imported, 7 not imported, 0 without"));
	free(buf);
	nx_import_free(imp);
	assert_int_equal(owner_bytes(), 0);
}

static void nothing_imported_is_the_defaults(void **state)
{
	(void)state;
	struct nx_import *imp = nx_import_new("test", "mem");
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_import_write_config(imp, fp, err, sizeof(err)), 0);
	fclose(fp);
	assert_non_null(strstr(buf, "\n{}\n"));
	free(buf);
	nx_import_free(imp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(toml_reads_ftl_forms),
	    cmocka_unit_test(toml_refuses_with_line),
	    cmocka_unit_test(names_are_valid_and_unique),
	    cmocka_unit_test(items_checked_by_the_loader),
	    cmocka_unit_test(nothing_imported_is_the_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
