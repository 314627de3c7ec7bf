// SPDX-License-Identifier: GPL-2.0
/*
 * softrnic network and engine shim: the RoCEv2 UDP sockets (one pair per
 * network namespace, opened by the first RoCE device there), received
 * packets handed to Rust, sk_buff building and transmission, page mapping
 * for copies into pinned memory, and the engine's work items and timers.
 * The protocol itself is in Rust (engine/, core/roce_wire.rs, core/icrc.rs).
 */
#include "shim.h"
#include <net/udp_tunnel.h>
#include <net/ip.h>
#include <net/route.h>
#include <net/ip6_route.h>
#include <net/ip6_checksum.h>
#include <net/addrconf.h>
#include <linux/highmem.h>
#include <linux/igmp.h>
#include <linux/crc32.h>
#include <net/ipv6.h>
#include <net/rtnetlink.h>

#define SOFTRNIC_ROCE_PORT 4791

/*
 * The sockets of one namespace.  Kept in our own list, not in the
 * namespace: a device may be freed after its namespace is gone (its
 * unregistration is queued), and then must find nothing rather than touch
 * freed memory.  Entries are matched by namespace pointer and cookie (a
 * cookie is never reused, a pointer may be).
 */
struct softrnic_net {
	struct list_head link;
	struct net *net;
	u64 cookie;
	struct socket *sk4;
	struct socket *sk6;
	unsigned int users;
};

static LIST_HEAD(softrnic_nets);
static DEFINE_MUTEX(softrnic_net_lock);
/*
 * The engine's work items.  softrnic_wq is high priority, so a QP's first
 * packets leave at once whatever runs on its CPU; a QP that keeps sending
 * past its work budget moves to softrnic_bulk_wq (normal priority) until
 * it goes idle, so that a long stream shares its CPU with the threads
 * there (at high priority, 1 MiB READ responses starved ib_read_bw's
 * poller on that CPU for seconds).
 */
static struct workqueue_struct *softrnic_wq;
static struct workqueue_struct *softrnic_bulk_wq;
static struct workqueue_struct *softrnic_rx_wq;

/*
 * Find the softrnic device a packet is for: the one over the netdev it came
 * in on, or, for packets looped back inside the host (a device sending to
 * its own address or to another device in the same namespace), the one over
 * the netdev that owns the destination address.  Returns a registration
 * reference (ib_device_put) or NULL.
 */
static struct ib_device *softrnic_rx_device(struct sk_buff *skb)
{
	struct net_device *ndev = skb->dev;
	struct ib_device *ibdev;

	if (ndev && (ndev->flags & IFF_LOOPBACK)) {
		struct net *net = dev_net(ndev);

		rcu_read_lock();
		if (skb->protocol == htons(ETH_P_IP))
			ndev = __ip_dev_find(net, ip_hdr(skb)->daddr, false);
#if IS_ENABLED(CONFIG_IPV6)
		else if (skb->protocol == htons(ETH_P_IPV6))
			ndev = ipv6_dev_find(net, &ipv6_hdr(skb)->daddr, NULL);
#endif
		else
			ndev = NULL;
		ibdev = ndev ? ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN) : NULL;
		rcu_read_unlock();
	} else {
		ibdev = ndev ? ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN) : NULL;
	}
	if (ibdev && ibdev->ops.owner != THIS_MODULE) {
		ib_device_put(ibdev);
		ibdev = NULL;
	}
	return ibdev;
}

/*
 * Whether every byte of a received packet can be read in place, as at most
 * SOFTRNIC_RX_PIECES pieces of memory the kernel maps (softrnic_skb_pieces):
 * not with high memory, unreadable (device memory) fragments or nested
 * fragment lists.
 */
static bool softrnic_skb_in_place(const struct sk_buff *skb)
{
	unsigned int pieces = 1 + skb_shinfo(skb)->nr_frags;
	struct sk_buff *frag;

	if (!skb_is_nonlinear(skb))
		return true;
	if (IS_ENABLED(CONFIG_HIGHMEM) || !skb_frags_readable(skb))
		return false;
	skb_walk_frags(skb, frag) {
		if (skb_has_frag_list(frag) || !skb_frags_readable(frag))
			return false;
		pieces += 1 + skb_shinfo(frag)->nr_frags;
	}
	return pieces <= SOFTRNIC_RX_PIECES;
}

/*
 * UDP encap_rcv: every datagram to port 4791 in this namespace, and GSO
 * packets of several (softrnic_skb_set_gso), taken whole.
 */
static int softrnic_udp_encap_recv(struct sock *sk, struct sk_buff *skb)
{
	struct ib_device *ibdev = softrnic_rx_device(skb);
	unsigned int pull = sizeof(struct udphdr) + SOFTRNIC_ROCE_HEADERS_MAX;

	if (!ibdev) {
		kfree_skb(skb);
		return 0;
	}
	/*
	 * The headers in the linear area; the payload is read where it lies
	 * (softrnic_skb_pieces), so only a packet whose pieces cannot be read
	 * in place is copied into one buffer.  A GSO packet's IP and UDP
	 * headers are linear already; each of its packets' own headers are
	 * read with its payload.
	 */
	if (skb_is_gso(skb))
		pull = sizeof(struct udphdr);
	if ((skb_is_gso(skb) && !(skb_shinfo(skb)->gso_type & SKB_GSO_UDP_L4)) ||
	    (!softrnic_skb_in_place(skb) && skb_linearize(skb)) ||
	    !pskb_may_pull(skb, min_t(unsigned int, skb->len, pull))) {
		softrnic_roce_drop(ibdev);
		kfree_skb(skb);
	} else {
		softrnic_roce_recv(ibdev, skb);
	}
	ib_device_put(ibdev);
	return 0;
}

static struct socket *softrnic_udp_open(struct net *net, bool ipv6)
{
	struct udp_port_cfg cfg = {
		.local_udp_port = htons(SOFTRNIC_ROCE_PORT),
	};
	struct udp_tunnel_sock_cfg tcfg = {
		.encap_type = 1,
		.encap_rcv = softrnic_udp_encap_recv,
	};
	struct socket *sock;
	int err;

	if (ipv6) {
		cfg.family = AF_INET6;
		cfg.ipv6_v6only = 1;
		/* RoCEv2 over IPv6 is sent with a real UDP checksum; accept
		 * zero-checksum senders too. */
		cfg.use_udp6_rx_checksums = 0;
	} else {
		cfg.family = AF_INET;
	}
	err = udp_sock_create(net, &cfg, &sock);
	if (err)
		return ERR_PTR(err);
	setup_udp_tunnel_sock(net, sock->sk, &tcfg);
	/*
	 * Take GSO packets of RoCE packets whole (a softrnic sender over a
	 * veth marks them as tunnel traffic: softrnic_skb_set_gso) instead of
	 * having the stack cut them into one skb each first.
	 */
	udp_set_bit(ACCEPT_L4, sock->sk);
	return sock;
}

static struct softrnic_net *softrnic_net_find(struct net *net, u64 cookie)
{
	struct softrnic_net *sn;

	list_for_each_entry(sn, &softrnic_nets, link)
		if (sn->net == net && sn->cookie == cookie)
			return sn;
	return NULL;
}

static void softrnic_net_close(struct softrnic_net *sn)
{
	if (sn->sk6)
		udp_tunnel_sock_release(sn->sk6->sk);
	udp_tunnel_sock_release(sn->sk4->sk);
	list_del(&sn->link);
	kfree(sn);
}

/*
 * A RoCE device over `ndev` is being added: open the sockets of the netdev's
 * namespace if it is the first there (EADDRINUSE when another RoCE driver,
 * such as rdma_rxe, has port 4791 there).  *cookie identifies the namespace
 * for softrnic_net_detach.
 */
int softrnic_net_attach(struct net_device *ndev, struct net **netp, u64 *cookie)
{
	struct net *net = dev_net(ndev);
	struct softrnic_net *sn;
	int err = 0;

	*netp = net;
	*cookie = net->net_cookie;
	mutex_lock(&softrnic_net_lock);
	sn = softrnic_net_find(net, net->net_cookie);
	if (sn) {
		sn->users++;
		goto out;
	}
	sn = kzalloc(sizeof(*sn), GFP_KERNEL);
	if (!sn) {
		err = -ENOMEM;
		goto out;
	}
	sn->sk4 = softrnic_udp_open(net, false);
	if (IS_ERR(sn->sk4)) {
		err = PTR_ERR(sn->sk4);
		kfree(sn);
		goto out;
	}
#if IS_ENABLED(CONFIG_IPV6)
	sn->sk6 = softrnic_udp_open(net, true);
	if (IS_ERR(sn->sk6)) {
		err = PTR_ERR(sn->sk6);
		udp_tunnel_sock_release(sn->sk4->sk);
		kfree(sn);
		goto out;
	}
#endif
	sn->net = net;
	sn->cookie = net->net_cookie;
	sn->users = 1;
	list_add(&sn->link, &softrnic_nets);
out:
	mutex_unlock(&softrnic_net_lock);
	return err;
}

/* A device is going away; the last one in its namespace closes the sockets. */
void softrnic_net_detach(struct net *net, u64 cookie)
{
	struct softrnic_net *sn;

	mutex_lock(&softrnic_net_lock);
	sn = softrnic_net_find(net, cookie);
	if (sn && --sn->users == 0)
		softrnic_net_close(sn);
	mutex_unlock(&softrnic_net_lock);
}

/* The namespace is being destroyed: close its sockets now. */
static void softrnic_net_exit(struct net *net)
{
	struct softrnic_net *sn;

	mutex_lock(&softrnic_net_lock);
	sn = softrnic_net_find(net, net->net_cookie);
	if (sn)
		softrnic_net_close(sn);
	mutex_unlock(&softrnic_net_lock);
}

/*
 * Join (or leave) the IP multicast group a multicast GID names on `ndev`,
 * through the namespace's RoCE socket, so the IP layer delivers the group's
 * datagrams to port 4791.  IPv4-mapped GIDs join an IPv4 group.
 */
int softrnic_mcast_join(struct net_device *ndev, const u8 gid[16], bool join)
{
	struct net *net = dev_net(ndev);
	struct softrnic_net *sn;
	int err = -ENODEV;

	mutex_lock(&softrnic_net_lock);
	sn = softrnic_net_find(net, net->net_cookie);
	if (!sn)
		goto out;
	rtnl_lock();
	if (ipv6_addr_v4mapped((const struct in6_addr *)gid)) {
		struct ip_mreqn mreq = { .imr_ifindex = ndev->ifindex };

		memcpy(&mreq.imr_multiaddr.s_addr, gid + 12, 4);
		lock_sock(sn->sk4->sk);
		err = join ? ip_mc_join_group(sn->sk4->sk, &mreq) :
			     ip_mc_leave_group(sn->sk4->sk, &mreq);
		release_sock(sn->sk4->sk);
	} else {
#if IS_ENABLED(CONFIG_IPV6)
		const struct in6_addr *a = (const struct in6_addr *)gid;

		lock_sock(sn->sk6->sk);
		err = join ? ipv6_sock_mc_join(sn->sk6->sk, ndev->ifindex, a) :
			     ipv6_sock_mc_drop(sn->sk6->sk, ndev->ifindex, a);
		release_sock(sn->sk6->sk);
#else
		err = -EAFNOSUPPORT;
#endif
	}
	rtnl_unlock();
out:
	mutex_unlock(&softrnic_net_lock);
	return err;
}

static struct pernet_operations softrnic_net_ops = {
	.exit = softrnic_net_exit,
};

int softrnic_net_register(void)
{
	int err;

	softrnic_wq = alloc_workqueue("softrnic", WQ_PERCPU | WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	if (!softrnic_wq)
		return -ENOMEM;
	softrnic_bulk_wq = alloc_workqueue("softrnic_bulk", WQ_PERCPU | WQ_MEM_RECLAIM, 0);
	if (!softrnic_bulk_wq) {
		destroy_workqueue(softrnic_wq);
		return -ENOMEM;
	}
	softrnic_rx_wq = alloc_workqueue("softrnic_rx", WQ_UNBOUND | WQ_MEM_RECLAIM | WQ_HIGHPRI, 0);
	if (!softrnic_rx_wq) {
		destroy_workqueue(softrnic_bulk_wq);
		destroy_workqueue(softrnic_wq);
		return -ENOMEM;
	}
	err = register_pernet_subsys(&softrnic_net_ops);
	if (err) {
		destroy_workqueue(softrnic_rx_wq);
		destroy_workqueue(softrnic_bulk_wq);
		destroy_workqueue(softrnic_wq);
	}
	return err;
}

void softrnic_net_unregister(void)
{
	unregister_pernet_subsys(&softrnic_net_ops);
	destroy_workqueue(softrnic_rx_wq);
	destroy_workqueue(softrnic_bulk_wq);
	destroy_workqueue(softrnic_wq);
}

/* ---- received packets ---- */

/*
 * The packet from its IP header: *linear bytes of it in the linear area (at
 * least its headers, encap_recv pulled them), *len bytes in all.
 */
const u8 *softrnic_skb_network(const struct sk_buff *skb, u32 *linear, u32 *len)
{
	*linear = skb_tail_pointer(skb) - skb_network_header(skb);
	*len = skb->len + (skb->data - skb_network_header(skb));
	return skb_network_header(skb);
}

struct softrnic_piece_walk {
	struct softrnic_piece *out;
	int n, max;
	u32 skip, left;
};

/* Add what of `len` bytes at `p` the walk still wants; false if out of room. */
static bool softrnic_piece_add(struct softrnic_piece_walk *w, const u8 *p, u32 len)
{
	if (w->skip >= len) {
		w->skip -= len;
		return true;
	}
	p += w->skip;
	len = min(len - w->skip, w->left);
	w->skip = 0;
	if (!len)
		return true;
	if (w->n == w->max)
		return false;
	w->out[w->n].data = p;
	w->out[w->n].len = len;
	w->n++;
	w->left -= len;
	return true;
}

/* One skb's linear area from `from`, then its page fragments. */
static bool softrnic_piece_walk(struct softrnic_piece_walk *w,
				const struct sk_buff *skb, const u8 *from)
{
	const struct skb_shared_info *sh = skb_shinfo(skb);
	int i;

	if (!softrnic_piece_add(w, from, skb_tail_pointer(skb) - from))
		return false;
	for (i = 0; i < sh->nr_frags && w->left; i++) {
		const u8 *p = skb_frag_address(&sh->frags[i]);

		if (!p || !softrnic_piece_add(w, p, skb_frag_size(&sh->frags[i])))
			return false;
	}
	return true;
}

/*
 * Bytes off .. off + len of a received packet, counted from its IP header,
 * as at most `max` pieces of memory read in place: its linear area, its
 * page fragments, its fragment list.  Returns how many, or -1 when the bytes
 * are not all in the packet or need more pieces.  The pieces live as long as
 * the packet.
 */
int softrnic_skb_pieces(const struct sk_buff *skb, u32 off, u32 len,
			struct softrnic_piece *out, int max)
{
	struct softrnic_piece_walk w = {
		.out = out, .max = max, .skip = off, .left = len,
	};
	struct sk_buff *frag;

	if (!softrnic_piece_walk(&w, skb, skb_network_header(skb)))
		return -1;
	skb_walk_frags(skb, frag) {
		if (!w.left)
			break;
		if (!softrnic_piece_walk(&w, frag, frag->data))
			return -1;
	}
	return w.left ? -1 : w.n;
}

/* The source MAC of a received packet (zero if it has no Ethernet header). */
void softrnic_skb_smac(const struct sk_buff *skb, u8 mac[6])
{
	if (skb_mac_header_was_set(skb) && skb_mac_header_len(skb) >= ETH_HLEN)
		ether_addr_copy(mac, eth_hdr(skb)->h_source);
	else
		eth_zero_addr(mac);
}

void softrnic_skb_free(struct sk_buff *skb)
{
	kfree_skb(skb);
}

/* ---- transmitted packets ---- */

/*
 * A packet for `ndev` with room for its headers below `len` bytes of RoCE
 * transport packet (BTH to ICRC), which the caller writes at *data.
 */
struct sk_buff *softrnic_skb_alloc(struct net_device *ndev, u32 len, bool ipv6,
				   u8 **data)
{
	unsigned int hdr = LL_RESERVED_SPACE(ndev) + sizeof(struct udphdr) +
			   (ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	struct sk_buff *skb = alloc_skb(hdr + len + ndev->needed_tailroom, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, hdr);
	*data = skb_put(skb, len);
	skb->protocol = ipv6 ? htons(ETH_P_IPV6) : htons(ETH_P_IP);
	return skb;
}

/*
 * Route the packet from `saddr` to `daddr` (IPv4: the last 4 bytes of the
 * 16-byte addresses) out of `ndev` and put the UDP and IP headers in front of
 * it.  *route, when set, is the route of the caller's previous packet to
 * the same place and is used again; when NULL, the route looked up is left
 * there with a reference of its own (softrnic_dst_release), so a batch of
 * packets looks its route up once.  route itself NULL: a packet that stays
 * in this host (rx.rs, loop_back), given its headers and no route (and, as
 * an atomic datagram, IP ID 0: RFC 6864).  `segs`: the datagrams the packet
 * will be cut into (softrnic_skb_set_gso), each taking the next IPv4 ID
 * (reserved here).  Returns the IP header and the
 * packet's length from there, for the ICRC, or NULL with *err set (no
 * route).
 */
u8 *softrnic_skb_push_headers(struct sk_buff *skb, struct net_device *ndev,
			      const u8 saddr[16], const u8 daddr[16], u16 sport,
			      u8 tclass, u8 ttl, u32 flow_label, u32 segs,
			      struct dst_entry **route, u32 *len, int *err)
{
	struct net *net = dev_net(ndev);
	struct udphdr *uh;

	uh = skb_push(skb, sizeof(*uh));
	skb_reset_transport_header(skb);
	uh->source = htons(sport);
	uh->dest = htons(SOFTRNIC_ROCE_PORT);
	uh->len = htons(skb->len);
	uh->check = 0;

	if (skb->protocol == htons(ETH_P_IP)) {
		struct flowi4 fl = {
			.flowi4_oif = ndev->ifindex,
			.flowi4_proto = IPPROTO_UDP,
		};
		struct rtable *rt;
		struct iphdr *iph;

		memcpy(&fl.daddr, daddr + 12, 4);
		memcpy(&fl.saddr, saddr + 12, 4);
		if (!route) {
			/* Stays in this host: no route. */
		} else if (*route) {
			skb_dst_set(skb, dst_clone(*route));
		} else {
			rt = ip_route_output_key(net, &fl);
			if (IS_ERR(rt)) {
				*err = PTR_ERR(rt);
				return NULL;
			}
			*route = dst_clone(&rt->dst);
			skb_dst_set(skb, &rt->dst);
		}
		iph = skb_push(skb, sizeof(*iph));
		skb_reset_network_header(skb);
		iph->version = 4;
		iph->ihl = sizeof(*iph) >> 2;
		iph->tos = tclass;
		iph->tot_len = htons(skb->len);
		iph->frag_off = htons(IP_DF);
		iph->ttl = ttl;
		iph->protocol = IPPROTO_UDP;
		iph->saddr = fl.saddr;
		iph->daddr = fl.daddr;
		if (route)
			__ip_select_ident(net, iph, segs);
		else
			iph->id = 0;
		iph->check = 0;
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		skb->ip_summed = CHECKSUM_NONE;
	} else {
#if IS_ENABLED(CONFIG_IPV6)
		struct flowi6 fl6 = {
			.flowi6_oif = ndev->ifindex,
			.flowi6_proto = IPPROTO_UDP,
		};
		struct dst_entry *dst;
		struct ipv6hdr *ip6h;

		memcpy(&fl6.daddr, daddr, 16);
		memcpy(&fl6.saddr, saddr, 16);
		if (route) {
			if (*route) {
				dst = dst_clone(*route);
			} else {
				dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
				if (IS_ERR(dst)) {
					*err = PTR_ERR(dst);
					return NULL;
				}
				*route = dst_clone(dst);
			}
			skb_dst_set(skb, dst);
		}
		ip6h = skb_push(skb, sizeof(*ip6h));
		skb_reset_network_header(skb);
		ip6_flow_hdr(ip6h, tclass, htonl(flow_label & 0xfffff));
		ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
		ip6h->nexthdr = IPPROTO_UDP;
		ip6h->hop_limit = ttl;
		ip6h->saddr = fl6.saddr;
		ip6h->daddr = fl6.daddr;
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
#else
		*err = -EAFNOSUPPORT;
		return NULL;
#endif
	}
	*len = skb->len;
	return skb_network_header(skb);
}

/* Drop the caller's reference on a route push_headers left it. */
void softrnic_dst_release(struct dst_entry *dst)
{
	dst_release(dst);
}

/* Send a packet built by alloc + push_headers (its ICRC written): consumed. */
int softrnic_skb_xmit(struct sk_buff *skb)
{
	struct net *net = dev_net(skb_dst(skb)->dev);
	int err;

	if (skb->protocol == htons(ETH_P_IP)) {
		err = ip_local_out(net, skb->sk, skb);
	} else {
#if IS_ENABLED(CONFIG_IPV6)
		/*
		 * The UDP checksum covers the ICRC, so it comes last (a GSO
		 * packet gets the pseudo-header's, each datagram its own when
		 * it is cut).
		 */
		udp6_set_csum(false, skb, &ipv6_hdr(skb)->saddr,
			      &ipv6_hdr(skb)->daddr, skb->len - sizeof(struct ipv6hdr));
		err = ip6_local_out(net, skb->sk, skb);
#else
		kfree_skb(skb);
		err = -EAFNOSUPPORT;
#endif
	}
	return net_xmit_eval(err);
}

/* ---- transmitted packets in page fragments, and GSO ---- */

/*
 * A buffer of `len` bytes for one packet's transport bytes (BTH to ICRC),
 * contiguous (any context, with IRQs off too); NULL when memory is short.
 * Up to a page from the per-CPU page-fragment cache; a longer one (IB MTU
 * 4096's packets) a compound page of its own, since the cache fails such a
 * request whenever its block is short of room, and then every one after
 * it (__page_frag_alloc_align does not move to a new block for them).
 * Either is freed by a put of its head page (skb_free_frag, or the skb's
 * release of its fragments).
 */
u8 *softrnic_frag_alloc(u32 len)
{
	struct page *page;

	if (len <= PAGE_SIZE)
		return netdev_alloc_frag(len);
	page = alloc_pages(GFP_ATOMIC | __GFP_COMP | __GFP_NOWARN, get_order(len));
	return page ? page_address(page) : NULL;
}

/* Free a buffer softrnic_skb_add_frag did not take. */
void softrnic_frag_free(u8 *p)
{
	skb_free_frag(p);
}

/* A packet with room for the link, IP and UDP headers only; its transport
 * packets follow as page fragments (softrnic_skb_add_frag). */
struct sk_buff *softrnic_skb_alloc_head(struct net_device *ndev, bool ipv6)
{
	unsigned int hdr = LL_RESERVED_SPACE(ndev) + sizeof(struct udphdr) +
			   (ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	struct sk_buff *skb = alloc_skb(hdr, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, hdr);
	skb->protocol = ipv6 ? htons(ETH_P_IPV6) : htons(ETH_P_IP);
	return skb;
}

/*
 * Append buffer `p` (softrnic_frag_alloc, `len` bytes) as the packet's next
 * page fragment; the packet takes the buffer's reference.  False when it
 * has no room for another fragment (the buffer is still the caller's).
 */
bool softrnic_skb_add_frag(struct sk_buff *skb, u8 *p, u32 len)
{
	struct page *page = virt_to_head_page(p);
	unsigned int i = skb_shinfo(skb)->nr_frags;

	if (i >= MAX_SKB_FRAGS)
		return false;
	skb_add_rx_frag(skb, i, page, p - (u8 *)page_address(page), len,
			SKB_DATA_ALIGN(len));
	return true;
}

/* Page fragment `i` of a packet being built, and its length; NULL if none. */
u8 *softrnic_skb_frag(struct sk_buff *skb, u32 i, u32 *len)
{
	skb_frag_t *f;

	if (i >= skb_shinfo(skb)->nr_frags)
		return NULL;
	f = &skb_shinfo(skb)->frags[i];
	*len = skb_frag_size(f);
	return skb_frag_address(f);
}

/*
 * Make a packet (headers pushed for `segs` datagrams) a GSO packet of
 * `segs` RoCE transport packets of `size` bytes, the last possibly
 * shorter: the stack, or the device, cuts it into one datagram each, with
 * their own lengths, consecutive IPv4 IDs (as inet_gso_segment does; the
 * ICRCs were computed for them: core/roce_gso.rs) and UDP checksums (so
 * the UDP checksum is asked for, as checksum offload).
 *
 * `whole`: also mark it as UDP tunnel traffic, which is what lets a UDP
 * tunnel socket that accepts GSO (softrnic's: softrnic_udp_open) take it
 * whole rather than have the stack cut it first; any other receiver (rxe,
 * a softrnic that does not) gets it cut, as plain UDP segmentation
 * (skb->encapsulation is not set, so inet_gso_segment cuts it as UDP, not
 * as a tunnel).  Only over a veth (softrnic_netdev_gso_mode), whose peer
 * is in this host.
 */
void softrnic_skb_set_gso(struct sk_buff *skb, u32 size, u32 segs, bool whole)
{
	struct skb_shared_info *sh = skb_shinfo(skb);
	struct udphdr *uh = udp_hdr(skb);

	sh->gso_size = size;
	sh->gso_segs = segs;
	sh->gso_type = SKB_GSO_UDP_L4 | (whole ? SKB_GSO_UDP_TUNNEL : 0);
	/*
	 * Checksum offload, as UDP segmentation needs (without it the stack
	 * cuts the packet before the device, and sums every datagram): the
	 * pseudo-header's sum for the whole length, which the cut adjusts to
	 * each datagram's.  IPv6: softrnic_skb_xmit puts it in
	 * (udp6_set_csum).
	 */
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_transport_header(skb) - skb->head;
	skb->csum_offset = offsetof(struct udphdr, check);
	uh->check = 0;
	if (skb->protocol == htons(ETH_P_IP))
		uh->check = ~csum_tcpudp_magic(ip_hdr(skb)->saddr, ip_hdr(skb)->daddr,
					       skb->len - skb_transport_offset(skb),
					       IPPROTO_UDP, 0);
}

/*
 * How packets sent over `ndev` may go out several to a GSO packet
 * (softrnic_skb_set_gso): 0 not at all (its UDP segmentation is off, as
 * `ethtool -K DEV tx-udp-segmentation off` sets it, or it takes one
 * segment per GSO packet, `ip link set DEV gso_max_segs 1`: one skb per
 * packet), 1 cut by the stack or the device, 2 also marked for a softrnic receiver
 * to take whole: a veth, whose frames go straight into this host's other
 * end.  A NIC may read that mark as a request for tunnel offload, so over
 * any other device the stack or the device cuts them.
 */
u32 softrnic_netdev_gso_mode(const struct net_device *ndev)
{
	if (!(ndev->features & NETIF_F_GSO_UDP_L4) || READ_ONCE(ndev->gso_max_segs) < 2)
		return 0;
	if (ndev->rtnl_link_ops && !strcmp(ndev->rtnl_link_ops->kind, "veth"))
		return 2;
	return 1;
}

/* A received GSO packet's segment size (0: not a GSO packet). */
u32 softrnic_skb_gso_size(const struct sk_buff *skb)
{
	return skb_is_gso(skb) ? skb_shinfo(skb)->gso_size : 0;
}

/* The kernel's CRC-32 (arch-optimised): one step of the ICRC. */
u32 softrnic_crc32_le(u32 crc, const u8 *p, size_t len)
{
	return crc32_le(crc, p, len);
}

/* The kernel's CRC-32C (arch-optimised): one step of an MPA FPDU's CRC. */
u32 softrnic_crc32c(u32 crc, const u8 *p, size_t len)
{
	return crc32c(crc, p, len);
}

/* ---- memory ---- */

/* Map a page for a short copy (undone by softrnic_kunmap, LIFO, same CPU). */
void *softrnic_kmap(struct page *page)
{
	return kmap_local_page(page);
}

void softrnic_kunmap(void *addr)
{
	kunmap_local(addr);
}

/* The pinned pages of a umem, in order, and the offset of its start in the first. */
size_t softrnic_umem_page_count(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

size_t softrnic_umem_pages(struct ib_umem *umem, struct page **pages, size_t n,
			   u32 *first_offset)
{
	struct sg_page_iter it;
	size_t i = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (i == n)
			break;
		pages[i++] = sg_page_iter_page(&it);
	}
	*first_offset = ib_umem_offset(umem);
	return i;
}

/* ---- counters (rdma statistic, sysfs hw_counters) ---- */

struct rdma_hw_stats *softrnic_alloc_port_stats(const struct rdma_stat_desc *descs,
						int n)
{
	return rdma_alloc_hw_stats_struct(descs, n, RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

void softrnic_stats_set(struct rdma_hw_stats *stats, int i, u64 value)
{
	if (i >= 0 && i < stats->num_counters)
		stats->value[i] = value;
}

/* ---- work items and timers of the engine ---- */

void softrnic_work_init(struct work_struct *work, void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

/*
 * Queue the work on `cpu`: a QP sends only from its own CPU, so its packets
 * enter the stack (and a veth peer's per-CPU backlog) in order.  A work
 * item always goes to the same queue (`bulk` is fixed per work item), so
 * flush_work and disable_work_sync see all of it.
 */
void softrnic_work_queue(struct work_struct *work, unsigned int cpu, bool bulk)
{
	struct workqueue_struct *wq = bulk ? softrnic_bulk_wq : softrnic_wq;

	if (cpu < nr_cpu_ids && cpu_online(cpu))
		queue_work_on(cpu, wq, work);
	else
		queue_work(wq, work);
}

/*
 * A kernel QP's receive backlog (glue/backlog.rs): received packets, for
 * its receive work item to process in order.
 */
void softrnic_rxq_init(struct sk_buff_head *q)
{
	skb_queue_head_init(q);
}

/*
 * Whether a queued packet came from rx.rs's loop_back (it never left the
 * host and carries no ICRC); kept in the control buffer, which is ours
 * while the packet waits here.
 */
struct softrnic_rxq_cb {
	bool looped;
};

/*
 * 0: queued into an empty backlog (the caller queues the work that drains
 * it).  2: queued behind others (a drain that will reach it is owed
 * already).  1: not queued, the backlog holds `max` (the caller drops it).
 */
int softrnic_rxq_add(struct sk_buff_head *q, struct sk_buff *skb, unsigned int max,
		     bool looped)
{
	unsigned long flags;
	int ret;

	BUILD_BUG_ON(sizeof(struct softrnic_rxq_cb) > sizeof(skb->cb));
	((struct softrnic_rxq_cb *)skb->cb)->looped = looped;

	spin_lock_irqsave(&q->lock, flags);
	if (skb_queue_len(q) >= max) {
		ret = 1;
	} else {
		ret = skb_queue_empty(q) ? 0 : 2;
		__skb_queue_tail(q, skb);
	}
	spin_unlock_irqrestore(&q->lock, flags);
	return ret;
}

struct sk_buff *softrnic_rxq_take(struct sk_buff_head *q, bool *looped)
{
	struct sk_buff *skb = skb_dequeue(q);

	*looped = skb && ((struct softrnic_rxq_cb *)skb->cb)->looped;
	return skb;
}

bool softrnic_rxq_empty(struct sk_buff_head *q)
{
	return skb_queue_empty_lockless(q);
}

void softrnic_rxq_purge(struct sk_buff_head *q)
{
	skb_queue_purge(q);
}

void softrnic_bh_disable(void)
{
	local_bh_disable();
}

void softrnic_bh_enable(void)
{
	local_bh_enable();
}

/*
 * A kernel QP's receive work (its backlog): on any CPU the scheduler picks,
 * one run at a time, so the backlog's order holds.
 */
void softrnic_rx_work_queue(struct work_struct *work)
{
	queue_work(softrnic_rx_wq, work);
}

/* Pin the caller to its CPU (preemption off) and say which it is. */
unsigned int softrnic_cpu_get(void)
{
	return get_cpu();
}

void softrnic_cpu_put(void)
{
	put_cpu();
}

unsigned int softrnic_cpu_count(void)
{
	return num_possible_cpus();
}

void softrnic_work_flush(struct work_struct *work)
{
	flush_work(work);
}

/* Stop for good: wait for a running work to end; later queueing is ignored. */
void softrnic_work_disable(struct work_struct *work)
{
	disable_work_sync(work);
}

void softrnic_timer_init(struct timer_list *t, void (*fn)(struct timer_list *))
{
	timer_setup(t, fn, 0);
}

/* (Re)start the timer to fire `usecs` from now (at least one jiffy). */
void softrnic_timer_arm(struct timer_list *t, u64 usecs)
{
	unsigned long j = usecs_to_jiffies(min_t(u64, usecs, 3600ULL * USEC_PER_SEC));

	mod_timer(t, jiffies + max(j, 1UL));
}

void softrnic_timer_stop(struct timer_list *t)
{
	timer_delete(t);
}

/* Stop for good: later arms are ignored. */
void softrnic_timer_shutdown(struct timer_list *t)
{
	timer_shutdown_sync(t);
}
