/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C side of softrnic's glue layer: the kernel headers bindgen reads, and
 * the small C shim for what Rust cannot call directly (static inlines, macros,
 * statically initialised C objects).  Everything else lives in Rust.
 */
#ifndef SOFTRNIC_SHIM_H
#define SOFTRNIC_SHIM_H

#include <linux/netdevice.h>
#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/inetdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/iw_cm.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/vmalloc.h>
#include <linux/delay.h>
#include <linux/xarray.h>
#include <linux/completion.h>
#include <linux/random.h>
#include <linux/workqueue.h>
#include <linux/timer.h>

/* The link types softrnic registers; index = enum softrnic_transport. */
enum softrnic_transport {
	SOFTRNIC_ROCE = 0,
	SOFTRNIC_IWARP = 1,
};

/* Implemented in Rust (glue/callbacks.rs). */
int softrnic_newlink(enum softrnic_transport transport, const char *ibdev_name,
		     struct net_device *ndev);
void softrnic_netdev_event(unsigned long event, struct net_device *ndev);
void softrnic_netdev_addr_event(struct net_device *ndev);
const char *softrnic_transport_name(struct ib_device *ibdev);

/* Implemented in C (glue/shim.c). */
int softrnic_shim_register(void);
struct module *softrnic_this_module(void);
u64 softrnic_now_ms(void);
struct nlattr *softrnic_nl_driver_nest(struct sk_buff *msg);
void softrnic_nl_nest_end(struct sk_buff *msg, struct nlattr *nest, bool ok);
bool softrnic_netdev_registered(const struct net_device *ndev);
void softrnic_shim_unregister(void);
struct ib_device *softrnic_alloc_ib_device(size_t size);
const struct attribute_group *softrnic_device_group(void);
void softrnic_ib_device_get(struct ib_device *ibdev);
void softrnic_ib_device_put(struct ib_device *ibdev);
void softrnic_dispatch_port_event(struct ib_device *ibdev, u32 port,
				  enum ib_event_type type);
struct net_device *softrnic_port_netdev(struct ib_device *ibdev);
bool softrnic_netdev_is_ethernet(const struct net_device *ndev);
bool softrnic_netdev_link_up(const struct net_device *ndev);
unsigned int softrnic_netdev_mtu(const struct net_device *ndev);
const char *softrnic_netdev_name(const struct net_device *ndev);
void softrnic_netdev_mac(const struct net_device *ndev, u8 mac[6]);
bool softrnic_netdev_ipv4(struct net_device *ndev, u8 addr[4]);
bool softrnic_netdev_ipv4_nth(struct net_device *ndev, unsigned int nth, u8 addr[4]);
bool softrnic_neigh_ipv4(struct net_device *ndev, const u8 mac[6], u8 addr[4]);
void softrnic_dev_put(struct net_device *ndev);
int softrnic_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
size_t softrnic_udata_outlen(const struct ib_udata *udata);


/*
 * Verbs-object helpers (glue/verbs_shim.c).
 *
 * A softrnic_handle is what a key table holds for an object that can be
 * found by key (QP number, MR/MW key): the object's liveness count and a
 * pointer to it.  Lookups run under RCU, without the table's lock, and take
 * a reference only while the count is non-zero.  Destroy removes the entry,
 * drops the creator's reference and waits for the last one; the object's
 * memory may then go at once (no lookup reaches it without a reference),
 * and the handle goes after an RCU grace period (a lookup that found it
 * before the removal may still read its count).  Tables of objects without
 * a handle (AHs) are read by copy under the lock.
 */
struct softrnic_handle {
	refcount_t count;
	struct completion done;
	void *obj;
	struct rcu_head rcu;
};

struct softrnic_handle *softrnic_handle_new(void);
void softrnic_handle_put(struct softrnic_handle *h);
void softrnic_handle_drain(struct softrnic_handle *h);

void softrnic_table_init(struct xarray *xa);
void softrnic_table_destroy(struct xarray *xa);
int softrnic_table_reserve(struct xarray *xa, u32 *index, u32 min, u32 max,
			   u32 *next, bool atomic);
int softrnic_table_reserve_at(struct xarray *xa, u32 index);
void softrnic_table_publish(struct xarray *xa, u32 index, void *entry);
void softrnic_table_publish_handle(struct xarray *xa, u32 index,
				   struct softrnic_handle *h, void *obj);
bool softrnic_table_write(struct xarray *xa, u32 index, const void *src,
			  size_t offset, size_t len);
bool softrnic_table_copy(struct xarray *xa, u32 index, void *dst,
			 size_t offset, size_t len);
void softrnic_table_erase(struct xarray *xa, u32 index);
void *softrnic_table_get(struct xarray *xa, u32 index,
			 struct softrnic_handle **h);

struct ib_udata *softrnic_bundle_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *softrnic_udata_ucontext(struct ib_udata *udata);
size_t softrnic_udata_inlen(const struct ib_udata *udata);
int softrnic_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
int softrnic_copy_to_user(u64 addr, const void *src, size_t len);

void *softrnic_vmalloc_user(size_t size);
void *softrnic_vzalloc(size_t size);
void softrnic_vfree(const void *addr);

/* A ring mapped into user space: the mmap entry owns the memory. */
struct softrnic_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	void *buf;
};

struct softrnic_mmap_entry *softrnic_mmap_entry_new(struct ib_ucontext *uctx,
						    void *buf, size_t len,
						    u64 *key);
void softrnic_mmap_entry_remove(struct softrnic_mmap_entry *entry);
int softrnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void softrnic_mmap_free(struct rdma_user_mmap_entry *entry);

struct ib_umem *softrnic_umem_get(struct ib_device *dev, u64 addr, u64 len,
				  int access, int *err);

void softrnic_qp_event(struct ib_qp *qp, enum ib_event_type type);
void softrnic_cq_event(struct ib_cq *cq, enum ib_event_type type);
void softrnic_srq_event(struct ib_srq *srq, enum ib_event_type type);
void softrnic_cq_notify(struct ib_cq *cq);

int softrnic_map_mr_sg(struct ib_mr *mr, struct scatterlist *sg, int sg_nents,
		       unsigned int *sg_offset);
int softrnic_mr_set_page(struct ib_mr *mr, u64 addr);
u8 softrnic_random_key_byte(void);
unsigned long softrnic_page_size(void);

/*
 * Network and engine helpers (glue/net_shim.c).
 */
/* Implemented in Rust (glue/net.rs): a RoCEv2 packet for `ibdev` (consumed),
 * or a packet dropped before it could be looked at. */
void softrnic_roce_recv(struct ib_device *ibdev, struct sk_buff *skb);
void softrnic_roce_drop(struct ib_device *ibdev);

int softrnic_net_register(void);
void softrnic_net_unregister(void);
int softrnic_net_attach(struct net_device *ndev, struct net **net, u64 *cookie);
void softrnic_net_detach(struct net *net, u64 cookie);
int softrnic_mcast_join(struct net_device *ndev, const u8 gid[16], bool join);

/*
 * Received packets keep their payload where the network stack put it:
 * encap_recv pulls the IP, UDP and transport headers (at most
 * SOFTRNIC_ROCE_HEADERS_MAX bytes after UDP) into the linear area, and the
 * rest is read in place, in at most SOFTRNIC_RX_PIECES pieces.
 */
#define SOFTRNIC_ROCE_HEADERS_MAX 40
#define SOFTRNIC_RX_PIECES 20
struct softrnic_piece {
	const u8 *data;
	u32 len;
};
const u8 *softrnic_skb_network(const struct sk_buff *skb, u32 *linear, u32 *len);
int softrnic_skb_pieces(const struct sk_buff *skb, u32 off, u32 len,
			struct softrnic_piece *out, int max);
void softrnic_skb_smac(const struct sk_buff *skb, u8 mac[6]);
void softrnic_skb_free(struct sk_buff *skb);
struct sk_buff *softrnic_skb_alloc(struct net_device *ndev, u32 len, bool ipv6,
				   u8 **data);
u8 *softrnic_skb_push_headers(struct sk_buff *skb, struct net_device *ndev,
			      const u8 saddr[16], const u8 daddr[16], u16 sport,
			      u8 tclass, u8 ttl, u32 flow_label, u32 segs,
			      struct dst_entry **route, u32 *len, int *err);
/*
 * Packets in page fragments, several of which go out as one GSO packet
 * (transport/roce/packet.rs): a buffer per packet, a header-only skb that
 * takes them as its fragments, and the GSO marks.
 */
u8 *softrnic_frag_alloc(u32 len);
void softrnic_frag_free(u8 *p);
struct sk_buff *softrnic_skb_alloc_head(struct net_device *ndev, bool ipv6);
bool softrnic_skb_add_frag(struct sk_buff *skb, u8 *p, u32 len);
u8 *softrnic_skb_frag(struct sk_buff *skb, u32 i, u32 *len);
void softrnic_skb_set_gso(struct sk_buff *skb, u32 size, u32 segs, bool whole);
u32 softrnic_netdev_gso_mode(const struct net_device *ndev);
u32 softrnic_skb_gso_size(const struct sk_buff *skb);
void softrnic_dst_release(struct dst_entry *dst);
int softrnic_skb_xmit(struct sk_buff *skb);

u32 softrnic_crc32_le(u32 crc, const u8 *p, size_t len);
u32 softrnic_crc32c(u32 crc, const u8 *p, size_t len);
void *softrnic_kmap(struct page *page);
void softrnic_kunmap(void *addr);
size_t softrnic_umem_page_count(struct ib_umem *umem);
size_t softrnic_umem_pages(struct ib_umem *umem, struct page **pages, size_t n,
			   u32 *first_offset);

struct rdma_hw_stats *softrnic_alloc_port_stats(const struct rdma_stat_desc *descs,
						int n);
void softrnic_stats_set(struct rdma_hw_stats *stats, int i, u64 value);

void softrnic_work_init(struct work_struct *work, void (*fn)(struct work_struct *));
void softrnic_work_queue(struct work_struct *work, unsigned int cpu, bool bulk);
void softrnic_rx_work_queue(struct work_struct *work);
void softrnic_rxq_init(struct sk_buff_head *q);
int softrnic_rxq_add(struct sk_buff_head *q, struct sk_buff *skb, unsigned int max, bool looped);
struct sk_buff *softrnic_rxq_take(struct sk_buff_head *q, bool *looped);
bool softrnic_rxq_empty(struct sk_buff_head *q);
void softrnic_rxq_purge(struct sk_buff_head *q);
void softrnic_bh_disable(void);
void softrnic_bh_enable(void);
unsigned int softrnic_cpu_get(void);
void softrnic_cpu_put(void);
unsigned int softrnic_cpu_count(void);
void softrnic_work_flush(struct work_struct *work);
void softrnic_work_disable(struct work_struct *work);
void softrnic_timer_init(struct timer_list *t, void (*fn)(struct timer_list *));
void softrnic_timer_arm(struct timer_list *t, u64 usecs);
void softrnic_timer_stop(struct timer_list *t);
void softrnic_timer_shutdown(struct timer_list *t);

/*
 * TCP sockets for iWARP (glue/tcp_shim.c).
 */
struct softrnic_tcp;
enum softrnic_tcp_event {
	SOFTRNIC_TCP_READABLE = 1,
	SOFTRNIC_TCP_WRITABLE = 2,
	SOFTRNIC_TCP_STATE = 3,
};
/* Implemented in Rust (glue/tcp.rs): a socket callback (softirq or process
 * context, the socket's callback lock held for reading), the socket's
 * deferred work (process context), and bytes read from the socket (the
 * count taken). */
void softrnic_tcp_event(void *ctx, struct softrnic_tcp *t, int event);
void softrnic_tcp_work(void *ctx, struct softrnic_tcp *t);
size_t softrnic_tcp_bytes(void *ctx, const u8 *data, size_t len);
void softrnic_tcp_ctx_free(void *ctx);

void softrnic_sockaddr_from_gid(const u8 *gid, u16 port,
				struct sockaddr_storage *out);
void softrnic_sockaddr_gid(const struct sockaddr_storage *a, u8 *gid);
bool softrnic_addr_local(struct net_device *ndev,
			 const struct sockaddr_storage *a);
int softrnic_tcp_listen(struct net_device *ndev,
			const struct sockaddr_storage *addr, bool v6only,
			int backlog, void *ctx, struct softrnic_tcp **out);
int softrnic_tcp_accept(struct softrnic_tcp *l, void *ctx,
			struct softrnic_tcp **out);
int softrnic_tcp_connect(struct net_device *ndev,
			 const struct sockaddr_storage *laddr,
			 const struct sockaddr_storage *raddr, void *ctx,
			 struct softrnic_tcp **out);
void softrnic_tcp_release(struct softrnic_tcp *t, bool abort);
void softrnic_tcp_release_now(struct softrnic_tcp *t);
void softrnic_tcp_exit(void);
void softrnic_tcp_defer(struct softrnic_tcp *t, unsigned int msecs);
int softrnic_tcp_send(struct softrnic_tcp *t, const void *buf, size_t len,
		      bool more);
unsigned int softrnic_tcp_mss(struct softrnic_tcp *t);
bool softrnic_tcp_closed(struct softrnic_tcp *t);
bool softrnic_tcp_connecting(struct softrnic_tcp *t);
int softrnic_tcp_error(struct softrnic_tcp *t);
/* (At most this many pieces per softrnic_tcp_send_frags.) */
#define SOFTRNIC_SEND_PAGES 16
int softrnic_tcp_send_frags(struct softrnic_tcp *t, struct page **pages,
			    const u32 *offs, const u32 *lens, unsigned int n);
struct page *softrnic_page_get_sendable(struct page *page);
struct page *softrnic_virt_page_get_sendable(unsigned long addr);
void softrnic_page_get(struct page *page);
void softrnic_page_put(struct page *page);
void *softrnic_page_address(struct page *page);
int softrnic_tcp_addrs(struct softrnic_tcp *t, struct sockaddr_storage *local,
		       struct sockaddr_storage *remote);
int softrnic_tcp_read(struct softrnic_tcp *t, bool locked);

#endif
