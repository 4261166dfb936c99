/*
 * The dnstap writer: life cycle, the push, the writer thread and its connection. libfstrm does
 * the Frame Streams framing and handshake over a transport of ours (fstrm_rdwr) so that every
 * connect, read and write is bounded by a timeout and sees the stop flag: a collector that
 * stops reading costs a reconnect, never a stuck thread or a stuck shutdown.
 */
#include "dnstap/dnstap.h"

#include <errno.h>
#include <fcntl.h>
#include <fstrm.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "dnstap/impl.h"

#define CONTENT_TYPE "protobuf:dnstap.Dnstap"
#define POLL_SLICE_MS 100 /* how often a blocked read/write looks at the stop flag */
#define FRAME_MAX NX_DNSTAP_FRAME_MAX
/* Frames go out in batches: one writev of up to BATCH_FRAMES frames / BATCH_BYTES instead of a
 * system call per frame (two per answer), which cost more CPU than the rest of the export. */
#define BATCH_FRAMES 128
#define BATCH_BYTES (64 * 1024)
#define BATCH_BUF (BATCH_BYTES + 2 * FRAME_MAX) /* a batch, plus one more event of any size */
/* Waking the writer is a futex call on a worker: under load the writer naps NAP_MS after
 * draining the rings and is woken early only by a ring half full; after IDLE_AFTER_MS without
 * events it sleeps until the next push (at most IDLE_WAIT_MS), so an idle box costs nothing
 * and a lone answer is exported at once. Export lags the answers by at most NAP_MS. */
#define NAP_MS 20
#define IDLE_AFTER_MS 100
#define IDLE_WAIT_MS 500

enum nap { AWAKE = 0, NAP_SHORT = 1, NAP_IDLE = 2, NAP_BACKOFF = 3 };

/* Where the writer connects, and as whom: set by new and retarget (control thread) under
 * cfg_lock, copied by the writer at its next connect. */
struct dest {
	bool unix_path;
	struct sockaddr_storage dst; /* sockaddr_un, sockaddr_in or sockaddr_in6 */
	socklen_t dst_len;
	char identity[NX_DNSTAP_ID_MAX + 1]; /* "" = none */
};

struct nx_dnstap {
	struct nx_dnstap_ring *rings; /* owned array of n_rings */
	unsigned n_rings;	      /* initialised */
	unsigned n_alloc;	      /* entries of rings */
	size_t ring_bytes;	      /* each */
	char *version;		      /* owned (NX_OWNER_dnstap_queue) or NULL */
	pthread_mutex_t cfg_lock;
	struct dest next;    /* under cfg_lock: the latest destination */
	atomic_uint cfg_gen; /* bumped by each change of `next` */
	struct dest cur;     /* writer thread: the one it connects to */
	unsigned cur_gen;    /* writer thread: the generation of cur */
	uint8_t *scratch;    /* owned: NX_DNSTAP_SCRATCH, one record copied out */
	uint8_t *frame;	     /* owned: BATCH_BUF, packed Dnstaps of one batch */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	atomic_int sleeping; /* enum nap: how the writer waits on wake_cond */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake_cond;
	int fd; /* the connection, -1 when none (writer thread only) */
	/* libfstrm writes a batch as a length and a payload per frame, plus a control frame */
	struct iovec iov[2 * BATCH_FRAMES + 8];
};

void nx_dnstap_params_default(struct nx_dnstap_params *p)
{
	memset(p, 0, sizeof(*p));
	p->producers = 1;
	p->queue_bytes = 4 * (size_t)1024 * 1024;
}

static char *dup_text(const char *s)
{
	return s ? nx_mem_strdup(NX_OWNER_dnstap_queue, s) : NULL;
}

static void free_text(char *s)
{
	if (s) {
		nx_mem_free(NX_OWNER_dnstap_queue, s, strlen(s) + 1);
	}
}

/* Release what exists of a (possibly half-built) writer; the thread is not running. */
static void release(struct nx_dnstap *t)
{
	for (unsigned i = 0; i < t->n_rings; i++) {
		nx_dnstap_ring_deinit(&t->rings[i]);
	}
	if (t->rings) {
		nx_mem_free(NX_OWNER_dnstap_queue, t->rings, t->n_alloc * sizeof(*t->rings));
	}
	if (t->scratch) {
		nx_mem_free(NX_OWNER_dnstap_queue, t->scratch, NX_DNSTAP_SCRATCH);
	}
	if (t->frame) {
		nx_mem_free(NX_OWNER_dnstap_queue, t->frame, BATCH_BUF);
	}
	free_text(t->version);
	nx_mem_free(NX_OWNER_dnstap_queue, t, sizeof(*t));
}

/* p's destination and identity into d. 0, -EINVAL, -ENAMETOOLONG. */
static int dest_set(struct dest *d, const struct nx_dnstap_params *p)
{
	memset(d, 0, sizeof(*d));
	if (!p->socket_path == !p->tcp) {
		return -EINVAL;
	}
	if (p->socket_path) {
		struct sockaddr_un *un = (struct sockaddr_un *)&d->dst;
		if (strlen(p->socket_path) >= sizeof(un->sun_path)) {
			return -ENAMETOOLONG;
		}
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, p->socket_path);
		d->dst_len = sizeof(*un);
		d->unix_path = true;
	} else {
		if (p->tcp_len > sizeof(d->dst) ||
		    (p->tcp->sa_family != AF_INET && p->tcp->sa_family != AF_INET6)) {
			return -EINVAL;
		}
		memcpy(&d->dst, p->tcp, p->tcp_len);
		d->dst_len = p->tcp_len;
	}
	if (p->identity) {
		snprintf(d->identity, sizeof(d->identity), "%s", p->identity);
	}
	return 0;
}

int nx_dnstap_new(const struct nx_dnstap_params *p, struct nx_dnstap **out)
{
	*out = NULL;
	if (!p->producers) {
		return -EINVAL;
	}
	struct dest dst;
	int rc = dest_set(&dst, p);
	if (rc < 0) {
		return rc;
	}
	struct nx_dnstap *t = nx_mem_calloc(NX_OWNER_dnstap_queue, 1, sizeof(*t));
	if (!t) {
		return -ENOMEM;
	}
	t->fd = -1;
	t->next = t->cur = dst;
	rc = -ENOMEM;
	if (p->version && !(t->version = dup_text(p->version))) {
		goto fail;
	}
	t->ring_bytes = p->queue_bytes / p->producers;
	if (t->ring_bytes < NX_DNSTAP_RING_MIN) {
		t->ring_bytes = NX_DNSTAP_RING_MIN;
	}
	t->rings = nx_mem_calloc(NX_OWNER_dnstap_queue, p->producers, sizeof(*t->rings));
	t->n_alloc = t->rings ? p->producers : 0;
	t->scratch = nx_mem_alloc(NX_OWNER_dnstap_queue, NX_DNSTAP_SCRATCH);
	t->frame = nx_mem_alloc(NX_OWNER_dnstap_queue, BATCH_BUF);
	if (!t->rings || !t->scratch || !t->frame) {
		goto fail;
	}
	for (; t->n_rings < p->producers; t->n_rings++) {
		if ((rc = nx_dnstap_ring_init(&t->rings[t->n_rings], t->ring_bytes)) < 0) {
			goto fail;
		}
	}
	if ((rc = -pthread_mutex_init(&t->wake_lock, NULL)) < 0) {
		goto fail;
	}
	if ((rc = -pthread_cond_init(&t->wake_cond, NULL)) < 0) {
		pthread_mutex_destroy(&t->wake_lock);
		goto fail;
	}
	if ((rc = -pthread_mutex_init(&t->cfg_lock, NULL)) < 0) {
		pthread_cond_destroy(&t->wake_cond);
		pthread_mutex_destroy(&t->wake_lock);
		goto fail;
	}
	*out = t;
	return 0;
fail:
	release(t);
	return rc;
}

int nx_dnstap_retarget(struct nx_dnstap *t, const struct nx_dnstap_params *p)
{
	struct dest d;
	int rc = dest_set(&d, p);
	if (rc < 0) {
		return rc;
	}
	pthread_mutex_lock(&t->cfg_lock);
	bool same = d.unix_path == t->next.unix_path && d.dst_len == t->next.dst_len &&
		    !memcmp(&d.dst, &t->next.dst, d.dst_len) &&
		    !strcmp(d.identity, t->next.identity);
	if (!same) {
		t->next = d;
		atomic_fetch_add(&t->cfg_gen, 1);
	}
	pthread_mutex_unlock(&t->cfg_lock);
	if (!same) {
		/* a writer asleep (idle, or in a backoff towards the old destination) moves now */
		pthread_mutex_lock(&t->wake_lock);
		pthread_cond_signal(&t->wake_cond);
		pthread_mutex_unlock(&t->wake_lock);
	}
	return 0;
}

/* ---- the push (producers) ---- */

void nx_dnstap_push(struct nx_dnstap *t, unsigned idx, const struct nx_dnstap_event *ev)
{
	if (nx_fails_assert(idx < t->n_rings)) {
		return;
	}
	struct nx_dnstap_ring *r = &t->rings[idx];
	pthread_mutex_lock(&r->lock);
	int dropped = nx_dnstap_ring_put(r, ev);
	bool half = r->used >= r->cap / 2;
	pthread_mutex_unlock(&r->lock);
	if (dropped < 0) {
		nx_stat_inc(NX_STAT_DNSTAP_DROP_LARGE);
		return;
	}
	if (dropped > 0) {
		nx_stat_add(NX_STAT_DNSTAP_DROP_FULL, (uint64_t)dropped);
	}
	/* seq_cst: ordered after the ring's unlock, against doze()'s store then its ring check,
	 * so a push either is seen by that check or sees the nap and signals. */
	int nap = atomic_load(&t->sleeping);
	if (nap == NAP_IDLE || (nap == NAP_SHORT && half)) {
		pthread_mutex_lock(&t->wake_lock);
		pthread_cond_signal(&t->wake_cond);
		pthread_mutex_unlock(&t->wake_lock);
	}
}

/* ---- the transport under libfstrm (writer thread) ---- */

static int64_t now_ms(void)
{
	return (int64_t)nx_now_mono_ms();
}

/* Wait for `events` on the connection, in slices that look at the stop flag; 0, or -1 on
 * timeout, error or stop. A stop still lets queued work finish: only the stop that comes on
 * top of a stalled collector ends the wait early. */
static int wait_fd(struct nx_dnstap *t, short events)
{
	int64_t deadline = now_ms() + NX_DNSTAP_IO_TIMEOUT_MS;
	for (;;) {
		struct pollfd pfd = {.fd = t->fd, .events = events};
		int n = poll(&pfd, 1, POLL_SLICE_MS);
		if (n > 0) {
			return (pfd.revents & (events | POLLHUP | POLLERR)) ? 0 : -1;
		}
		if ((n < 0 && errno != EINTR) || now_ms() >= deadline ||
		    (atomic_load(&t->stop) && n == 0)) {
			return -1;
		}
	}
}

static fstrm_res tr_open(void *obj)
{
	struct nx_dnstap *t = obj;
	int family = t->cur.unix_path ? AF_UNIX : t->cur.dst.ss_family;
	t->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->fd < 0) {
		return fstrm_res_failure;
	}
	if (connect(t->fd, (const struct sockaddr *)&t->cur.dst, t->cur.dst_len) == 0) {
		return fstrm_res_success;
	}
	int err = 0;
	socklen_t elen = sizeof(err);
	if (errno == EINPROGRESS && wait_fd(t, POLLOUT) == 0 &&
	    getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0) {
		return fstrm_res_success;
	}
	close(t->fd);
	t->fd = -1;
	return fstrm_res_failure;
}

static fstrm_res tr_close(void *obj)
{
	struct nx_dnstap *t = obj;
	if (t->fd >= 0) {
		close(t->fd);
		t->fd = -1;
	}
	return fstrm_res_success;
}

static fstrm_res tr_read(void *obj, void *data, size_t count)
{
	struct nx_dnstap *t = obj;
	uint8_t *p = data;
	while (count > 0) {
		ssize_t n = recv(t->fd, p, count, 0);
		if (n > 0) {
			p += n;
			count -= (size_t)n;
		} else if (n == 0) {
			return fstrm_res_stop;
		} else if (errno == EINTR) {
			continue;
		} else if (errno != EAGAIN || wait_fd(t, POLLIN) < 0) {
			return fstrm_res_failure;
		}
	}
	return fstrm_res_success;
}

static fstrm_res tr_write(void *obj, const struct iovec *iov, int iovcnt)
{
	struct nx_dnstap *t = obj;
	struct iovec *v = t->iov; /* sendmsg advances through a copy: iov is libfstrm's */
	if (nx_fails_assert(iovcnt <= (int)NX_ARRAY_LEN(t->iov))) {
		return fstrm_res_failure;
	}
	memcpy(v, iov, (size_t)iovcnt * sizeof(*v));
	struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)iovcnt};
	while (mh.msg_iovlen > 0) {
		/* MSG_NOSIGNAL: a collector gone mid-write is an error here, not a SIGPIPE. */
		ssize_t n = sendmsg(t->fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno != EAGAIN || wait_fd(t, POLLOUT) < 0) {
				return fstrm_res_failure;
			}
			continue;
		}
		size_t done = (size_t)n;
		while (mh.msg_iovlen > 0 && done >= mh.msg_iov[0].iov_len) {
			done -= mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov[0].iov_base = (uint8_t *)mh.msg_iov[0].iov_base + done;
			mh.msg_iov[0].iov_len -= done;
		}
	}
	return fstrm_res_success;
}

/* A connected, handshaken Frame Streams writer, or NULL. */
static struct fstrm_writer *connect_writer(struct nx_dnstap *t)
{
	struct fstrm_rdwr *rdwr = fstrm_rdwr_init(t);
	struct fstrm_writer_options *wopt = fstrm_writer_options_init();
	struct fstrm_writer *w = NULL;
	if (!rdwr || !wopt) {
		goto out;
	}
	fstrm_rdwr_set_open(rdwr, tr_open);
	fstrm_rdwr_set_close(rdwr, tr_close);
	fstrm_rdwr_set_read(rdwr, tr_read);
	fstrm_rdwr_set_write(rdwr, tr_write);
	fstrm_writer_options_add_content_type(wopt, CONTENT_TYPE, strlen(CONTENT_TYPE));
	w = fstrm_writer_init(wopt, &rdwr); /* takes rdwr */
	if (w && fstrm_writer_open(w) != fstrm_res_success) {
		fstrm_writer_destroy(&w);
	}
out:
	if (rdwr) {
		fstrm_rdwr_destroy(&rdwr);
	}
	if (wopt) {
		fstrm_writer_options_destroy(&wopt);
	}
	if (!w) {
		tr_close(t);
	}
	return w;
}

/* ---- the writer thread ---- */

/* Take the oldest event of any ring (round robin from *next). */
static bool take_one(struct nx_dnstap *t, unsigned *next, struct nx_dnstap_event *ev,
		     struct sockaddr_storage addrs[2])
{
	for (unsigned k = 0; k < t->n_rings; k++) {
		struct nx_dnstap_ring *r = &t->rings[(*next + k) % t->n_rings];
		pthread_mutex_lock(&r->lock);
		size_t n = nx_dnstap_ring_take(r, t->scratch, NX_DNSTAP_SCRATCH, ev, addrs);
		pthread_mutex_unlock(&r->lock);
		if (n > 0) {
			*next = (*next + k + 1) % t->n_rings;
			return true;
		}
	}
	return false;
}

static bool rings_empty(struct nx_dnstap *t)
{
	for (unsigned i = 0; i < t->n_rings; i++) {
		pthread_mutex_lock(&t->rings[i].lock);
		bool empty = t->rings[i].used == 0;
		pthread_mutex_unlock(&t->rings[i].lock);
		if (!empty) {
			return false;
		}
	}
	return true;
}

/* Sleep up to ms, or until stop; a push may end a NAP_SHORT or NAP_IDLE early (see nx_dnstap_push).
 * A backoff is not wakeable: with the collector down every push would cut it short. */
static void doze(struct nx_dnstap *t, int ms, enum nap how)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&t->wake_lock);
	atomic_store(&t->sleeping, how);
	int rc = 0;
	if (how != NAP_BACKOFF && !rings_empty(t)) {
		rc = ETIMEDOUT; /* a push came before the nap was visible: no wait */
	}
	while (rc != ETIMEDOUT && !atomic_load(&t->stop)) {
		rc = pthread_cond_timedwait(&t->wake_cond, &t->wake_lock, &ts);
		if (how != NAP_BACKOFF || atomic_load(&t->cfg_gen) != t->cur_gen) {
			break; /* a backoff ends early only for a new destination */
		}
	}
	atomic_store(&t->sleeping, AWAKE);
	pthread_mutex_unlock(&t->wake_lock);
}

/* Encode queued events into one batch and write it. Returns the events sent, or -1 when the
 * connection failed (the batch's events are counted lost). */
static int send_batch(struct nx_dnstap *t, struct fstrm_writer *w, unsigned *next)
{
	const struct nx_dnstap_frame_ids ids = {t->cur.identity[0] ? t->cur.identity : NULL,
						t->version};
	struct iovec iov[BATCH_FRAMES];
	int nf = 0, events = 0, fwd = 0;
	size_t used = 0;
	struct nx_dnstap_event ev;
	struct sockaddr_storage addrs[2];
	while (nf + 2 <= BATCH_FRAMES && used <= BATCH_BYTES && take_one(t, next, &ev, addrs)) {
		int before = nf;
		int frames = nx_dnstap_kind_frames(ev.kind);
		for (int i = 0; i < frames; i++) {
			int n =
			    nx_dnstap_encode(&ev, &ids, i == 1, t->frame + used, BATCH_BUF - used);
			if (nx_fails_assert(n > 0)) {
				nf = before; /* room for 2 x FRAME_MAX is kept: skip this event */
				break;
			}
			iov[nf++] =
			    (struct iovec){.iov_base = t->frame + used, .iov_len = (size_t)n};
			used += (size_t)n;
		}
		events += nf > before;
		fwd += ev.kind != NX_DNSTAP_CLIENT ? nf - before : 0;
	}
	if (nf == 0) {
		return 0;
	}
	if (fstrm_writer_writev(w, iov, nf) != fstrm_res_success) {
		nx_stat_add(NX_STAT_DNSTAP_DROP_WRITE, (uint64_t)events);
		return -1;
	}
	nx_stat_add(NX_STAT_DNSTAP_SENT, (uint64_t)nf);
	if (fwd) {
		nx_stat_add(NX_STAT_DNSTAP_SENT_FWD, (uint64_t)fwd);
	}
	return events;
}

/* A retarget since the writer last looked: take the new destination. */
static bool take_dest(struct nx_dnstap *t)
{
	unsigned gen = atomic_load(&t->cfg_gen);
	if (gen == t->cur_gen) {
		return false;
	}
	pthread_mutex_lock(&t->cfg_lock);
	t->cur = t->next;
	t->cur_gen = atomic_load(&t->cfg_gen);
	pthread_mutex_unlock(&t->cfg_lock);
	return true;
}

static void *writer_main(void *arg)
{
	struct nx_dnstap *t = arg;
	struct fstrm_writer *w = NULL;
	int backoff = NX_DNSTAP_BACKOFF_MIN_MS;
	bool warned = false;
	unsigned next = 0;
	int64_t last_ms = 0; /* when events were last sent */
	take_dest(t);
	for (;;) {
		bool stopping = atomic_load(&t->stop);
		if (take_dest(t)) {
			/* retargeted: end this stream properly, the next turn connects anew */
			if (w) {
				nx_log(NX_LOG_INFO, "dnstap", "collector changed: reconnecting");
				fstrm_writer_close(w);
				fstrm_writer_destroy(&w);
				tr_close(t);
			}
			warned = false;
			backoff = NX_DNSTAP_BACKOFF_MIN_MS;
		}
		if (!w) {
			if (stopping) {
				break; /* nothing can be sent: what is queued goes with the rings */
			}
			w = connect_writer(t);
			if (!w) {
				nx_stat_inc(NX_STAT_DNSTAP_RECONNECTS);
				if (!warned) {
					nx_log(NX_LOG_WARN, "dnstap",
					       "cannot connect to the collector; retrying with "
					       "backoff (answers queue, oldest dropped)");
					warned = true;
				}
				doze(t, backoff, NAP_BACKOFF);
				backoff = NX_MIN(backoff * 2, NX_DNSTAP_BACKOFF_MAX_MS);
				continue;
			}
			nx_log(NX_LOG_INFO, "dnstap", "connected to the collector");
			warned = false;
			backoff = NX_DNSTAP_BACKOFF_MIN_MS;
		}
		int sent = send_batch(t, w, &next);
		if (sent != 0) {
			last_ms = now_ms();
			if (sent < 0) {
				nx_stat_inc(NX_STAT_DNSTAP_RECONNECTS);
				nx_log(NX_LOG_WARN, "dnstap", "lost the collector; reconnecting");
				fstrm_writer_destroy(&w);
				tr_close(t);
				/* one that accepts and hangs up must not be reconnected to in a
				 * loop */
				doze(t, NX_DNSTAP_BACKOFF_MIN_MS, NAP_BACKOFF);
			}
			continue;
		}
		if (stopping) {
			break;
		}
		if (rings_empty(t)) {
			bool busy = now_ms() - last_ms < IDLE_AFTER_MS;
			doze(t, busy ? NAP_MS : IDLE_WAIT_MS, busy ? NAP_SHORT : NAP_IDLE);
		}
	}
	if (w) {
		fstrm_writer_close(w); /* STOP, and FINISH from the collector, bounded */
		fstrm_writer_destroy(&w);
	}
	tr_close(t);
	return NULL;
}

int nx_dnstap_start(struct nx_dnstap *t)
{
	atomic_store(&t->stop, false);
	int rc = pthread_create(&t->thread, NULL, writer_main, t);
	if (rc) {
		return -rc;
	}
	pthread_setname_np(t->thread, "nx-dnstap"); /* top -H, perf: which thread is ours */
	t->running = true;
	return 0;
}

void nx_dnstap_stop(struct nx_dnstap *t)
{
	if (!t || !t->running) {
		return;
	}
	atomic_store(&t->stop, true);
	pthread_mutex_lock(&t->wake_lock);
	pthread_cond_signal(&t->wake_cond);
	pthread_mutex_unlock(&t->wake_lock);
	pthread_join(t->thread, NULL);
	t->running = false;
}

void nx_dnstap_free(struct nx_dnstap *t)
{
	if (!t) {
		return;
	}
	nx_dnstap_stop(t);
	pthread_mutex_destroy(&t->cfg_lock);
	pthread_cond_destroy(&t->wake_cond);
	pthread_mutex_destroy(&t->wake_lock);
	release(t);
}
