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
#include <rdma/rdma_netlink.h>

/* The link types softrnic registers; index = enum softrnic_transport. */
enum softrnic_transport {
	SOFTRNIC_ROCE = 0,
	SOFTRNIC_IWARP = 1,
};

/* Implemented in Rust (glue/callbacks.rs). */
int softrnic_newlink(enum softrnic_transport transport, const char *ibdev_name,
		     struct net_device *ndev);
void softrnic_netdev_event(unsigned long event, struct net_device *ndev);
const char *softrnic_transport_name(struct ib_device *ibdev);

/* Implemented in C (glue/shim.c). */
int softrnic_shim_register(void);
struct module *softrnic_this_module(void);
bool softrnic_netdev_registered(const struct net_device *ndev);
void softrnic_shim_unregister(void);
struct ib_device *softrnic_alloc_ib_device(size_t size);
const struct attribute_group *softrnic_device_group(void);
void softrnic_ib_device_get(struct ib_device *ibdev);
void softrnic_ib_device_put(struct ib_device *ibdev);
void softrnic_dispatch_port_event(struct ib_device *ibdev, u32 port,
				  enum ib_event_type type);
bool softrnic_netdev_is_ethernet(const struct net_device *ndev);
bool softrnic_netdev_link_up(const struct net_device *ndev);
unsigned int softrnic_netdev_mtu(const struct net_device *ndev);
const char *softrnic_netdev_name(const struct net_device *ndev);
void softrnic_netdev_mac(const struct net_device *ndev, u8 mac[6]);
void softrnic_dev_put(struct net_device *ndev);
int softrnic_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
size_t softrnic_udata_outlen(const struct ib_udata *udata);

#endif
