/* Wire names: text <-> wire, escapes, equality, zones, case (dns/wire.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "helpers.h"

static void from_text_basic(void **state)
{
	uint8_t w[NX_DNS_NAME_MAX];
	assert_int_equal(nx_dns_name_from_text("example.com", w), 13);
	assert_memory_equal(w, "\007example\003com\000", 13);
	assert_int_equal(nx_dns_name_from_text("example.com.", w), 13);
	assert_memory_equal(w, "\007example\003com\000", 13);
	assert_int_equal(nx_dns_name_from_text(".", w), 1);
	assert_int_equal(w[0], 0);
	assert_int_equal(nx_dns_name_from_text("A.b", w), 5);
	assert_memory_equal(w, "\001A\001b\000", 5); /* case kept */
}

static void from_text_bad(void **state)
{
	uint8_t w[NX_DNS_NAME_MAX];
	assert_int_equal(nx_dns_name_from_text("", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text("a..b", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text(".a", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text("..", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text("a\\", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text("a\\25", w), NX_EMALFORMED);
	assert_int_equal(nx_dns_name_from_text("a\\256", w), NX_EMALFORMED);
	char label[80];
	memset(label, 'x', 64);
	label[64] = 0;
	assert_int_equal(nx_dns_name_from_text(label, w), NX_EMALFORMED);
	label[63] = 0;
	assert_int_equal(nx_dns_name_from_text(label, w), 65);
	/* 255 is the limit including the root: 3*64 + 62 + 1 = 255 ok, one more char not */
	char text[300];
	size_t o = 0;
	for (int i = 0; i < 3; i++) {
		memset(text + o, 'a', 63);
		o += 63;
		text[o++] = '.';
	}
	memset(text + o, 'b', 61);
	o += 61;
	text[o] = 0;
	assert_int_equal(nx_dns_name_from_text(text, w), 255);
	text[o++] = '.';
	text[o] = 0;
	assert_int_equal(nx_dns_name_from_text(text, w), 255);
	text[o - 1] = 'b';
	text[o] = 0;
	assert_int_equal(nx_dns_name_from_text(text, w), NX_EMALFORMED);
}

static void escapes(void **state)
{
	uint8_t w[NX_DNS_NAME_MAX];
	assert_int_equal(nx_dns_name_from_text("a\\.b.c", w), 7);
	assert_memory_equal(w, "\003a.b\001c\000", 7);
	assert_int_equal(nx_dns_name_from_text("\\000\\255\\\\x", w), 6);
	assert_memory_equal(w, "\004\000\377\\x\000", 6);

	char t[NX_DNS_TEXT_MAX];
	assert_int_equal(nx_dns_name_to_text(w, 6, t, sizeof(t)), 13);
	assert_string_equal(t, "\\000\\255\\092x");
	const uint8_t dotted[] = "\003a.b\001c";
	assert_int_equal(nx_dns_name_to_text(dotted, 7, t, sizeof(t)), 6);
	assert_string_equal(t, "a\\.b.c");
	const uint8_t mixed[] = "\007Ex_am-1\002*x";
	assert_int_equal(nx_dns_name_to_text(mixed, 12, t, sizeof(t)), 13);
	assert_string_equal(t, "Ex_am-1.\\042x");
	const uint8_t root[] = {0};
	assert_int_equal(nx_dns_name_to_text(root, 1, t, sizeof(t)), 1);
	assert_string_equal(t, ".");
	/* invalid or inconsistent input */
	assert_int_equal(nx_dns_name_to_text(mixed, 11, t, sizeof(t)), NX_EMALFORMED);
	const uint8_t bad[] = {0x41, 'a', 0};
	assert_int_equal(nx_dns_name_to_text(bad, 3, t, sizeof(t)), NX_EMALFORMED);
}

static void to_text_trunc(void **state)
{
	uint8_t w[NX_DNS_NAME_MAX];
	size_t l = wname("abc.de", w);
	char t[8];
	assert_int_equal(nx_dns_name_to_text(w, l, t, 7), 6);
	assert_string_equal(t, "abc.de");
	assert_int_equal(nx_dns_name_to_text(w, l, t, 6), NX_ETRUNC);
	assert_int_equal(nx_dns_name_to_text(w, l, t, 4), NX_ETRUNC);
	l = wname("\\255", w);
	assert_int_equal(nx_dns_name_to_text(w, l, t, 4), NX_ETRUNC);
	assert_int_equal(nx_dns_name_to_text(w, l, t, 5), 4);
	assert_string_equal(t, "\\255");
	const uint8_t root[] = {0};
	assert_int_equal(nx_dns_name_to_text(root, 1, t, 1), NX_ETRUNC);
}

static void roundtrip_all_bytes(void **state)
{
	/* every byte value survives wire -> text -> wire */
	uint8_t w[NX_DNS_NAME_MAX], back[NX_DNS_NAME_MAX];
	char t[NX_DNS_TEXT_MAX];
	for (int b = 0; b < 256; b++) {
		uint8_t name[] = {3, (uint8_t)b, 'x', (uint8_t)(255 - b), 0};
		memcpy(w, name, sizeof(name));
		int n = nx_dns_name_to_text(w, sizeof(name), t, sizeof(t));
		assert_true(n > 0);
		assert_int_equal(nx_dns_name_from_text(t, back), (int)sizeof(name));
		assert_memory_equal(back, name, sizeof(name));
	}
	/* the worst case fits NX_DNS_TEXT_MAX: 255 bytes of escapes */
	uint8_t big[NX_DNS_NAME_MAX];
	size_t o = 0;
	for (int i = 0; i < 4; i++) {
		size_t ll = i < 3 ? 63 : 61;
		big[o++] = (uint8_t)ll;
		memset(big + o, 0xff, ll);
		o += ll;
	}
	big[o++] = 0;
	int n = nx_dns_name_to_text(big, o, t, sizeof(t));
	assert_int_equal(n, 250 * 4 + 3);
	assert_int_equal(nx_dns_name_from_text(t, back), 255);
	assert_memory_equal(back, big, 255);
}

static void name_len(void **state)
{
	uint8_t w[NX_DNS_NAME_MAX];
	size_t l = wname("www.example.com", w);
	assert_int_equal(nx_dns_name_len(w, l), l);
	assert_int_equal(nx_dns_name_len(w, NX_DNS_NAME_MAX), l);
	assert_int_equal(nx_dns_name_len(w, l - 1), 0);
	const uint8_t bad[] = {0x40, 0};
	assert_int_equal(nx_dns_name_len(bad, 2), 0);
	assert_int_equal(nx_dns_name_labels(w, l), 3);
	const uint8_t root[] = {0};
	assert_int_equal(nx_dns_name_labels(root, 1), 0);
	assert_int_equal(nx_dns_name_len(root, 1), 1);
}

static void eq_and_lower(void **state)
{
	uint8_t a[NX_DNS_NAME_MAX], b[NX_DNS_NAME_MAX];
	size_t la = wname("WwW.ExAmPlE.cOm", a);
	size_t lb = wname("www.example.com", b);
	assert_true(nx_dns_name_eq(a, la, b, lb));
	assert_false(nx_dns_name_eq(a, la, b, lb - 1));
	lb = wname("www.example.con", b);
	assert_false(nx_dns_name_eq(a, la, b, lb));
	/* '[' (0x5b) and '{' (0x7b) differ by 0x20 but are not letters */
	la = wname("a[", a);
	lb = wname("a{", b);
	assert_false(nx_dns_name_eq(a, la, b, lb));
	/* different label structure, same letters */
	la = wname("ab.c", a);
	lb = wname("a.bc", b);
	assert_false(nx_dns_name_eq(a, la, b, lb));

	la = wname("MiXeD.Case-Z.@", a);
	nx_dns_name_lower(a, la);
	lb = wname("mixed.case-z.@", b);
	assert_memory_equal(a, b, lb);
}

static void in_zone(void **state)
{
	uint8_t n[NX_DNS_NAME_MAX], z[NX_DNS_NAME_MAX];
	size_t ln = wname("www.Example.com", n);
	size_t lz = wname("example.COM", z);
	assert_true(nx_dns_name_in_zone(n, ln, z, lz));
	assert_true(nx_dns_name_in_zone(z, lz, z, lz));
	lz = wname("com", z);
	assert_true(nx_dns_name_in_zone(n, ln, z, lz));
	lz = wname(".", z);
	assert_true(nx_dns_name_in_zone(n, ln, z, lz));
	lz = wname("ample.com", z); /* suffix, but not at a label boundary */
	assert_false(nx_dns_name_in_zone(n, ln, z, lz));
	lz = wname("xample.com", z);
	assert_false(nx_dns_name_in_zone(n, ln, z, lz));
	lz = wname("www.example.com.org", z);
	assert_false(nx_dns_name_in_zone(n, ln, z, lz));
	lz = wname("example.org", z);
	assert_false(nx_dns_name_in_zone(n, ln, z, lz));
	ln = wname(".", n);
	lz = wname("com", z);
	assert_false(nx_dns_name_in_zone(n, ln, z, lz));
	/* label content that looks like the zone's wire bytes must not match mid-label */
	const uint8_t tricky[] = {5, 3, 'c', 'o', 'm', 0, 3, 'c', 'o', 'm', 0};
	lz = wname("com", z);
	assert_true(nx_dns_name_in_zone(tricky, sizeof(tricky), z, lz));
	const uint8_t tricky2[] = {5, 'x', 3, 'c', 'o', 'm', 0}; /* "x\003com" */
	assert_false(nx_dns_name_in_zone(tricky2, 7, z, lz));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(from_text_basic),
	    cmocka_unit_test(from_text_bad),
	    cmocka_unit_test(escapes),
	    cmocka_unit_test(to_text_trunc),
	    cmocka_unit_test(roundtrip_all_bytes),
	    cmocka_unit_test(name_len),
	    cmocka_unit_test(eq_and_lower),
	    cmocka_unit_test(in_zone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
