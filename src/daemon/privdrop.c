#include "daemon/privdrop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "daemon/lists.h"

/* getpwnam_r / getgrnam_r scratch: glibc's suggested size is 1 KiB; NSS modules may want
 * more, so one retry at 16 KiB (a start-up path; stack is fine). */
#define PW_BUF 16384

static int lookup_user(const char *name, uid_t *uid, gid_t *gid)
{
	char buf[PW_BUF];
	struct passwd pw, *res = NULL;
	int rc = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (rc != 0) {
		return -rc;
	}
	if (!res) {
		return NX_ENOTFOUND;
	}
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	return 0;
}

static int lookup_group(const char *name, gid_t *gid)
{
	char buf[PW_BUF];
	struct group gr, *res = NULL;
	int rc = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
	if (rc != 0) {
		return -rc;
	}
	if (!res) {
		return NX_ENOTFOUND;
	}
	*gid = gr.gr_gid;
	return 0;
}

static void name_of_gid(gid_t gid, char *out, size_t cap)
{
	char buf[PW_BUF];
	struct group gr, *res = NULL;
	if (getgrgid_r(gid, &gr, buf, sizeof(buf), &res) == 0 && res) {
		snprintf(out, cap, "%s", gr.gr_name);
	} else {
		snprintf(out, cap, "%lu", (unsigned long)gid);
	}
}

int nx_privdrop_plan(const struct nx_conf *c, struct nx_privdrop *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->root = geteuid() == 0;
	p->uid = geteuid();
	p->gid = getegid();
	const char *want = c->run_as_user && *c->run_as_user ? c->run_as_user : NULL;
	if (!p->root && !want) {
		/* Not root and no user named: there is nothing to switch to, and looking the
		 * default user up would make glibc load an NSS module (libnss_systemd, 320 KiB
		 * resident) that it never unloads, for an answer we would not use. */
		return 0;
	}
	const char *user = want ? want : NX_PRIVDROP_DEFAULT_USER;
	uid_t uid;
	gid_t gid;
	int rc = lookup_user(user, &uid, &gid);
	if (rc == NX_ENOTFOUND && !want) {
		if (p->root) {
			nx_log(
			    NX_LOG_WARN, "daemon",
			    "running as root: no user '%s' to switch to (create it with `adduser "
			    "--system --group %s`, or set run_as.user)",
			    user, user);
		}
		return 0;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: run_as.user '%s': %s", c->path, user,
			 rc == NX_ENOTFOUND ? "no such user" : nx_strerror(rc));
		return NX_ECONFIG;
	}
	if (c->run_as_group && *c->run_as_group) {
		rc = lookup_group(c->run_as_group, &gid);
		if (rc < 0) {
			snprintf(err, errlen, "%s: run_as.group '%s': %s", c->path, c->run_as_group,
				 rc == NX_ENOTFOUND ? "no such group" : nx_strerror(rc));
			return NX_ECONFIG;
		}
	}
	if (!p->root) {
		/* Not root: whoever started us chose the user (systemd's User=). A named user we
		 * are not is worth a word; the default is silently moot. */
		if (want && uid != geteuid()) {
			nx_log(NX_LOG_WARN, "daemon",
			       "run_as.user '%s' ignored: not started as root "
			       "(running as uid %lu)",
			       want, (unsigned long)geteuid());
		}
		return 0;
	}
	p->drop = uid != 0;
	p->uid = uid;
	p->gid = gid;
	snprintf(p->user, sizeof(p->user), "%s", user);
	name_of_gid(gid, p->group, sizeof(p->group));
	return 0;
}

/* ---- ownership ---- */

/* Directories whose whole tree must never be handed to the service user, whatever state_dir
 * says (a typo such as `state_dir: /var` would otherwise chown the system). */
static bool is_system_dir(const char *path)
{
	static const char *const sys[] = {
	    "/",     "/bin",	 "/boot",      "/dev",	   "/etc",	 "/home",   "/lib", "/opt",
	    "/proc", "/root",	 "/run",       "/sbin",	   "/srv",	 "/sys",    "/tmp", "/usr",
	    "/var",  "/var/lib", "/var/cache", "/var/log", "/usr/local", "/var/tmp"};
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		return false;
	}
	for (size_t i = 0; i < NX_ARRAY_LEN(sys); i++) {
		if (strcmp(real, sys[i]) == 0) {
			return true;
		}
	}
	/* a home directory itself (/home/alice), not a folder inside it */
	const char *s = strrchr(real, '/');
	return strncmp(real, "/home/", 6) == 0 && s == real + 5;
}

static uid_t g_walk_uid;
static gid_t g_walk_gid;
static unsigned g_walk_errors;

static int chown_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (st->st_uid == g_walk_uid && st->st_gid == g_walk_gid) {
		return 0;
	}
	if (lchown(path, g_walk_uid, g_walk_gid) < 0 && g_walk_errors++ == 0) {
		nx_log(NX_LOG_WARN, "daemon", "cannot chown %s: %s", path, strerror(errno));
	}
	return 0;
}

/* Could uid:gid write into directory dir (owner, group or other write + search bits)? */
static bool dir_writable_by(const char *dir, uid_t uid, gid_t gid)
{
	struct stat st;
	if (stat(dir, &st) < 0) {
		return false;
	}
	if (st.st_uid == uid) {
		return (st.st_mode & S_IWUSR) && (st.st_mode & S_IXUSR);
	}
	if (st.st_gid == gid) {
		return (st.st_mode & S_IWGRP) && (st.st_mode & S_IXGRP);
	}
	return (st.st_mode & S_IWOTH) && (st.st_mode & S_IXOTH);
}

int nx_privdrop_fix_ownership(const struct nx_privdrop *p, const struct nx_conf *c,
			      const char *config_path)
{
	if (!p->drop) {
		return 0;
	}
	const char *sd = c->state_dir;
	int rc = nx_mkdir_p(sd);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "daemon", "cannot create state_dir %s: %s", sd, nx_strerror(rc));
		return rc;
	}
	if (is_system_dir(sd)) {
		nx_log(NX_LOG_ERR, "daemon",
		       "state_dir %s is a system directory: refusing to give it "
		       "to user %s (use a directory of its own, e.g. /var/lib/nxdns)",
		       sd, p->user);
		return -EPERM;
	}
	g_walk_uid = p->uid;
	g_walk_gid = p->gid;
	g_walk_errors = 0;
	if (nftw(sd, chown_entry, 16, FTW_PHYS | FTW_MOUNT) < 0) {
		nx_log(NX_LOG_WARN, "daemon", "cannot walk state_dir %s: %s", sd, strerror(errno));
	}
	chmod(sd, 0750);

	/* The config file the admin API rewrites: a temporary file beside it, then rename, so
	 * the directory must be writable too. Only a directory of our own is taken over. */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", config_path);
	char *slash = strrchr(dir, '/');
	if (slash == dir) {
		dir[1] = '\0';
	} else if (slash) {
		*slash = '\0';
	} else {
		snprintf(dir, sizeof(dir), ".");
	}
	char real[PATH_MAX];
	const char *base = realpath(dir, real) ? strrchr(real, '/') : NULL;
	if (base && strcmp(base + 1, "nxdns") == 0 && !is_system_dir(real)) {
		if (chown(real, p->uid, p->gid) < 0 || chown(config_path, p->uid, p->gid) < 0) {
			nx_log(NX_LOG_WARN, "daemon", "cannot give %s to user %s: %s", config_path,
			       p->user, strerror(errno));
		}
	} else if (!dir_writable_by(dir, p->uid, p->gid)) {
		nx_log(NX_LOG_WARN, "daemon",
		       "user %s cannot write %s's directory: the admin API's edits will fail to "
		       "save (keep the config in a directory named nxdns, e.g. /etc/nxdns, or make "
		       "%s writable by %s)",
		       p->user, config_path, dir, p->user);
	}
	if (c->tls_key && access(c->tls_key, R_OK) == 0) {
		struct stat st;
		if (stat(c->tls_key, &st) == 0 && st.st_uid != p->uid &&
		    !(st.st_gid == p->gid && (st.st_mode & S_IRGRP)) && !(st.st_mode & S_IROTH)) {
			nx_log(NX_LOG_WARN, "daemon",
			       "tls.key %s is not readable by user %s: a reload "
			       "cannot load a renewed certificate (chgrp %s it, mode 0640)",
			       c->tls_key, p->user, p->group);
		}
	}
	return 0;
}

/* ---- credentials and capabilities ---- */

static int threads_in_process(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d) {
		return -1;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return n;
}

static unsigned last_cap(void)
{
	unsigned v = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%u", &v) != 1) {
			v = CAP_LAST_CAP;
		}
		fclose(f);
	}
	return v;
}

/* Empty the bounding set as far as we may: it needs CAP_SETPCAP, which root has and a
 * service user does not (systemd's CapabilityBoundingSet= already narrowed it there). */
static void bounding_clear(void)
{
	for (unsigned cap = 0; cap <= last_cap(); cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) {
			prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); /* EPERM: kept, as said above */
		}
	}
}

static int caps_clear(void)
{
	bounding_clear();
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		return -errno;
	}
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0) {
		return -errno;
	}
	return 0;
}

static bool caps_empty(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &hdr, data) < 0) {
		return false;
	}
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		if (data[i].effective || data[i].permitted || data[i].inheritable) {
			return false;
		}
	}
	return true;
}

int nx_privdrop_apply(const struct nx_privdrop *p)
{
	int nt = threads_in_process();
	if (nt != 1) {
		nx_log(NX_LOG_ERR, "daemon",
		       "privilege drop with %d threads running: refused (a "
		       "thread started earlier would keep its credentials)",
		       nt);
		return NX_ELIMIT;
	}
	if (p->drop) {
		if (setgroups(0, NULL) < 0 || setresgid(p->gid, p->gid, p->gid) < 0) {
			int rc = -errno;
			nx_log(NX_LOG_ERR, "daemon", "cannot switch to group %s: %s", p->group,
			       strerror(errno));
			return rc;
		}
	}
	/* The bounding set while CAP_SETPCAP is still ours (root); then the switch, which
	 * clears the permitted and effective sets of a non-root uid by itself. */
	int rc = 0;
	bounding_clear();
	if (p->drop && setresuid(p->uid, p->uid, p->uid) < 0) {
		rc = -errno;
		nx_log(NX_LOG_ERR, "daemon", "cannot switch to user %s: %s", p->user,
		       strerror(errno));
		return rc;
	}
	rc = caps_clear();
	bool kept = false;
	if (rc == -EPERM && !p->drop) {
		/* Not root: a sandbox that filters capset (a unit's SystemCallFilter=~@privileged)
		 * already bounds what we hold; keeping it beats refusing to serve. */
		nx_log(NX_LOG_WARN, "daemon",
		       "capabilities kept: capset is not permitted here "
		       "(a SystemCallFilter without capset?); the service's bounding set applies");
		kept = true;
	} else if (rc < 0) {
		nx_log(NX_LOG_ERR, "daemon", "cannot drop capabilities: %s", nx_strerror(rc));
		return rc;
	}
#if defined(__SANITIZE_ADDRESS__)
	/* The uid change made us non-dumpable, and LeakSanitizer's exit check ptraces our own
	 * threads, which that forbids; sanitizer builds (tests only) stay dumpable. */
	if (p->drop) {
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	}
#endif
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		nx_log(NX_LOG_WARN, "daemon", "cannot set no_new_privs: %s", strerror(errno));
	}
	if (p->drop) {
		/* regaining root must fail now; if it works, the switch did not happen */
		if (setuid(0) == 0 || geteuid() != p->uid || getegid() != p->gid) {
			nx_log(NX_LOG_ERR, "daemon", "privilege drop to %s did not hold", p->user);
			return -EPERM;
		}
		nx_log(NX_LOG_INFO, "daemon",
		       "running as user %s, group %s (uid %lu, gid %lu), no "
		       "capabilities",
		       p->user, p->group, (unsigned long)p->uid, (unsigned long)p->gid);
	}
	if (!kept && !caps_empty()) {
		nx_log(NX_LOG_ERR, "daemon", "capabilities still held after the drop");
		return -EPERM;
	}
	return 0;
}

/* ---- bind diagnosis ---- */

static unsigned port_of(const struct nx_addr *a)
{
	if (a->ss.ss_family == AF_INET) {
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	}
	return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

#define MAX_INODES 16

/* Inodes of sockets bound to local port `port` (TCP: listening only) in /proc/net. */
static size_t port_inodes(unsigned port, unsigned long *ino, size_t cap)
{
	static const char *const files[] = {"/proc/net/udp", "/proc/net/udp6", "/proc/net/tcp",
					    "/proc/net/tcp6"};
	size_t n = 0;
	for (size_t f = 0; f < NX_ARRAY_LEN(files) && n < cap; f++) {
		FILE *fp = fopen(files[f], "re");
		if (!fp) {
			continue;
		}
		char line[512];
		bool tcp = f >= 2;
		if (!fgets(line, sizeof(line), fp)) { /* header */
			fclose(fp);
			continue;
		}
		while (n < cap && fgets(line, sizeof(line), fp)) {
			char local[64];
			unsigned st;
			unsigned long inode;
			/* sl local rem st tx:rx tr:when retr uid timeout inode */
			if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %*u %*u %lu", local, &st,
				   &inode) != 3) {
				continue;
			}
			char *colon = strrchr(local, ':');
			if (!colon || strtoul(colon + 1, NULL, 16) != port) {
				continue;
			}
			if (tcp && st != 0x0A) { /* TCP_LISTEN */
				continue;
			}
			if (inode != 0) {
				ino[n++] = inode;
			}
		}
		fclose(fp);
	}
	return n;
}

/* The process (name, pid) holding one of the socket inodes; false when /proc does not tell
 * (another user's fds need root or CAP_SYS_PTRACE). */
static bool holder_of(const unsigned long *ino, size_t n, char *name, size_t cap, long *pid)
{
	DIR *proc = opendir("/proc");
	if (!proc) {
		return false;
	}
	bool found = false;
	struct dirent *pe;
	while (!found && (pe = readdir(proc))) {
		char *end;
		long p = strtol(pe->d_name, &end, 10);
		if (*end || p <= 0 || p == (long)getpid()) {
			continue;
		}
		char path[64];
		snprintf(path, sizeof(path), "/proc/%ld/fd", p);
		DIR *fds = opendir(path);
		if (!fds) {
			continue;
		}
		struct dirent *fe;
		while (!found && (fe = readdir(fds))) {
			char target[64];
			/* relative to the fd directory: no path to build */
			ssize_t len =
			    readlinkat(dirfd(fds), fe->d_name, target, sizeof(target) - 1);
			if (len <= 0) {
				continue;
			}
			target[len] = '\0';
			unsigned long i;
			if (sscanf(target, "socket:[%lu]", &i) != 1) {
				continue;
			}
			for (size_t k = 0; k < n; k++) {
				if (ino[k] == i) {
					found = true;
				}
			}
		}
		closedir(fds);
		if (found) {
			*pid = p;
			snprintf(path, sizeof(path), "/proc/%ld/comm", p);
			FILE *f = fopen(path, "re");
			if (!f || !fgets(name, (int)cap, f)) {
				snprintf(name, cap, "?");
			}
			if (f) {
				fclose(f);
			}
			name[strcspn(name, "\n")] = '\0';
		}
	}
	closedir(proc);
	return found;
}

void nx_privdrop_bind_hint(const struct nx_addr *a, int rc, char *buf, size_t cap)
{
	unsigned port = port_of(a);
	buf[0] = '\0';
	if (rc == -EACCES && port < 1024) {
		snprintf(buf, cap,
			 "port %u is privileged: start nxdns as root (it switches to run_as.user "
			 "after binding), grant the capability (systemd: "
			 "AmbientCapabilities=CAP_NET_BIND_SERVICE; else `setcap "
			 "cap_net_bind_service=+ep` on the binary), or use a port above 1023",
			 port);
		return;
	}
	if (rc == -EADDRNOTAVAIL) {
		snprintf(buf, cap,
			 "no interface has that address: use one of this machine's "
			 "addresses, or 0.0.0.0 / [::] for all");
		return;
	}
	if (rc != -EADDRINUSE) {
		return;
	}
	unsigned long ino[MAX_INODES];
	size_t n = port_inodes(port, ino, MAX_INODES);
	char name[64];
	long pid = 0;
	if (n > 0 && holder_of(ino, n, name, sizeof(name), &pid)) {
		/* comm is cut at 15 bytes: systemd-resolved shows as "systemd-resolve" */
		if (strncmp(name, "systemd-resolve", 15) == 0) {
			snprintf(
			    buf, cap,
			    "port %u is held by systemd-resolved's stub listener (pid %ld): set "
			    "DNSStubListener=no in /etc/systemd/resolved.conf and `systemctl "
			    "restart systemd-resolved`, or listen on another address or port",
			    port, pid);
		} else {
			snprintf(buf, cap,
				 "port %u is held by %s (pid %ld)%s: stop it (`systemctl disable "
				 "--now %s`) or listen on another address or port",
				 port, name, pid,
				 strcmp(name, "nxdns") == 0 ? ", another nxdns instance" : "",
				 name);
		}
		return;
	}
	snprintf(buf, cap,
		 "port %u is held by another process (another DNS server such as "
		 "dnsmasq, unbound or systemd-resolved?%s): stop it or listen on another port",
		 port, geteuid() != 0 ? " run as root to see which" : "");
}
