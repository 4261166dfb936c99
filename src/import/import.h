/*
 * Importers from other DNS filters: a Pi-hole v6 Teleporter archive and AdGuard Home's
 * AdGuardHome.yaml become one nxdns configuration text plus a report, line by line, of what
 * was imported and what was not (with the reason: no nxdns equivalent, refused by the loader,
 * disabled in the original).
 *
 * The original file is only read. Every item is checked with the real config loader on its
 * own (nx_conf_load_string) before it goes in, so one rule the loader refuses is reported and
 * left out instead of failing the whole import; the whole text is then loaded once more.
 *
 * Threading: any thread, nothing shared. Memory: struct nx_import owns everything it holds
 * (one arena charged to NX_OWNER_import), released by nx_import_free.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct nx_import;

/* What a report line says about one item of the original. */
enum nx_import_verdict {
	NX_IMPORT_IMPORTED,	 /* carried over (perhaps with a note on how it maps) */
	NX_IMPORT_NOT_IMPORTED,	 /* left out: the loader refused it, or it was disabled */
	NX_IMPORT_NO_EQUIVALENT, /* a feature nxdns does not have (DHCP, blocked services...) */
};

/* Read a Teleporter zip (etc/pihole/gravity.db, etc/pihole/pihole.toml). 0, or an error with
 * the reason in err: -errno (cannot read), NX_EFORMAT (not a Teleporter archive),
 * NX_ECORRUPT (a member that does not parse), NX_ELIMIT (a member over its size cap),
 * -ENOMEM. On success *out is the caller's (nx_import_free). */
int nx_import_pihole(const char *zip_path, struct nx_import **out, char *err, size_t errlen);

/* Read AdGuardHome.yaml; the same contract (NX_ECORRUPT: not YAML, or not a mapping). */
int nx_import_adguardhome(const char *yaml_path, struct nx_import **out, char *err, size_t errlen);

/*
 * The nxdns configuration as YAML into fp (a header comment naming the source first). 0, or
 * NX_ECONFIG when the whole text does not load (err says why; nothing is worth writing then),
 * -ENOMEM, -EIO.
 */
int nx_import_write_config(const struct nx_import *imp, FILE *fp, char *err, size_t errlen);

/* The report: one "imported: ", "not imported: " or "no equivalent: " line per item. */
void nx_import_write_report(const struct nx_import *imp, FILE *fp);

/* Report lines with this verdict (tests and the CLI's summary). */
size_t nx_import_count(const struct nx_import *imp, enum nx_import_verdict v);

void nx_import_free(struct nx_import *imp);
