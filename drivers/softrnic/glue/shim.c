// SPDX-License-Identifier: GPL-2.0
/*
 * softrnic C shim: wrappers for static inlines and macros, the statically
 * initialised C objects (rdma link ops, netdev notifier, sysfs attributes) and
 * the module aliases.  No protocol or object logic lives here.
 */
#include "shim.h"
#include <net/arp.h>
#include <net/neighbour.h>

MODULE_ALIAS_RDMA_LINK("softrnic_roce");
MODULE_ALIAS_RDMA_LINK("softrnic_iwarp");

static int softrnic_newlink_roce(const char *ibdev_name, struct net_device *ndev)
{
	return softrnic_newlink(SOFTRNIC_ROCE, ibdev_name, ndev);
}

static int softrnic_newlink_iwarp(const char *ibdev_name, struct net_device *ndev)
{
	return softrnic_newlink(SOFTRNIC_IWARP, ibdev_name, ndev);
}

static struct rdma_link_ops softrnic_link_roce = {
	.type = "softrnic_roce",
	.newlink = softrnic_newlink_roce,
};

static struct rdma_link_ops softrnic_link_iwarp = {
	.type = "softrnic_iwarp",
	.newlink = softrnic_newlink_iwarp,
};

static int softrnic_notifier_call(struct notifier_block *nb, unsigned long event,
				  void *ptr)
{
	softrnic_netdev_event(event, netdev_notifier_info_to_dev(ptr));
	return NOTIFY_OK;
}

static struct notifier_block softrnic_notifier = {
	.notifier_call = softrnic_notifier_call,
};

/* An IPv4 address came or went (RTNL held): iWARP ports' GIDs follow. */
static int softrnic_inetaddr_call(struct notifier_block *nb, unsigned long event,
				  void *ptr)
{
	const struct in_ifaddr *ifa = ptr;

	softrnic_netdev_addr_event(ifa->ifa_dev->dev);
	return NOTIFY_OK;
}

static struct notifier_block softrnic_inetaddr_notifier = {
	.notifier_call = softrnic_inetaddr_call,
};

int softrnic_shim_register(void)
{
	int err = register_netdevice_notifier(&softrnic_notifier);

	if (err)
		return err;
	err = register_inetaddr_notifier(&softrnic_inetaddr_notifier);
	if (err) {
		unregister_netdevice_notifier(&softrnic_notifier);
		return err;
	}
	rdma_link_register(&softrnic_link_roce);
	rdma_link_register(&softrnic_link_iwarp);
	return 0;
}

/* After this returns no new device can be created and no netdev event arrives. */
void softrnic_shim_unregister(void)
{
	rdma_link_unregister(&softrnic_link_iwarp);
	rdma_link_unregister(&softrnic_link_roce);
	unregister_inetaddr_notifier(&softrnic_inetaddr_notifier);
	unregister_netdevice_notifier(&softrnic_notifier);
}

/* Devices always live in init_net; rdma's shared-netns mode shows them everywhere. */
struct ib_device *softrnic_alloc_ib_device(size_t size)
{
	return _ib_alloc_device(size, &init_net);
}

/*
 * sysfs: /sys/class/infiniband/<dev>/softrnic_transport ("roce" or "iwarp").
 * The userspace provider recognises softrnic devices by this attribute.
 */
static ssize_t softrnic_transport_attr_show(struct device *device,
					    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  softrnic_transport_name(rdma_device_to_ibdev(device)));
}

static struct device_attribute softrnic_transport_attr =
	__ATTR(softrnic_transport, 0444, softrnic_transport_attr_show, NULL);

static struct attribute *softrnic_attrs[] = {
	&softrnic_transport_attr.attr,
	NULL,
};

static const struct attribute_group softrnic_attr_group = {
	.attrs = softrnic_attrs,
};

const struct attribute_group *softrnic_device_group(void)
{
	return &softrnic_attr_group;
}

struct module *softrnic_this_module(void)
{
	return THIS_MODULE;
}

/* The nest a driver's restrack details go in: nldev and rdma(8) read them
 * there (RDMA_NLDEV_ATTR_DRIVER), and ignore them anywhere else. */
struct nlattr *softrnic_nl_driver_nest(struct sk_buff *msg)
{
	return nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
}

/* Close the nest (`ok`), or take it and what is in it back out. */
void softrnic_nl_nest_end(struct sk_buff *msg, struct nlattr *nest, bool ok)
{
	if (ok)
		nla_nest_end(msg, nest);
	else
		nla_nest_cancel(msg, nest);
}

/* Milliseconds since boot (jiffies' clock): refusals' rate limits. */
u64 softrnic_now_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

bool softrnic_netdev_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

void softrnic_ib_device_get(struct ib_device *ibdev)
{
	get_device(&ibdev->dev);
}

void softrnic_ib_device_put(struct ib_device *ibdev)
{
	put_device(&ibdev->dev);
}

void softrnic_dispatch_port_event(struct ib_device *ibdev, u32 port,
				  enum ib_event_type type)
{
	struct ib_event ev = {
		.device = ibdev,
		.element.port_num = port,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

/*
 * The netdev bound to port 1, with a reference, or NULL.  Like
 * ib_device_get_netdev(), but under RCU instead of the port's netdev_lock:
 * that lock is a plain spinlock, which ib_core takes with softirqs enabled,
 * so taking it from the receive softirq is a deadlock lockdep reports.  The
 * pointer is RCU-managed (ib_device_set_netdev), and a netdev read under
 * RCU may be held: unregistration waits for its references.
 */
struct net_device *softrnic_port_netdev(struct ib_device *ibdev)
{
	struct net_device *ndev;

	if (!ibdev->port_data)
		return NULL;
	rcu_read_lock();
	ndev = rcu_dereference(ibdev->port_data[1].netdev);
	dev_hold(ndev);
	rcu_read_unlock();
	return ndev;
}

bool softrnic_netdev_is_ethernet(const struct net_device *ndev)
{
	return ndev->type == ARPHRD_ETHER && !(ndev->flags & IFF_LOOPBACK);
}

bool softrnic_netdev_link_up(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

unsigned int softrnic_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

const char *softrnic_netdev_name(const struct net_device *ndev)
{
	return netdev_name(ndev);
}

void softrnic_netdev_mac(const struct net_device *ndev, u8 mac[6])
{
	ether_addr_copy(mac, ndev->dev_addr);
}

/* The netdev's `nth` IPv4 address, counting only primaries if
 * `primaries_only`, into `addr`; false past the last. */
static bool softrnic_ipv4_at(struct net_device *ndev, unsigned int nth,
			     bool primaries_only, u8 addr[4])
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	bool found = false;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(ndev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (primaries_only && (ifa->ifa_flags & IFA_F_SECONDARY))
				continue;
			if (nth--)
				continue;
			memcpy(addr, &ifa->ifa_local, 4);
			found = true;
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

/* The netdev's primary IPv4 address into `addr`; false if it has none. */
bool softrnic_netdev_ipv4(struct net_device *ndev, u8 addr[4])
{
	return softrnic_ipv4_at(ndev, 0, true, addr);
}

/* The netdev's `nth` IPv4 address (in the order the netdev keeps them:
 * each primary before its secondaries) into `addr`; false past the last. */
bool softrnic_netdev_ipv4_nth(struct net_device *ndev, unsigned int nth, u8 addr[4])
{
	return softrnic_ipv4_at(ndev, nth, false, addr);
}

struct softrnic_neigh_search {
	const struct net_device *ndev;
	const u8 *mac;
	u8 *addr;
	bool found;
};

static void softrnic_neigh_match(struct neighbour *n, void *cookie)
{
	struct softrnic_neigh_search *s = cookie;
	u8 ha[ETH_ALEN];

	if (s->found || n->dev != s->ndev || !(READ_ONCE(n->nud_state) & NUD_VALID))
		return;
	neigh_ha_snapshot(ha, n, n->dev);
	if (ether_addr_equal(ha, s->mac)) {
		memcpy(s->addr, n->primary_key, 4);
		s->found = true;
	}
}

/* The IPv4 address the netdev's ARP table has for `mac`; false if none. */
bool softrnic_neigh_ipv4(struct net_device *ndev, const u8 mac[6], u8 addr[4])
{
	struct softrnic_neigh_search s = {
		.ndev = ndev, .mac = mac, .addr = addr, .found = false,
	};

	neigh_for_each(&arp_tbl, softrnic_neigh_match, &s);
	return s.found;
}

void softrnic_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

int softrnic_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	/* ib_copy_to_udata only reads src; its prototype lacks the const. */
	return ib_copy_to_udata(udata, (void *)src, len);
}

size_t softrnic_udata_outlen(const struct ib_udata *udata)
{
	return udata ? udata->outlen : 0;
}
