/*
 * Backup archives for `nxdns backup`/`restore` (src/cli/backup.c) and the admin API
 * (GET /api/backup, POST /api/restore): one archive with what a box needs to come back as it was:
 * its configuration, its list state (every source's download and compiled bodies, so it serves
 * without downloading again), the TLS identity clients may have pinned, and optionally the query
 * log.
 *
 * Layout: a gzip-compressed POSIX tar (pax), members in this order, all under nxdns-backup/:
 *   manifest.json       {"format": "nxdns-backup", "version": 1, "nxdns": VERSION,
 *                        "created": unix seconds, "querylog": bool}; always first
 *   config.yaml         the configuration file as it was (comments kept)
 *   state/lists/...     <state_dir>/lists: per source NAME/ its download and bodies
 *   state/tls/cert.pem, state/tls/key.pem   the generated certificate, when there is one
 *   state/querylog.db   with --with-querylog: a consistent copy (SQLite VACUUM INTO, so a
 *                       running writer is no problem)
 * The archive holds the password hash, the TOTP secret and a private key: it is written 0600.
 *
 * Restore reads the whole archive into staging places beside the live ones (the same
 * filesystems) and loads the staged configuration with the real loader before anything live is
 * touched; a bad archive (not gzip/tar, no or a wrong manifest, a member outside the layout, a
 * link, a path with "..", a configuration that does not load, a short read) removes the
 * staging and leaves everything as it was. Then it swaps: the lists and tls directories with
 * renameat2(RENAME_EXCHANGE) (atomic, the old one lands in the staging and is removed), the
 * query log by rename, the configuration last by rename (the old one kept as CONFIG.bak). The
 * snapshot built from the old lists is removed so the next start rebuilds it from the restored
 * bodies. The query log is replaced only when asked and only with the server stopped (its
 * control socket answers while it runs): SQLite's writer would keep the old file open.
 */
#include "import/backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <sqlite3.h>

#include "base/err.h"
#include "conf/conf.h"

/* admin/control.h names it NX_ADMIN_CONTROL_SOCKET; import/ sits below admin/ */
#define CONTROL_SOCKET "control.sock"
#define PREFIX "nxdns-backup/"
#define MANIFEST_FORMAT "nxdns-backup"
#define MANIFEST_VERSION 1
#define MANIFEST_MAX (16 * 1024)       /* bytes: a few fields */
#define CONFIG_MAX (16u * 1024 * 1024) /* bytes: the loader's own file limit is lower */
#define MEMBERS_MAX 100000	       /* 64 sources with a few files each, with room */
#define IO_CHUNK (64 * 1024)

static unsigned char io_buf[IO_CHUNK];

/* snprintf that says when it cut: -ENAMETOOLONG (paths), the text still NUL-terminated.
 * Messages may be cut; a path that was is never used. */
__attribute__((format(printf, 3, 4))) static int fmt(char *out, size_t cap, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(out, cap, f, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- backup ------------------------------------------------------------------------------- */

struct bk {
	struct archive *a;
	const char *root; /* the directory being walked */
	const char *as;	  /* its name in the archive */
	size_t files;
	char err[600];
};

static struct bk *walk_bk; /* nftw has no user pointer */

static int add_file(struct bk *b, const char *path, const char *name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fmt(b->err, sizeof(b->err), "%s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, st.st_mode & 0600);
	archive_entry_set_mtime(e, st.st_mtime, 0);
	int rc = archive_write_header(b->a, e) == ARCHIVE_OK ? 0 : -1;
	off_t left = st.st_size;
	while (!rc && left > 0) {
		ssize_t r = read(fd, io_buf, sizeof(io_buf));
		if (r <= 0) {
			fmt(b->err, sizeof(b->err), "%s: %s", path,
			    r < 0 ? strerror(errno) : "changed while being read");
			rc = -1;
			break;
		}
		if (archive_write_data(b->a, io_buf, (size_t)r) != r) {
			rc = -1;
		}
		left -= r;
	}
	if (rc && !b->err[0]) {
		fmt(b->err, sizeof(b->err), "archive: %s", archive_error_string(b->a));
	}
	archive_entry_free(e);
	close(fd);
	b->files += rc == 0;
	return rc;
}

static int add_mem(struct bk *b, const char *name, const void *data, size_t len)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_mtime(e, time(NULL), 0);
	int rc = archive_write_header(b->a, e) == ARCHIVE_OK &&
			 archive_write_data(b->a, data, len) == (la_ssize_t)len
		     ? 0
		     : -1;
	if (rc) {
		fmt(b->err, sizeof(b->err), "archive: %s", archive_error_string(b->a));
	}
	archive_entry_free(e);
	return rc;
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	struct bk *b = walk_bk;
	if (type != FTW_F) {
		return 0; /* directories are implied by their files; links and sockets are not state
			   */
	}
	char name[PATH_MAX + 64];
	fmt(name, sizeof(name), "%s%s", b->as, path + strlen(b->root));
	return add_file(b, path, name) ? 1 : 0;
}

static int add_tree(struct bk *b, const char *dir, const char *as)
{
	struct stat st;
	if (stat(dir, &st) != 0) {
		return 0; /* nothing compiled yet */
	}
	b->root = dir;
	b->as = as;
	walk_bk = b;
	return nftw(dir, walk_one, 16, FTW_PHYS) == 0 ? 0 : -1;
}

/* A consistent copy of the query log beside it, NULL-terminated path in out. */
static int querylog_copy(const char *db_path, char *out, size_t cap, char *err, size_t errlen)
{
	fmt(out, cap, "%s.backup-%ld", db_path, (long)getpid());
	unlink(out);
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, 5000);
		char *sql = sqlite3_mprintf("VACUUM INTO %Q", out);
		rc = sql ? sqlite3_exec(db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
		sqlite3_free(sql);
	}
	if (rc != SQLITE_OK) {
		fmt(err, errlen, "%s: %s", db_path, db ? sqlite3_errmsg(db) : "cannot open");
	}
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -1;
}

int nx_backup_write(const char *file, const char *config_path, const char *state_dir,
		    bool with_qlog, size_t *files, char *err, size_t errlen)
{
	struct stat st;
	char tmp[PATH_MAX], qcopy[PATH_MAX] = "", path[PATH_MAX];
	if (fmt(tmp, sizeof(tmp), "%s.tmp-%ld", file, (long)getpid())) {
		fmt(err, errlen, "%s: path too long", file);
		return -ENAMETOOLONG;
	}
	struct bk b = {0};
	int rc = -EIO;
	/* secrets inside: the archive is the owner's only (not umask: that is the process's) */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		fmt(err, errlen, "%s: %s", tmp, strerror(errno));
		return rc;
	}
	b.a = archive_write_new();
	if (!b.a || archive_write_add_filter_gzip(b.a) != ARCHIVE_OK ||
	    archive_write_set_format_pax_restricted(b.a) != ARCHIVE_OK ||
	    archive_write_open_fd(b.a, fd) != ARCHIVE_OK) {
		fmt(b.err, sizeof(b.err), "%s: %s", tmp,
		    b.a ? archive_error_string(b.a) : nx_import_archive_error());
		goto out;
	}
	char manifest[512];
	int mn = snprintf(manifest, sizeof(manifest),
			  "{\"format\": \"" MANIFEST_FORMAT "\", \"version\": %d, \"nxdns\": "
			  "\"%s\", \"created\": %lld, \"querylog\": %s}\n",
			  MANIFEST_VERSION, NX_VERSION, (long long)time(NULL),
			  with_qlog ? "true" : "false");
	if (add_mem(&b, PREFIX "manifest.json", manifest, (size_t)mn) ||
	    add_file(&b, config_path, PREFIX "config.yaml")) {
		goto out;
	}
	fmt(path, sizeof(path), "%s/lists", state_dir);
	if (add_tree(&b, path, PREFIX "state/lists")) {
		if (!b.err[0]) {
			fmt(b.err, sizeof(b.err), "%s: %s", path, strerror(errno));
		}
		goto out;
	}
	const char *tls[] = {"cert.pem", "key.pem"};
	for (int i = 0; i < 2; i++) {
		char name[64];
		fmt(path, sizeof(path), "%s/tls/%s", state_dir, tls[i]);
		fmt(name, sizeof(name), PREFIX "state/tls/%s", tls[i]);
		if (stat(path, &st) == 0 && add_file(&b, path, name)) {
			goto out;
		}
	}
	if (with_qlog) {
		fmt(path, sizeof(path), "%s/querylog.db", state_dir);
		if (stat(path, &st) != 0) {
			fmt(b.err, sizeof(b.err), "%s: no query log to back up", path);
			rc = -ENOENT;
			goto out;
		}
		if (querylog_copy(path, qcopy, sizeof(qcopy), b.err, sizeof(b.err)) ||
		    add_file(&b, qcopy, PREFIX "state/querylog.db")) {
			goto out;
		}
	}
	if (archive_write_close(b.a) != ARCHIVE_OK) {
		fmt(b.err, sizeof(b.err), "%s: %s", tmp, archive_error_string(b.a));
		goto out;
	}
	if (fsync(fd) != 0 || rename(tmp, file) != 0) {
		fmt(b.err, sizeof(b.err), "%s: %s", file, strerror(errno));
		goto out;
	}
	rc = 0;
	if (files) {
		*files = b.files - 1; /* the configuration is not a state file */
	}
out:
	if (b.a) {
		archive_write_free(b.a);
	}
	close(fd);
	if (qcopy[0]) {
		unlink(qcopy);
	}
	if (rc) {
		unlink(tmp);
		fmt(err, errlen, "%s", b.err);
	}
	return rc;
}

/* ---- restore ------------------------------------------------------------------------------ */

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p for the directories of `path` below `base` (exclusive of the last component). */
static int mkdirs(char *path, size_t base_len)
{
	for (char *p = path + base_len + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			int r = mkdir(path, 0700);
			*p = '/';
			if (r != 0 && errno != EEXIST) {
				return -errno;
			}
		}
	}
	return 0;
}

/* A member name inside the layout: "state/lists/<rel>", "state/tls/(cert|key).pem",
 * "state/querylog.db"; no "..", no empty component. */
static bool state_name_ok(const char *rel)
{
	if (!strcmp(rel, "state/tls/cert.pem") || !strcmp(rel, "state/tls/key.pem") ||
	    !strcmp(rel, "state/querylog.db")) {
		return true;
	}
	if (strncmp(rel, "state/lists/", 12) || !rel[12]) {
		return false;
	}
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			return false;
		}
		p += n;
		if (*p == '/') {
			p++;
			if (!*p) {
				return false;
			}
		}
	}
	return true;
}

/* Copy the current member's data into a new file at path (mode 0600, O_EXCL). */
static int extract_to(struct archive *a, const char *path, la_int64_t max, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fmt(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	la_int64_t total = 0;
	int rc = 0;
	for (;;) {
		la_ssize_t r = archive_read_data(a, io_buf, sizeof(io_buf));
		if (r < 0) {
			fmt(err, errlen, "the archive is damaged: %s", archive_error_string(a));
			rc = -1;
			break;
		}
		if (r == 0) {
			break;
		}
		total += r;
		if (max && total > max) {
			fmt(err, errlen, "%s: larger than %lld bytes", path, (long long)max);
			rc = -1;
			break;
		}
		if (write(fd, io_buf, (size_t)r) != r) {
			fmt(err, errlen, "%s: %s", path, strerror(errno));
			rc = -1;
			break;
		}
	}
	if (!rc && fsync(fd) != 0) {
		fmt(err, errlen, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	close(fd);
	return rc;
}

static int read_manifest(struct archive *a, bool *has_qlog, char *err, size_t errlen)
{
	char buf[MANIFEST_MAX + 1];
	size_t n = 0;
	for (;;) {
		la_ssize_t r = archive_read_data(a, buf + n, MANIFEST_MAX - n);
		if (r < 0) {
			fmt(err, errlen, "the archive is damaged: %s", archive_error_string(a));
			return -1;
		}
		if (r == 0) {
			break;
		}
		n += (size_t)r;
		if (n == MANIFEST_MAX) {
			fmt(err, errlen, "manifest.json: larger than %d bytes", MANIFEST_MAX);
			return -1;
		}
	}
	buf[n] = '\0';
	json_error_t je;
	json_t *m = json_loads(buf, 0, &je);
	const char *format = m ? json_string_value(json_object_get(m, "format")) : NULL;
	json_t *ver = m ? json_object_get(m, "version") : NULL;
	int rc = 0;
	if (!m || !format || strcmp(format, MANIFEST_FORMAT)) {
		fmt(err, errlen, "not an nxdns backup (manifest.json: no format \"%s\")",
		    MANIFEST_FORMAT);
		rc = -1;
	} else if (!json_is_integer(ver) || json_integer_value(ver) != MANIFEST_VERSION) {
		fmt(err, errlen, "backup format version %lld: this nxdns reads version %d",
		    json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL,
		    MANIFEST_VERSION);
		rc = -1;
	}
	*has_qlog = m && json_is_true(json_object_get(m, "querylog"));
	json_decref(m);
	return rc;
}

/* Is a server answering on this state_dir's control socket? */
static bool server_running(const char *state_dir)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (fmt(sa.sun_path, sizeof(sa.sun_path), "%s/%s", state_dir, CONTROL_SOCKET)) {
		return false;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return false;
	}
	bool up = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return up;
}

/* Swap staged dir into live (atomically when live exists); the old one stays at staged. */
static int swap_dir(const char *staged, const char *live)
{
	struct stat st;
	if (stat(live, &st) == 0) {
		return renameat2(AT_FDCWD, staged, AT_FDCWD, live, RENAME_EXCHANGE) == 0 ? 0
											 : -errno;
	}
	return rename(staged, live) == 0 ? 0 : -errno;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		return -errno;
	}
	char tmp[PATH_MAX];
	fmt(tmp, sizeof(tmp), "%s.tmp-%ld", to, (long)getpid());
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = out < 0 ? -errno : 0;
	ssize_t r;
	while (!rc && (r = read(in, io_buf, sizeof(io_buf))) != 0) {
		if (r < 0 || write(out, io_buf, (size_t)r) != r) {
			rc = -EIO;
		}
	}
	if (out >= 0) {
		if (!rc && fsync(out) != 0) {
			rc = -errno;
		}
		close(out);
	}
	close(in);
	if (!rc && rename(tmp, to) != 0) {
		rc = -errno;
	}
	if (rc) {
		unlink(tmp);
	}
	return rc;
}

int nx_backup_restore(const char *file, const char *config_path, unsigned flags,
		      nx_backup_check_cb check, void *ud, struct nx_backup_restored *res, char *err,
		      size_t errlen)
{
	bool with_qlog = flags & NX_BACKUP_QUERYLOG;
	int why = NX_ECORRUPT; /* the error returned for a bad archive */
	memset(res, 0, sizeof(*res));
	err[0] = '\0';
	char staged_cfg[PATH_MAX], stage[PATH_MAX] = "", path[PATH_MAX];
	if (fmt(staged_cfg, sizeof(staged_cfg), "%s.restore-%ld", config_path, (long)getpid())) {
		fmt(err, errlen, "%s: path too long", config_path);
		return -ENAMETOOLONG;
	}
	unlink(staged_cfg);
	struct nx_conf *nc = NULL;
	bool have_manifest = false, have_config = false, has_qlog = false, got_qlog = false;
	bool got_lists = false, got_tls = false, committing = false, made_state_dir = false;
	char nc_state_dir[PATH_MAX] = "";
	size_t members = 0;
	int rc = -1;
	struct archive *a = archive_read_new();
	if (!a) {
		fmt(err, errlen, "%s", nx_import_archive_error());
		return -ENOMEM;
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, file, IO_CHUNK) != ARCHIVE_OK) {
		fmt(err, errlen, "%s: %s", file, archive_error_string(a));
		/* an unreadable file is -errno; one libarchive cannot read is a bad archive */
		why = access(file, R_OK) != 0 ? -errno : NX_ECORRUPT;
		goto out;
	}
	/* The staging directory for state is made once the config names the state_dir. */
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF) {
			break;
		}
		if (r != ARCHIVE_OK) {
			fmt(err, errlen, "%s: not a readable nxdns backup: %s", file,
			    archive_error_string(a));
			goto out;
		}
		const char *name = archive_entry_pathname(e);
		name = name ? name : "";
		if (++members > MEMBERS_MAX) {
			fmt(err, errlen, "more than %d members", MEMBERS_MAX);
			goto out;
		}
		if (strncmp(name, PREFIX, strlen(PREFIX))) {
			fmt(err, errlen, "member '%s' is outside " PREFIX, name);
			goto out;
		}
		const char *rel = name + strlen(PREFIX);
		mode_t type = archive_entry_filetype(e);
		if (type == AE_IFDIR) {
			continue; /* made as their files need them */
		}
		if (type != AE_IFREG) {
			fmt(err, errlen, "member '%s' is not a regular file", name);
			goto out;
		}
		if (!have_manifest) {
			if (strcmp(rel, "manifest.json")) {
				fmt(err, errlen,
				    "not an nxdns backup (its first member is '%s', not " PREFIX
				    "manifest.json)",
				    name);
				goto out;
			}
			if (read_manifest(a, &has_qlog, err, sizeof(err))) {
				goto out;
			}
			have_manifest = true;
			continue;
		}
		if (!strcmp(rel, "config.yaml")) {
			if (have_config) {
				fmt(err, errlen, "two config.yaml members");
				goto out;
			}
			if (extract_to(a, staged_cfg, CONFIG_MAX, err, sizeof(err))) {
				goto out;
			}
			char cerr[NX_CONF_ERR_MAX];
			if (nx_conf_load(staged_cfg, &nc, cerr, sizeof(cerr)) != 0) {
				fmt(err, errlen, "the archive's configuration does not load: %s",
				    cerr);
				why = NX_ECONFIG;
				goto out;
			}
			if (check && check(ud, nc, cerr, sizeof(cerr))) {
				fmt(err, errlen, "%s", cerr);
				why = NX_ECONFIG;
				goto out;
			}
			have_config = true;
			fmt(nc_state_dir, sizeof(nc_state_dir), "%s", nc->state_dir);
			made_state_dir = mkdir(nc->state_dir, 0700) == 0;
			if (!made_state_dir && errno != EEXIST) {
				fmt(err, errlen, "%s: %s", nc->state_dir, strerror(errno));
				goto out;
			}
			if (fmt(stage, sizeof(stage), "%s/.restore-%ld", nc->state_dir,
				(long)getpid())) {
				fmt(err, errlen, "%s: path too long", nc->state_dir);
				stage[0] = '\0';
				goto out;
			}
			rm_tree(stage);
			if (mkdir(stage, 0700) != 0) {
				fmt(err, errlen, "%s: %s", stage, strerror(errno));
				stage[0] = '\0';
				goto out;
			}
			continue;
		}
		if (!have_config) {
			fmt(err, errlen, "member '%s' comes before config.yaml", name);
			goto out;
		}
		if (!state_name_ok(rel)) {
			fmt(err, errlen, "member '%s' is outside the backup layout", name);
			goto out;
		}
		bool qlog = !strcmp(rel, "state/querylog.db");
		if (qlog && !with_qlog) {
			continue; /* kept in the archive, not restored unless asked */
		}
		got_qlog |= qlog;
		got_lists |= !strncmp(rel, "state/lists/", 12);
		got_tls |= !strncmp(rel, "state/tls/", 10);
		if (fmt(path, sizeof(path), "%s/%s", stage, rel + strlen("state/"))) {
			fmt(err, errlen, "member '%.200s...': name too long", name);
			goto out;
		}
		if (mkdirs(path, strlen(stage)) || extract_to(a, path, 0, err, sizeof(err))) {
			if (!err[0]) {
				fmt(err, errlen, "%s: %s", path, strerror(errno));
			}
			goto out;
		}
	}
	if (!have_manifest || !have_config) {
		fmt(err, errlen, "not an nxdns backup (no %s)",
		    have_manifest ? "config.yaml" : "manifest.json");
		goto out;
	}
	if (with_qlog && !got_qlog) {
		fmt(err, errlen, "--with-querylog: the archive has no query log%s",
		    has_qlog ? " (the manifest says it has one: damaged?)" : "");
		goto out;
	}
	if (with_qlog && server_running(nc->state_dir)) {
		why = -EBUSY;
		fmt(err, errlen,
		    "--with-querylog: a server is running on %s (its control socket "
		    "answers): stop it first, its writer keeps the query log open",
		    nc->state_dir);
		goto out;
	}

	/* ---- the archive is good: swap it in (a failure from here on is partial: -EIO) ---- */
	committing = true;
	char live[PATH_MAX], staged[PATH_MAX];
	if (got_lists) {
		fmt(staged, sizeof(staged), "%s/lists", stage);
		fmt(live, sizeof(live), "%s/lists", nc->state_dir);
		if ((rc = swap_dir(staged, live))) {
			fmt(err, errlen, "%s: %s", live, strerror(-rc));
			goto out;
		}
		/* built from the old lists: the next start rebuilds it from the restored ones */
		fmt(live, sizeof(live), "%s/snapshot.nxs", nc->state_dir);
		unlink(live);
	}
	if (got_tls) {
		fmt(staged, sizeof(staged), "%s/tls", stage);
		fmt(live, sizeof(live), "%s/tls", nc->state_dir);
		if ((rc = swap_dir(staged, live))) {
			fmt(err, errlen, "%s: %s", live, strerror(-rc));
			goto out;
		}
	}
	if (got_qlog) {
		fmt(staged, sizeof(staged), "%s/querylog.db", stage);
		fmt(live, sizeof(live), "%s/querylog.db-wal", nc->state_dir);
		unlink(live);
		fmt(live, sizeof(live), "%s/querylog.db-shm", nc->state_dir);
		unlink(live);
		fmt(live, sizeof(live), "%s/querylog.db", nc->state_dir);
		if (rename(staged, live) != 0) {
			fmt(err, errlen, "%s: %s", live, strerror(errno));
			rc = -1;
			goto out;
		}
	}
	struct stat st;
	if (stat(config_path, &st) == 0) {
		fmt(path, sizeof(path), "%s.bak", config_path);
		if ((rc = copy_file(config_path, path))) {
			fmt(err, errlen, "%s: %s", path, strerror(-rc));
			goto out;
		}
	}
	if (rename(staged_cfg, config_path) != 0) {
		fmt(err, errlen, "%s: %s", config_path, strerror(errno));
		rc = -1;
		goto out;
	}
	rc = 0;
	res->lists = got_lists;
	res->tls = got_tls;
	res->querylog = got_qlog;
out:
	archive_read_free(a);
	unlink(staged_cfg);
	if (stage[0]) {
		rm_tree(stage);
	}
	nx_conf_free(nc);
	if (made_state_dir && !committing) {
		rmdir(nc_state_dir);
	}
	if (rc && !committing) {
		return why;
	}
	return rc ? -EIO : 0;
}
