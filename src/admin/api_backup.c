/*
 * GET /api/backup[?querylog=true] and POST /api/restore: the archives of import/backup.h over
 * the admin API.
 *
 * The backup is written to <state_dir>/.backup-api-*.tar.gz, opened, unlinked and handed to
 * MHD as a file-descriptor response (sent from the page cache, nothing in our heap), as an
 * attachment. The restore's body arrives as a file (http.c streams NX_ADMIN_UPLOAD_PATH to
 * state_dir after authorizing it from the headers); it is restored without the query log
 * (this server's writer holds it open: use `nxdns restore --with-querylog` with the server
 * stopped), refused before anything changes if the archive's configuration would not be
 * accepted by a reload (no admin password, or no second factor, where the running one has
 * them: the rule of daemon.c's reload guard), and then reloaded. Both block the control thread
 * for as long as the archive takes; DNS keeps answering on the workers.
 */
#include "admin/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "conf/conf.h"
#include "import/backup.h"

int nx_admin_handle_backup(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_conf(a);
	if (!c || c->path[0] == '<') {
		return nx_admin_reply_error(req, 503, "not_configured", NULL,
					    "the server has no configuration file to back up");
	}
	const char *q = nx_admin_req_arg(req, "querylog");
	bool qlog = q && (!strcmp(q, "true") || !strcmp(q, "1"));
	if (q && !qlog && strcmp(q, "false") && strcmp(q, "0")) {
		return nx_admin_reply_error(req, 400, "bad_request", "querylog",
					    "querylog is true or false");
	}
	static unsigned seq; /* two backups in one second from one process */
	char path[4096], err[4200];
	if (snprintf(path, sizeof(path), "%s/.backup-api-%ld-%u.tar.gz", c->state_dir,
		     (long)getpid(), ++seq) >= (int)sizeof(path)) {
		return nx_admin_reply_error(req, 500, "backup_failed", NULL, "state_dir too long");
	}
	size_t files = 0;
	if (qlog && req->admin->hooks.qlog_commit) {
		req->admin->hooks.qlog_commit(req->admin->hooks.ud); /* the records it holds too */
	}
	int rc = nx_backup_write(path, c->path, c->state_dir, qlog, &files, err, sizeof(err));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "backup failed: %s", err);
		return nx_admin_reply_error(req, 500, "backup_failed", NULL, "%s", err);
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unlink(path); /* the open descriptor keeps it for as long as MHD sends it */
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0) {
			close(fd);
		}
		return nx_admin_reply_error(req, 500, "backup_failed", NULL, "%s", strerror(errno));
	}
	struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!r) {
		close(fd);
		return -ENOMEM;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/gzip");
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
	snprintf(req->disposition, sizeof(req->disposition),
		 "attachment; filename=\"nxdns-backup-%s%s.tar.gz\"", stamp,
		 qlog ? "-querylog" : "");
	nx_log(NX_LOG_INFO, "admin", "backup downloaded (%zu list and TLS files%s, %lld bytes)",
	       files, qlog ? ", the query log" : "", (long long)st.st_size);
	return nx_admin_reply_response(req, 200, r);
}

/* A restored configuration is refused where a reload would refuse it (daemon.c). */
static int keeps_credentials(void *ud, const struct nx_conf *staged, char *err, size_t errlen)
{
	const struct nx_conf *run = nx_admin_conf(ud);
	if (run && run->admin_password_hash && !staged->admin_password_hash) {
		snprintf(err, errlen,
			 "the archive's configuration has no admin password while this server has "
			 "one: restoring it over the API would open setup mode (restore it with "
			 "`nxdns restore` and a restart if that is meant)");
		return NX_ECONFIG;
	}
	if (run && run->admin_totp_secret && !staged->admin_totp_secret &&
	    !staged->admin_totp_off) {
		snprintf(err, errlen,
			 "the archive's configuration has no second factor while this server has "
			 "one (remove it first with DELETE /api/auth/totp if that is meant)");
		return NX_ECONFIG;
	}
	return 0;
}

int nx_admin_handle_restore(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_conf(a);
	if (!req->upload || !req->upload_path) {
		return nx_admin_reply_error(req, 400, "bad_request", NULL,
					    "send the backup archive as the request body");
	}
	if (!c || c->path[0] == '<' || !a->hooks.reload) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL,
					    "the server cannot rewrite its configuration file");
	}
	if (req->upload_len == 0) {
		unlink(req->upload_path);
		return nx_admin_reply_error(req, 400, "bad_archive", NULL, "the body is empty");
	}
	char config_path[4096], err[4200];
	snprintf(config_path, sizeof(config_path), "%s", c->path);
	struct nx_backup_restored res;
	int rc = nx_backup_restore(req->upload_path, config_path, 0, keeps_credentials, a, &res,
				   err, sizeof(err));
	unlink(req->upload_path); /* now, not at completion: the reply may be read before that */
	if (rc == NX_ECORRUPT || rc == NX_ECONFIG) {
		nx_log(NX_LOG_WARN, "admin", "restore refused: %s", err);
		return nx_admin_reply_error(req, 400, "bad_archive", NULL,
					    "%s; nothing was changed", err);
	}
	if (rc == -EIO) {
		nx_log(NX_LOG_ERR, "admin", "restore stopped part way: %s", err);
		return nx_admin_reply_error(req, 500, "restore_incomplete", NULL, "%s", err);
	}
	if (rc) {
		return nx_admin_reply_error(req, 500, "restore_failed", NULL,
					    "%s; nothing was changed", err);
	}
	nx_log(NX_LOG_INFO, "admin", "restored from an uploaded backup (%s%s)",
	       res.lists ? "configuration, lists" : "configuration", res.tls ? ", TLS" : "");
	char rerr[NX_CONF_ERR_MAX];
	rc = a->hooks.reload(a->hooks.ud, rerr, sizeof(rerr));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "restore: reload failed: %s", rerr);
		return nx_admin_reply_error(
		    req, 500, "reload_failed", NULL,
		    "restored, but the reload failed (a restart applies it): "
		    "%s",
		    rerr);
	}
	/* the lists were swapped under a running server: a restart rebuilds the snapshot from
	 * them (the reload compiled the sources whose input changed) */
	return nx_admin_reply_json(req, 200,
				   json_pack("{s:b, s:b, s:b, s:b, s:b}", "config", true, "lists",
					     res.lists, "tls", res.tls, "querylog", false,
					     "restart_recommended", res.lists || res.tls));
}
