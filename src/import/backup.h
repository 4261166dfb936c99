/*
 * Backup archives: the configuration, state_dir/lists, state_dir/tls and optionally the query
 * log in one tar.gz (the layout is in backup.c's header), and their restore, which checks the
 * whole archive before it changes anything.
 *
 * Threading: any one thread; blocking file I/O for as long as the archive takes (the admin API
 * runs it on the control thread: DNS keeps answering on the workers). Memory: libarchive's and
 * SQLite's own for the duration, a 64 KiB static I/O buffer (so: not two at once).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct nx_conf;

/*
 * Write the archive of `config_path` and `state_dir` to `file` (through file.tmp-PID and a
 * rename, mode 0600). with_qlog adds a consistent copy of state_dir/querylog.db (SQLite
 * VACUUM INTO; the running writer is no problem). *files (may be NULL): list and TLS files
 * written. 0, or -errno with the reason in err; `file` is left as it was on error.
 */
int nx_backup_write(const char *file, const char *config_path, const char *state_dir,
		    bool with_qlog, size_t *files, char *err, size_t errlen);

#define NX_BACKUP_QUERYLOG 1u /* restore the query log too (refused while a server runs) */

/* What a restore replaced. */
struct nx_backup_restored {
	bool lists;    /* state_dir/lists (and the stale snapshot.nxs removed) */
	bool tls;      /* state_dir/tls */
	bool querylog; /* state_dir/querylog.db */
};

/* A last word on the staged configuration before anything is swapped in: 0 to go on, else
 * the restore stops with the reason written into err (returned as NX_ECONFIG). */
typedef int (*nx_backup_check_cb)(void *ud, const struct nx_conf *staged, char *err, size_t errlen);

/*
 * Restore `file` over `config_path` and the state_dir its configuration names. Everything is
 * read into staging places and the configuration loaded (and passed to `check`, may be NULL)
 * first: NX_ECORRUPT (not a backup, damaged, a member outside the layout), NX_ECONFIG (the
 * configuration does not load, or check refused it), -EBUSY (NX_BACKUP_QUERYLOG while a server
 * answers on the state_dir's control socket), -errno (cannot read) all leave every file as it
 * was. Then the swap: -EIO if a step of it fails (err says which; earlier steps stay done).
 * The previous configuration is kept as config_path.bak.
 */
int nx_backup_restore(const char *file, const char *config_path, unsigned flags,
		      nx_backup_check_cb check, void *ud, struct nx_backup_restored *res, char *err,
		      size_t errlen);

/* libarchive is dlopen()ed while an archive object exists (import/archive_dl.c): true while it
 * is mapped (tests). */
bool nx_import_archive_loaded(void);

/* Why the last archive_read_new/archive_write_new returned NULL: the library could not be
 * loaded (the reason names the package), else "out of memory". Valid until the next load. */
const char *nx_import_archive_error(void);
