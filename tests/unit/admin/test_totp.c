/*
 * The TOTP second factor's arithmetic: RFC 6238 appendix B's SHA-1 test vectors (8 digits, and
 * their last 6 as nxdns uses them), the ±1 step window, each step accepted once, malformed
 * codes, and base32 (RFC 4648 section 10's vectors, without padding).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admin/auth.h"
#include "base/err.h"

/* RFC 6238 appendix B: the SHA-1 seed is the ASCII "12345678901234567890" */
static const uint8_t seed[] = "12345678901234567890";
static const struct {
	uint64_t t;
	uint32_t totp8;
} vectors[] = {
    {59, 94287082},	    {1111111109, 7081804},  {1111111111, 14050471},
    {1234567890, 89005924}, {2000000000, 69279037}, {20000000000ull, 65353130},
};

static void rfc6238_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		uint64_t step = vectors[i].t / NX_ADMIN_TOTP_STEP_S;
		assert_int_equal(nx_admin_hotp(seed, 20, step, 8), vectors[i].totp8);
		assert_int_equal(nx_admin_hotp(seed, 20, step, 6), vectors[i].totp8 % 1000000);
	}
	/* RFC 4226 appendix D: HOTP of the same secret, counters 0 and 9 */
	assert_int_equal(nx_admin_hotp(seed, 20, 0, 6), 755224);
	assert_int_equal(nx_admin_hotp(seed, 20, 9, 6), 520489);
}

static void code_of(uint64_t t, char out[8])
{
	snprintf(out, 8, "%06u", (unsigned)nx_admin_hotp(seed, 20, t / 30, 6));
}

static void window_and_replay(void **state)
{
	(void)state;
	uint64_t last = 0, t = 1111111111; /* step 37037037 */
	char c[8];
	code_of(t, c);
	assert_string_equal(c, "050471");
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &last), 0);
	assert_int_equal(last, t / 30 + 1);
	/* the same code again, even within its step: refused */
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &last), -EALREADY);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t + 29, &last), -EALREADY);
	/* the next step's code, presented a step early (the authenticator's clock runs fast) */
	code_of(t + 30, c);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &last), 0);
	assert_int_equal(last, t / 30 + 2);
	/* an older code after a newer one was used: refused as a replay */
	code_of(t - 30, c);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &last), -EALREADY);
	/* two steps away: outside the window either way */
	uint64_t fresh = 0;
	code_of(t + 60, c);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &fresh), NX_ENOTFOUND);
	code_of(t - 60, c);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &fresh), NX_ENOTFOUND);
	code_of(t - 30, c); /* one step late: accepted */
	assert_int_equal(nx_admin_totp_check(seed, 20, c, t, &fresh), 0);
	/* another secret's code is wrong */
	static const uint8_t other[] = "abcdefghijabcdefghij";
	fresh = 0;
	code_of(t, c);
	assert_int_equal(nx_admin_totp_check(other, 20, c, t, &fresh), NX_ENOTFOUND);
	assert_int_equal(fresh, 0);
	/* the epoch's first step has no step before it */
	uint64_t none = 0;
	code_of(0, c);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, 0, &none), 0);
	assert_int_equal(nx_admin_totp_check(seed, 20, c, 0, &none), -EALREADY);
}

static void malformed_codes(void **state)
{
	(void)state;
	uint64_t last = 0;
	const char *bad[] = {"", "12345", "1234567", "12345a", " 12345", "12 345", "+12345"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(nx_admin_totp_check(seed, 20, bad[i], 59, &last), NX_EMALFORMED);
	}
	assert_int_equal(nx_admin_totp_check(seed, 20, NULL, 59, &last), NX_EMALFORMED);
	assert_int_equal(last, 0);
}

static void base32(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = {{"", ""},
		 {"f", "MY"},
		 {"fo", "MZXQ"},
		 {"foo", "MZXW6"},
		 {"foob", "MZXW6YQ"},
		 {"fooba", "MZXW6YTB"},
		 {"foobar", "MZXW6YTBOI"}};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char out[32];
		uint8_t back[32];
		size_t n = 99;
		assert_int_equal(nx_admin_base32_encode((const uint8_t *)v[i].in, strlen(v[i].in),
							out, sizeof(out)),
				 strlen(v[i].out));
		assert_string_equal(out, v[i].out);
		assert_int_equal(nx_admin_base32_decode(out, back, sizeof(back), &n), 0);
		assert_int_equal(n, strlen(v[i].in));
		assert_memory_equal(back, v[i].in, n);
	}
	char small[4];
	assert_int_equal(nx_admin_base32_encode((const uint8_t *)"foo", 3, small, sizeof(small)),
			 0);
	uint8_t b[4];
	size_t n;
	assert_int_equal(nx_admin_base32_decode("MZXW1", b, sizeof(b), &n), NX_EMALFORMED);
	assert_int_equal(nx_admin_base32_decode("mzxw6", b, sizeof(b), &n), NX_EMALFORMED);
	assert_int_equal(nx_admin_base32_decode("MZXW6YTBOI", b, sizeof(b), &n), NX_EMALFORMED);
	/* a 160-bit secret is 32 characters */
	uint8_t key[NX_ADMIN_TOTP_KEY_BYTES] = {0};
	char text[NX_ADMIN_TOTP_B32_MAX + 1];
	assert_int_equal(nx_admin_base32_encode(key, sizeof(key), text, sizeof(text)), 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rfc6238_vectors),
	    cmocka_unit_test(window_and_replay),
	    cmocka_unit_test(malformed_codes),
	    cmocka_unit_test(base32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
