/*
 * The pihole.toml reader (import/toml.c) on arbitrary bytes: it either parses or refuses with
 * a "line N: " reason, never reads past the input, and everything it made goes back to the
 * ledger with the arena. Properties: a parse that succeeds yields keys that are non-empty and
 * found again by nx_toml_get; a refusal names a line within the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "import/impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_toml: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #x);                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nx_import *imp = nx_import_new("fuzz", "input");
	if (!imp) {
		return 0;
	}
	struct nx_toml_val *v = NULL;
	char err[256] = "";
	int rc = nx_toml_parse(imp, (const char *)data, size, &v, err, sizeof(err));
	if (rc == 0) {
		for (const struct nx_toml_val *e = v; e; e = e->next) {
			CHECK(e->key[0] != '\0');
			CHECK(nx_toml_get(v, e->key) != NULL);
			CHECK(e->is_array || e->scalar != NULL);
		}
	} else {
		CHECK(rc == NX_ECORRUPT);
		unsigned line = 0;
		CHECK(sscanf(err, "line %u: ", &line) == 1);
		size_t lines = 1;
		for (size_t i = 0; i < size; i++) {
			lines += data[i] == '\n';
		}
		CHECK(line >= 1 && line <= lines);
	}
	nx_import_free(imp);
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	CHECK(rows[NX_OWNER_import].bytes == 0);
	return 0;
}
