#include "net/sockopt.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int set_int(int fd, int level, int opt, int v)
{
	return setsockopt(fd, level, opt, &v, sizeof(v)) < 0 ? -errno : 0;
}

bool nx_sockaddr_is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	}
	if (sa->sa_family == AF_INET6) {
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	}
	return false;
}

bool nx_sockaddr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family) {
		return false;
	}
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

const char *nx_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%u", ip, ntohs(s->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%u", ip, ntohs(s->sin6_port));
	} else {
		snprintf(buf, cap, "?");
	}
	return buf;
}

static int open_sock(const struct nx_addr *a, int type, bool reuseport)
{
	int fam = a->ss.ss_family;
	int fd = socket(fam, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	int rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (rc == 0 && reuseport) {
		rc = set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	}
	if (rc == 0 && fam == AF_INET6) {
		rc = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	}
	if (rc == 0 && bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0) {
		rc = -errno;
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int nx_sock_probe_free(const struct nx_addr *a)
{
	/* UDP without SO_REUSEADDR (two UDP sockets that both set it may share a port); TCP with
	 * it (it never allows binding onto a listener, and ignores TIME_WAIT leftovers). */
	int types[2] = {SOCK_DGRAM, SOCK_STREAM};
	for (int i = 0; i < 2; i++) {
		int fd = socket(a->ss.ss_family, types[i] | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			return -errno;
		}
		int rc = 0;
		if (types[i] == SOCK_STREAM) {
			rc = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
		}
		if (rc == 0 && a->ss.ss_family == AF_INET6) {
			rc = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
		}
		if (rc == 0 && bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0) {
			rc = -errno;
		}
		close(fd);
		if (rc < 0) {
			return rc;
		}
	}
	return 0;
}

int nx_sock_udp_listen(const struct nx_addr *a, bool reuseport, bool *pktinfo)
{
	int fd = open_sock(a, SOCK_DGRAM, reuseport);
	if (fd < 0) {
		return fd;
	}
	*pktinfo = false;
	if (nx_sockaddr_is_wildcard((const struct sockaddr *)&a->ss)) {
		int rc = a->ss.ss_family == AF_INET
				 ? set_int(fd, IPPROTO_IP, IP_PKTINFO, 1)
				 : set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		*pktinfo = true;
	}
	/* Bigger receive buffer absorbs bursts between loop turns; the kernel caps it. */
	(void)set_int(fd, SOL_SOCKET, SO_RCVBUF, 1 << 20);
	return fd;
}

int nx_sock_tcp_listen(const struct nx_addr *a, bool reuseport, int backlog)
{
	int fd = open_sock(a, SOCK_STREAM, reuseport);
	if (fd < 0) {
		return fd;
	}
	(void)set_int(fd, IPPROTO_TCP, 23 /* TCP_FASTOPEN */, 16);
	if (listen(fd, backlog) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}
