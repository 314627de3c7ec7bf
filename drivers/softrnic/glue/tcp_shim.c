// SPDX-License-Identifier: GPL-2.0
/*
 * softrnic TCP shim: the kernel TCP sockets iWARP runs over (MPA, RFC 5044).
 * A softrnic_tcp is one socket in the network namespace of the device's
 * netdev, with its callbacks (data ready, write space, state change) routed
 * to Rust (softrnic_tcp_event) with the context Rust gave, and a work item
 * Rust may queue, at once or after a delay, for what needs process context
 * (accepting) or a deadline (MPA setup).  Received
 * bytes are handed to Rust where they lie in the socket's buffers
 * (tcp_read_sock): MPA frames and FPDUs are parsed and placed from there,
 * with no copy in between.
 *
 * Whoever holds the socket (a doorbell's send in a user's system call, a
 * work item's) handles what arrives meanwhile when it lets go: release_sock
 * runs the data-ready callback there, and goes on as long as more keeps
 * arriving.  Placing it all there kept the socket held as long as the peer
 * streamed: ib_read_bw with 1 MiB READs on 4 QPs spent seconds in a post of
 * one READ request while the responses to earlier ones arrived (first in
 * the poster's release_sock, then waiting for a work item's), and completed
 * nothing in its measured window (7 of 9 runs, 2026-11-29).  So a holder
 * places at most SOFTRNIC_HELD_READ bytes (a small reply at once); then
 * TCP only queues what arrives, its window closes, release_sock ends, and
 * a work item reads the rest.
 */
#include "shim.h"
#include <net/tcp.h>
#include <net/sock.h>
#include <net/ipv6.h>
#include <net/inet_sock.h>
#include <net/route.h>
#include <net/addrconf.h>
#include <linux/skbuff.h>
#include <linux/bvec.h>
#include <linux/uio.h>

struct softrnic_tcp {
	struct socket *sock;
	void *ctx;
	struct delayed_work work;
	/* Reads what a holder of the socket left (see the top). */
	struct delayed_work read_work;
	/* What the present holder may still place itself. */
	int held_budget;
	/* While not negative: what softrnic_tcp_read may still take (under
	 * the socket's lock). */
	int read_cap;
	struct list_head dead;
	bool abort;
	/* Both ends' addresses, read before the callbacks are ours (reading
	 * them takes the socket lock, which a callback may hold). */
	struct sockaddr_storage local;
	struct sockaddr_storage remote;
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_write_space)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);
};

static void softrnic_tcp_callback(struct sock *sk, int event)
{
	struct softrnic_tcp *t;

	read_lock_bh(&sk->sk_callback_lock);
	t = sk->sk_user_data;
	if (t)
		softrnic_tcp_event(t->ctx, t, event);
	read_unlock_bh(&sk->sk_callback_lock);
}

#define SOFTRNIC_HELD_READ (64 * 1024)

/* The socket is held (lock_sock): the callbacks run from release_sock, in
 * the holder's context. */
static bool softrnic_tcp_held(struct sock *sk)
{
	return in_task() && sock_owned_by_user_nocheck(sk);
}

/* Have Rust read at most `cap` bytes (the socket's lock held): what is
 * left of the cap (0: it took them all, more may be waiting). */
static int softrnic_tcp_read_capped(struct softrnic_tcp *t, int cap)
{
	int left;

	t->read_cap = cap;
	softrnic_tcp_event(t->ctx, t, SOFTRNIC_TCP_READABLE);
	left = t->read_cap;
	t->read_cap = -1;
	return left;
}

static void softrnic_tcp_data_ready(struct sock *sk)
{
	struct softrnic_tcp *t;

	if (!softrnic_tcp_held(sk)) {
		softrnic_tcp_callback(sk, SOFTRNIC_TCP_READABLE);
		return;
	}
	read_lock_bh(&sk->sk_callback_lock);
	t = sk->sk_user_data;
	if (t && READ_ONCE(t->held_budget) > 0)
		WRITE_ONCE(t->held_budget,
			   softrnic_tcp_read_capped(t, READ_ONCE(t->held_budget)));
	if (t && READ_ONCE(t->held_budget) <= 0)
		mod_delayed_work(system_dfl_wq, &t->read_work, 0);
	read_unlock_bh(&sk->sk_callback_lock);
}

/* A send is about to hold the socket: it may place SOFTRNIC_HELD_READ
 * bytes.  (Reset while another holds the socket, it lends that one more:
 * harmless.) */
static void softrnic_tcp_hold_starts(struct softrnic_tcp *t)
{
	WRITE_ONCE(t->held_budget, SOFTRNIC_HELD_READ);
}

/* Read what a holder left, SOFTRNIC_HELD_READ bytes at a time, as the
 * receive softirq does (bh_lock_sock: a send waiting for the socket waits
 * for one such piece at most); while a send holds the socket, a tick later. */
static void softrnic_tcp_read_work_fn(struct work_struct *w)
{
	struct softrnic_tcp *t = container_of(to_delayed_work(w),
					      struct softrnic_tcp, read_work);
	struct sock *sk = t->sock->sk;
	unsigned long again = ULONG_MAX;

	local_bh_disable();
	bh_lock_sock(sk);
	if (sock_owned_by_user(sk)) {
		again = 1;
	} else {
		read_lock(&sk->sk_callback_lock);
		if (sk->sk_user_data == t &&
		    !softrnic_tcp_read_capped(t, SOFTRNIC_HELD_READ))
			again = 0;
		read_unlock(&sk->sk_callback_lock);
	}
	bh_unlock_sock(sk);
	local_bh_enable();
	if (again != ULONG_MAX)
		queue_delayed_work(system_dfl_wq, &t->read_work, again);
}

static void softrnic_tcp_write_space(struct sock *sk)
{
	struct softrnic_tcp *t;

	/* As sk_stream_write_space: only once a third of the buffer is free. */
	if (!sk_stream_is_writeable(sk))
		return;
	read_lock_bh(&sk->sk_callback_lock);
	t = sk->sk_user_data;
	if (t) {
		clear_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
		softrnic_tcp_event(t->ctx, t, SOFTRNIC_TCP_WRITABLE);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void softrnic_tcp_state_change(struct sock *sk)
{
	softrnic_tcp_callback(sk, SOFTRNIC_TCP_STATE);
}

static void softrnic_tcp_work_fn(struct work_struct *w)
{
	struct softrnic_tcp *t = container_of(to_delayed_work(w),
					      struct softrnic_tcp, work);

	softrnic_tcp_work(t->ctx, t);
}

/* Take over a socket's callbacks; NULL (socket released) on ENOMEM. */
static struct softrnic_tcp *softrnic_tcp_wrap(struct socket *sock, void *ctx)
{
	struct softrnic_tcp *t = kzalloc(sizeof(*t), GFP_KERNEL);
	struct sock *sk = sock->sk;

	if (!t) {
		sock_release(sock);
		return NULL;
	}
	t->sock = sock;
	t->ctx = ctx;
	INIT_DELAYED_WORK(&t->work, softrnic_tcp_work_fn);
	INIT_DELAYED_WORK(&t->read_work, softrnic_tcp_read_work_fn);
	t->read_cap = -1;
	/* (A listening socket has no peer: its remote stays zero.) */
	if (kernel_getsockname(sock, (struct sockaddr *)&t->local) < 0)
		memset(&t->local, 0, sizeof(t->local));
	if (kernel_getpeername(sock, (struct sockaddr *)&t->remote) < 0)
		memset(&t->remote, 0, sizeof(t->remote));
	write_lock_bh(&sk->sk_callback_lock);
	t->saved_data_ready = sk->sk_data_ready;
	t->saved_write_space = sk->sk_write_space;
	t->saved_state_change = sk->sk_state_change;
	sk->sk_user_data = t;
	sk->sk_data_ready = softrnic_tcp_data_ready;
	sk->sk_write_space = softrnic_tcp_write_space;
	sk->sk_state_change = softrnic_tcp_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	return t;
}

static int softrnic_tcp_socket(struct net_device *ndev, int family,
			       struct socket **sock)
{
	/* As a user socket (kern = 0): it holds a reference on the namespace,
	 * which therefore outlives it. */
	int err = __sock_create(dev_net(ndev), family, SOCK_STREAM, IPPROTO_TCP,
				sock, 0);

	if (err)
		return err;
	sock_set_reuseaddr((*sock)->sk);
	/* FPDUs go out as soon as they are built (siw does the same). */
	tcp_sock_set_nodelay((*sock)->sk);
	return 0;
}

static int softrnic_addr_len(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					  sizeof(struct sockaddr_in);
}

/* `port` at the address a GID names (an IPv4-mapped GID is an IPv4
 * address, any other an IPv6 one). */
void softrnic_sockaddr_from_gid(const u8 *gid, u16 port,
				struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (ipv6_addr_v4mapped((const struct in6_addr *)gid)) {
		struct sockaddr_in *a = (struct sockaddr_in *)out;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		memcpy(&a->sin_addr.s_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		memcpy(&a->sin6_addr, gid, 16);
	}
}

/* The address of `a` as a GID (IPv4-mapped for IPv4; zero for neither). */
void softrnic_sockaddr_gid(const struct sockaddr_storage *a, u8 *gid)
{
	memset(gid, 0, 16);
	if (a->ss_family == AF_INET) {
		gid[10] = 0xff;
		gid[11] = 0xff;
		memcpy(gid + 12,
		       &((const struct sockaddr_in *)a)->sin_addr.s_addr, 4);
	} else if (a->ss_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
}

/* `a` is an address of this host in the namespace of `ndev`: a connection
 * to it never leaves the host (TCP runs it over the loopback device). */
bool softrnic_addr_local(struct net_device *ndev,
			 const struct sockaddr_storage *a)
{
	struct net *net = dev_net(ndev);

	if (a->ss_family == AF_INET)
		return inet_addr_type(net,
				      ((const struct sockaddr_in *)a)->sin_addr.s_addr) ==
		       RTN_LOCAL;
#if IS_ENABLED(CONFIG_IPV6)
	if (a->ss_family == AF_INET6)
		return ipv6_chk_addr(net,
				     &((const struct sockaddr_in6 *)a)->sin6_addr,
				     NULL, 0);
#endif
	return false;
}

/* A listening socket on `addr` (a wildcard address listens on every address
 * of the netdev's namespace; `v6only` for an IPv6 one that must not take
 * IPv4 connections). */
static bool softrnic_addr_any(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET6)
		return ipv6_addr_any(&((const struct sockaddr_in6 *)a)->sin6_addr);
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
}

int softrnic_tcp_listen(struct net_device *ndev,
			const struct sockaddr_storage *addr, bool v6only,
			int backlog, void *ctx, struct softrnic_tcp **out)
{
	struct socket *sock;
	int err;

	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	err = softrnic_tcp_socket(ndev, addr->ss_family, &sock);
	if (err)
		return err;
	if (addr->ss_family == AF_INET6 && v6only)
		sock->sk->sk_ipv6only = 1;
	/* A wildcard listen is this device's: only what arrives through its
	 * netdev (another device's wildcard listen on the same port, in the
	 * same namespace, is no conflict). */
	err = softrnic_addr_any(addr) ?
		      sock_bindtoindex(sock->sk, ndev->ifindex, false) : 0;
	if (!err)
		err = kernel_bind(sock, (struct sockaddr_unsized *)addr,
				  softrnic_addr_len(addr));
	if (!err)
		err = kernel_listen(sock, backlog);
	if (err) {
		sock_release(sock);
		return err;
	}
	*out = softrnic_tcp_wrap(sock, ctx);
	return *out ? 0 : -ENOMEM;
}

/* The next connection of a listening socket: 0 and *out, -EAGAIN when none
 * is waiting.  Process context. */
int softrnic_tcp_accept(struct softrnic_tcp *l, void *ctx,
			struct softrnic_tcp **out)
{
	struct socket *sock;
	int err = kernel_accept(l->sock, &sock, O_NONBLOCK);

	if (err)
		return err;
	tcp_sock_set_nodelay(sock->sk);
	*out = softrnic_tcp_wrap(sock, ctx);
	return *out ? 0 : -ENOMEM;
}

/* Give a socket's callbacks back and let it go, with its context still the
 * caller's (a connection that failed before it was handed over). */
static void softrnic_tcp_unwrap(struct softrnic_tcp *t)
{
	struct sock *sk = t->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = t->saved_data_ready;
	sk->sk_write_space = t->saved_write_space;
	sk->sk_state_change = t->saved_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	disable_delayed_work_sync(&t->work);
	disable_delayed_work_sync(&t->read_work);
	sock_release(t->sock);
	kfree(t);
}

/* Start connecting from `laddr` (its port may be 0) to `raddr`, without
 * waiting: the state-change callback tells when the connection is up or
 * has failed.  An error here (no route, address in use) is immediate.
 * Process context. */
int softrnic_tcp_connect(struct net_device *ndev,
			 const struct sockaddr_storage *laddr,
			 const struct sockaddr_storage *raddr, void *ctx,
			 struct softrnic_tcp **out)
{
	struct softrnic_tcp *t;
	struct socket *sock;
	int err;

	if (raddr->ss_family != AF_INET && raddr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	err = softrnic_tcp_socket(ndev, raddr->ss_family, &sock);
	if (err)
		return err;
	if (laddr->ss_family == raddr->ss_family) {
		err = kernel_bind(sock, (struct sockaddr_unsized *)laddr,
				  softrnic_addr_len(laddr));
		if (err) {
			sock_release(sock);
			return err;
		}
	}
	/* The callbacks first, so that no state change goes unseen. */
	t = softrnic_tcp_wrap(sock, ctx);
	if (!t)
		return -ENOMEM;
	memcpy(&t->remote, raddr, softrnic_addr_len(raddr));
	err = kernel_connect(sock, (struct sockaddr_unsized *)raddr,
			     softrnic_addr_len(raddr), O_NONBLOCK);
	if (err && err != -EINPROGRESS) {
		softrnic_tcp_unwrap(t);
		return err;
	}
	*out = t;
	return 0;
}

/*
 * Releasing: stop the callbacks and the work (waiting for running ones),
 * close gracefully (FIN after what is queued) or abortively (RST), and give
 * the context back to Rust.  Done by one work item for every socket, so that
 * a socket can be let go from any context, its own callbacks and work
 * included.
 */
static LIST_HEAD(softrnic_tcp_dead);
static DEFINE_SPINLOCK(softrnic_tcp_dead_lock);

static void softrnic_tcp_close(struct softrnic_tcp *t)
{
	struct sock *sk = t->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = t->saved_data_ready;
	sk->sk_write_space = t->saved_write_space;
	sk->sk_state_change = t->saved_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	disable_delayed_work_sync(&t->work);
	disable_delayed_work_sync(&t->read_work);
	if (t->abort)
		sock_no_linger(sk);
	else
		kernel_sock_shutdown(t->sock, SHUT_WR);
	sock_release(t->sock);
	softrnic_tcp_ctx_free(t->ctx);
	kfree(t);
}

static void softrnic_tcp_reap(struct work_struct *w)
{
	struct softrnic_tcp *t, *next;
	unsigned long flags;
	LIST_HEAD(list);

	spin_lock_irqsave(&softrnic_tcp_dead_lock, flags);
	list_splice_init(&softrnic_tcp_dead, &list);
	spin_unlock_irqrestore(&softrnic_tcp_dead_lock, flags);
	list_for_each_entry_safe(t, next, &list, dead)
		softrnic_tcp_close(t);
}

/* Let the socket go now (process context, never from its own work or
 * callbacks): a listening socket must be gone when its listen is (the
 * next listen on its port would find it bound). */
void softrnic_tcp_release_now(struct softrnic_tcp *t)
{
	softrnic_tcp_close(t);
}

static DECLARE_WORK(softrnic_tcp_reaper, softrnic_tcp_reap);

/* Let the socket go (any context): released soon by the reaper. */
void softrnic_tcp_release(struct softrnic_tcp *t, bool abort)
{
	unsigned long flags;

	t->abort = abort;
	spin_lock_irqsave(&softrnic_tcp_dead_lock, flags);
	list_add_tail(&t->dead, &softrnic_tcp_dead);
	spin_unlock_irqrestore(&softrnic_tcp_dead_lock, flags);
	queue_work(system_dfl_wq, &softrnic_tcp_reaper);
}

/* Module exit: every socket let go is released (none is left open). */
void softrnic_tcp_exit(void)
{
	flush_work(&softrnic_tcp_reaper);
}

/* Run the socket's work (softrnic_tcp_work in process context) in `msecs`
 * (0: now), or sooner if already queued sooner: a deadline never delays
 * work already due. */
void softrnic_tcp_defer(struct softrnic_tcp *t, unsigned int msecs)
{
	unsigned long delay = msecs_to_jiffies(msecs);

	if (!queue_delayed_work(system_dfl_wq, &t->work, delay) && !delay)
		mod_delayed_work(system_dfl_wq, &t->work, 0);
}

/* Send what fits now: the count taken (maybe fewer than `len`), -EAGAIN
 * when nothing fits, or another error (the connection is broken). */
int softrnic_tcp_send(struct softrnic_tcp *t, const void *buf, size_t len,
		      bool more)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};

	softrnic_tcp_hold_starts(t);
	return kernel_sendmsg(t->sock, &msg, &iov, 1, len);
}

/* Send the `n` pieces `lens[i]` bytes at `offs[i]` of `pages[i]`, in order,
 * by reference: TCP takes its own reference on each page it keeps
 * (MSG_SPLICE_PAGES) and copies nothing (it copies instead over a route
 * without scatter-gather).  The count taken (maybe fewer than asked),
 * -EAGAIN when nothing fits, -EINVAL for a piece past its page, or another
 * error (the connection is broken).  The pages must pass sendpage_ok (our
 * own from alloc_page, or softrnic_page_get_sendable's). */
int softrnic_tcp_send_frags(struct softrnic_tcp *t, struct page **pages,
			    const u32 *offs, const u32 *lens, unsigned int n)
{
	struct bio_vec bv[SOFTRNIC_SEND_PAGES];
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_SPLICE_PAGES,
	};
	size_t len = 0;
	unsigned int i;

	if (n > ARRAY_SIZE(bv))
		n = ARRAY_SIZE(bv);
	for (i = 0; i < n; i++) {
		if (offs[i] >= PAGE_SIZE || lens[i] > PAGE_SIZE - offs[i])
			return -EINVAL;
		bvec_set_page(&bv[i], pages[i], lens[i], offs[i]);
		len += lens[i];
	}
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, len);
	softrnic_tcp_hold_starts(t);
	return sock_sendmsg(t->sock, &msg);
}

/*
 * A reference of our own on @page, if the socket may send it by reference
 * (sendpage_ok: not slab memory); NULL otherwise.  The caller holds the
 * page (a pin, a registration) for the call.
 */
struct page *softrnic_page_get_sendable(struct page *page)
{
	if (!sendpage_ok(page))
		return NULL;
	get_page(page);
	return page;
}

/* As softrnic_page_get_sendable, for a kernel address in the linear map
 * (NULL for any other: vmalloc, module memory). */
struct page *softrnic_virt_page_get_sendable(unsigned long addr)
{
	if (!virt_addr_valid((void *)addr))
		return NULL;
	return softrnic_page_get_sendable(virt_to_page((void *)addr));
}

void softrnic_page_get(struct page *page)
{
	get_page(page);
}

void softrnic_page_put(struct page *page)
{
	put_page(page);
}

/* The kernel address of a page allocated without __GFP_HIGHMEM. */
void *softrnic_page_address(struct page *page)
{
	return page_address(page);
}

/* The largest segment the connection sends (for FPDU sizing). */
unsigned int softrnic_tcp_mss(struct softrnic_tcp *t)
{
	return tcp_sk(t->sock->sk)->mss_cache;
}

/* The connection is no longer established (closed, reset or failed). */
bool softrnic_tcp_closed(struct softrnic_tcp *t)
{
	int state = READ_ONCE(t->sock->sk->sk_state);

	return state != TCP_ESTABLISHED && state != TCP_LISTEN &&
	       state != TCP_SYN_SENT;
}

/* Still connecting (the handshake has not finished). */
bool softrnic_tcp_connecting(struct softrnic_tcp *t)
{
	return READ_ONCE(t->sock->sk->sk_state) == TCP_SYN_SENT;
}

/* The connection's pending error (ECONNRESET, ETIMEDOUT...), or 0. */
int softrnic_tcp_error(struct softrnic_tcp *t)
{
	return READ_ONCE(t->sock->sk->sk_err);
}

/* Both ends' addresses (as they were when the socket became ours). */
int softrnic_tcp_addrs(struct softrnic_tcp *t, struct sockaddr_storage *local,
		       struct sockaddr_storage *remote)
{
	*local = t->local;
	*remote = t->remote;
	return 0;
}

/* Hand the bytes of [offset, offset + len) of `skb` to Rust in the pieces
 * they lie in; stop (desc->count = 0) as soon as Rust takes less than a
 * piece, or the read's cap (`read_cap`) is reached. */
static int softrnic_tcp_actor(read_descriptor_t *desc, struct sk_buff *skb,
			      unsigned int offset, size_t len)
{
	struct softrnic_tcp *t = desc->arg.data;
	struct skb_seq_state st;
	unsigned int done = 0;
	const u8 *data;

	/* (tcp_read_sock offers the rest of a piece again: 0 ends it.) */
	if (!desc->count)
		return 0;
	skb_prepare_seq_read(skb, offset, offset + len, &st);
	while (done < len) {
		unsigned int n = skb_seq_read(done, &data, &st);
		size_t used;

		if (!n)
			break;
		if (t->read_cap >= 0 && n > t->read_cap)
			n = t->read_cap;
		used = softrnic_tcp_bytes(t->ctx, data, n);
		done += used;
		if (t->read_cap >= 0)
			t->read_cap -= used;
		if (used < n || !t->read_cap) {
			desc->count = 0;
			break;
		}
	}
	/* Unmaps the fragment a stop short of the end left mapped. */
	skb_abort_seq_read(&st);
	return done;
}

/* Read what the socket holds into Rust (softrnic_tcp_bytes), until it holds
 * no more or Rust stops taking.  From the socket's data-ready callback
 * (`locked`: the socket is already held) or from process context. */
int softrnic_tcp_read(struct softrnic_tcp *t, bool locked)
{
	read_descriptor_t desc = { .arg.data = t, .count = 1 };
	struct sock *sk = t->sock->sk;
	int n;

	if (!locked)
		lock_sock(sk);
	n = tcp_read_sock(sk, &desc, softrnic_tcp_actor);
	if (!locked)
		release_sock(sk);
	return n;
}
