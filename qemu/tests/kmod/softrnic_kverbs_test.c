// SPDX-License-Identifier: GPL-2.0
/*
 * A kernel verbs consumer for the guest tests: on load it runs the kernel
 * side of softrnic's verbs objects on the RoCE device named by `dev`, the
 * way a kernel ULP (nvme-rdma, iser, rds) uses them: PD with its local DMA
 * lkey, CQ with a completion handler, RC QP walked to RTS, fast-registration
 * MR (alloc_mr + map_mr_sg + REG_MR work request), data through the RoCE
 * engine (SEND/RECV, RDMA WRITE and READ through the fast-registered rkey),
 * READ with invalidate, LOCAL_INV, peek/poll, REPORT_MISSED_EVENTS, flush on ERR.  Results go to the kernel log as
 * "softrnic_kverbs_test: PASS name" / "FAIL name: why".
 *
 * Test code, not part of softrnic: built with it by `scripts/build module`.
 */
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev = "sr0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "softrnic RoCE device to test");

static atomic_t comp_events = ATOMIC_INIT(0);

static void kt_comp(struct ib_cq *cq, void *ctx)
{
	atomic_inc(&comp_events);
}

#define KT_CHECK(cond, name, fmt, ...)                                       \
	do {                                                                  \
		if (cond)                                                     \
			pr_info("softrnic_kverbs_test: PASS %s\n", name);     \
		else                                                          \
			pr_info("softrnic_kverbs_test: FAIL %s: " fmt "\n",   \
				name, ##__VA_ARGS__);                         \
	} while (0)

/* Poll one completion (up to a few seconds: the engine works in the background). */
static int kt_poll(struct ib_cq *cq, struct ib_wc *wc)
{
	int i;

	for (i = 0; i < 2000; i++) {
		int n = ib_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep_range(1000, 2000);
	}
	return 0;
}

static int kt_to_rts(struct ib_device *ibdev, struct ib_qp *qp)
{
	struct ib_qp_attr a = {};
	union ib_gid gid;
	int idx, ret;

	/* An IPv4-mapped RoCEv2 GID of the port: the QP talks to itself. */
	for (idx = 0; idx < 16; idx++)
		if (!rdma_query_gid(ibdev, 1, idx, &gid) &&
		    ipv6_addr_v4mapped((struct in6_addr *)gid.raw))
			break;
	if (idx == 16)
		return -ENOENT;

	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = rdma_ah_find_type(ibdev, 1);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &gid, 0, idx, 64, 0);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

/* Post one send WR and poll its completion (and, for a SEND, the receive's). */
static int kt_send(struct ib_qp *qp, struct ib_cq *cq, struct ib_send_wr *wr,
		   struct ib_wc *wc, int n)
{
	const struct ib_send_wr *bad;
	int i, ret = ib_post_send(qp, wr, &bad);

	for (i = 0; !ret && i < n; i++)
		if (kt_poll(cq, &wc[i]) != 1)
			ret = -ETIMEDOUT;
	return ret;
}

/*
 * Data through the engine on the self-connected QP: a SEND into a posted
 * receive, an RDMA WRITE into the fast-registered MR (through its rkey,
 * crossing pages) and an RDMA READ back; every byte is compared.
 */
static void kt_data(struct ib_qp *qp, struct ib_cq *cq, struct ib_pd *pd,
		    struct ib_mr *mr, u8 *mr_buf)
{
	u8 *src = kmalloc(2 * PAGE_SIZE, GFP_KERNEL);
	const struct ib_recv_wr *rbad;
	struct ib_rdma_wr rdma = {};
	struct ib_send_wr send = {};
	struct ib_recv_wr rwr = {};
	struct ib_sge sge, rsge;
	struct ib_wc wc[2];
	u64 addr;
	int i, ret;

	if (!src)
		return;
	for (i = 0; i < PAGE_SIZE; i++)
		src[i] = i * 7 + 3;
	memset(src + PAGE_SIZE, 0, PAGE_SIZE);
	addr = ib_dma_map_single(qp->device, src, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL);

	rsge = (struct ib_sge){ addr + PAGE_SIZE, 2048, pd->local_dma_lkey };
	rwr.wr_id = 0xbeef;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	sge = (struct ib_sge){ addr, 1500, pd->local_dma_lkey };
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;
	send.sg_list = &sge;
	send.num_sge = 1;
	ret = ib_post_recv(qp, &rwr, &rbad) ?: kt_send(qp, cq, &send, wc, 2);
	KT_CHECK(!ret && wc[0].status == IB_WC_SUCCESS && wc[1].status == IB_WC_SUCCESS &&
		 (wc[0].opcode == IB_WC_RECV ? wc[0].byte_len : wc[1].byte_len) == 1500 &&
		 !memcmp(src, src + PAGE_SIZE, 1500), "send_recv_data",
		 "ret %d status %d/%d", ret, wc[0].status, wc[1].status);

	sge.length = 3000;
	rdma.wr.opcode = IB_WR_RDMA_WRITE;
	rdma.wr.send_flags = IB_SEND_SIGNALED;
	rdma.wr.sg_list = &sge;
	rdma.wr.num_sge = 1;
	rdma.remote_addr = mr->iova + 100;
	rdma.rkey = mr->rkey;
	ret = kt_send(qp, cq, &rdma.wr, wc, 1);
	KT_CHECK(!ret && wc[0].status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_RDMA_WRITE &&
		 !memcmp(mr_buf + 100, src, 3000), "rdma_write_via_fast_reg_rkey",
		 "ret %d status %d", ret, wc[0].status);

	sge = (struct ib_sge){ addr + PAGE_SIZE, 3000, pd->local_dma_lkey };
	memset(src + PAGE_SIZE, 0, PAGE_SIZE);
	rdma.wr.opcode = IB_WR_RDMA_READ;
	ret = kt_send(qp, cq, &rdma.wr, wc, 1);
	KT_CHECK(!ret && wc[0].status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_RDMA_READ &&
		 !memcmp(src + PAGE_SIZE, mr_buf + 100, 3000), "rdma_read_via_fast_reg_rkey",
		 "ret %d status %d", ret, wc[0].status);

	ib_dma_unmap_single(qp->device, addr, 2 * PAGE_SIZE, DMA_BIDIRECTIONAL);
	kfree(src);
}

/*
 * RDMA READ with invalidate (rdma_rw's READ on iWARP devices, where it saves
 * the LOCAL_INV): the data lands in the fast-registered MR, which the READ
 * then invalidates, so that registering it again (which a valid MR refuses)
 * succeeds.
 */
static void kt_read_inv(struct ib_qp *qp, struct ib_cq *cq, struct ib_mr *mr, u8 *mr_buf)
{
	struct ib_sge sge = { mr->iova + 2 * PAGE_SIZE, 3000, mr->lkey };
	struct ib_rdma_wr rd = {};
	struct ib_reg_wr reg = {};
	struct ib_wc wc;
	int ret;

	memset(mr_buf + 2 * PAGE_SIZE, 0, 3000);
	rd.wr.opcode = IB_WR_RDMA_READ_WITH_INV;
	rd.wr.send_flags = IB_SEND_SIGNALED;
	rd.wr.sg_list = &sge;
	rd.wr.num_sge = 1;
	/* The sink's key is the one invalidated: rdma_rw fills ex with the
	 * key from before its last bump of the MR's key, as here. */
	rd.wr.ex.invalidate_rkey = (mr->lkey & ~0xffu) | ((mr->lkey - 1) & 0xff);
	rd.remote_addr = mr->iova + 100;
	rd.rkey = mr->rkey;
	ret = kt_send(qp, cq, &rd.wr, &wc, 1);
	KT_CHECK(!ret && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RDMA_READ &&
		 !memcmp(mr_buf + 2 * PAGE_SIZE, mr_buf + 100, 3000), "rdma_read_with_inv",
		 "ret %d status %d opcode %d", ret, wc.status, wc.opcode);

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = kt_send(qp, cq, &reg.wr, &wc, 1);
	KT_CHECK(!ret && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_REG_MR,
		 "read_with_inv_invalidated_the_mr", "ret %d status %d", ret, wc.status);
}

static void kt_run(struct ib_device *ibdev)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 32 };
	struct ib_qp_init_attr qp_attr = {};
	struct ib_qp_attr err = { .qp_state = IB_QPS_ERR };
	const struct ib_send_wr *bad;
	const struct ib_recv_wr *rbad;
	struct ib_reg_wr reg = {};
	struct ib_send_wr inv = {};
	struct ib_recv_wr rwr = {};
	struct scatterlist sg;
	struct ib_sge sge;
	struct ib_wc wc;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_mr *mr;
	void *buf;
	u32 old_key;
	int n, ret;

	pd = ib_alloc_pd(ibdev, 0);
	KT_CHECK(!IS_ERR(pd) && pd->local_dma_lkey, "pd_with_local_dma_lkey", "%d",
		 PTR_ERR_OR_ZERO(pd));
	if (IS_ERR(pd))
		return;
	cq = ib_create_cq(ibdev, kt_comp, NULL, NULL, &cq_attr);
	KT_CHECK(!IS_ERR(cq) && cq->cqe >= 32, "cq_create", "%d", PTR_ERR_OR_ZERO(cq));
	if (IS_ERR(cq))
		goto out_pd;
	qp_attr.send_cq = cq;
	qp_attr.recv_cq = cq;
	qp_attr.qp_type = IB_QPT_RC;
	qp_attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	qp_attr.cap.max_send_wr = 8;
	qp_attr.cap.max_recv_wr = 8;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	qp = ib_create_qp(pd, &qp_attr);
	KT_CHECK(!IS_ERR(qp) && qp_attr.cap.max_send_wr >= 8, "qp_create", "%d",
		 PTR_ERR_OR_ZERO(qp));
	if (IS_ERR(qp))
		goto out_cq;
	ret = kt_to_rts(ibdev, qp);
	KT_CHECK(!ret, "qp_to_rts", "%d", ret);
	if (ret)
		goto out_qp;

	/* Fast registration of a 4-page kernel buffer. */
	buf = kzalloc(4 * PAGE_SIZE, GFP_KERNEL);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 4);
	KT_CHECK(buf && !IS_ERR(mr), "alloc_mr", "%d", PTR_ERR_OR_ZERO(mr));
	if (!buf || IS_ERR(mr))
		goto out_buf;
	sg_init_one(&sg, buf, 4 * PAGE_SIZE);
	n = ib_dma_map_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL);
	ret = n == 1 ? ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE) : -EIO;
	KT_CHECK(ret == 1 && mr->length == 4 * PAGE_SIZE, "map_mr_sg", "ret %d length %llu",
		 ret, mr->length);
	old_key = mr->rkey;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey) & 0xff);
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.wr.wr_id = 0x5eed;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	ret = ib_post_send(qp, &reg.wr, &bad);
	n = ret ? 0 : kt_poll(cq, &wc);
	KT_CHECK(n == 1 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_REG_MR &&
		 wc.wr_id == 0x5eed && wc.qp == qp && mr->rkey != old_key,
		 "reg_mr_work_request", "post %d polled %d status %d opcode %d", ret, n,
		 wc.status, wc.opcode);

	kt_data(qp, cq, pd, mr, buf);
	kt_read_inv(qp, cq, mr, buf);

	/* Invalidate the registration... */
	inv.opcode = IB_WR_LOCAL_INV;
	inv.send_flags = IB_SEND_SIGNALED;
	inv.ex.invalidate_rkey = mr->rkey;
	inv.wr_id = 0x1a1;
	ret = ib_post_send(qp, &inv, &bad);
	n = ret ? 0 : kt_poll(cq, &wc);
	KT_CHECK(n == 1 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_LOCAL_INV,
		 "local_inv_work_request", "post %d polled %d status %d", ret, n, wc.status);

	/* ...and invalidating a stale key fails and moves the QP to ERR. */
	inv.ex.invalidate_rkey = old_key;
	ret = ib_post_send(qp, &inv, &bad);
	n = ret ? 0 : kt_poll(cq, &wc);
	KT_CHECK(n == 1 && wc.status != IB_WC_SUCCESS, "local_inv_stale_key_fails",
		 "post %d polled %d status %d", ret, n, wc.status);

	/* Peek, REPORT_MISSED_EVENTS and the completion handler on a flush. */
	ret = kt_to_rts(ibdev, qp);
	if (ret) {
		ib_modify_qp(qp, &(struct ib_qp_attr){ .qp_state = IB_QPS_RESET },
			     IB_QP_STATE);
		ret = kt_to_rts(ibdev, qp);
	}
	sge.addr = sg_dma_address(&sg);
	sge.length = 64;
	sge.lkey = pd->local_dma_lkey;
	rwr.wr_id = 0xface;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	ret = ret ?: ib_post_recv(qp, &rwr, &rbad);
	KT_CHECK(!ret && ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS) == 0,
		 "arm_with_nothing_missed", "ret %d", ret);
	ret = ib_modify_qp(qp, &err, IB_QP_STATE);
	KT_CHECK(!ret && atomic_read(&comp_events) == 1 &&
		 ibdev->ops.peek_cq(cq, 4) == 1,
		 "flush_raises_completion_event_and_peek", "ret %d events %d", ret,
		 atomic_read(&comp_events));
	KT_CHECK(ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS) == 1,
		 "report_missed_events", "no missed event reported");
	n = ib_poll_cq(cq, 1, &wc);
	KT_CHECK(n == 1 && wc.status == IB_WC_WR_FLUSH_ERR && wc.wr_id == 0xface &&
		 wc.qp == qp && wc.opcode == IB_WC_RECV, "poll_flushed_receive",
		 "polled %d status %d", n, wc.status);

	ib_dma_unmap_sg(ibdev, &sg, 1, DMA_BIDIRECTIONAL);
out_buf:
	if (!IS_ERR_OR_NULL(mr))
		KT_CHECK(!ib_dereg_mr(mr), "dereg_mr", "failed");
	kfree(buf);
out_qp:
	KT_CHECK(!ib_destroy_qp(qp), "destroy_qp", "failed");
out_cq:
	ib_destroy_cq(cq);
out_pd:
	ib_dealloc_pd(pd);
	pr_info("softrnic_kverbs_test: done\n");
}

static int kt_add(struct ib_device *ibdev)
{
	if (!strcmp(dev_name(&ibdev->dev), dev))
		kt_run(ibdev);
	return 0;
}

static void kt_remove(struct ib_device *ibdev, void *data)
{
}

static struct ib_client kt_client = {
	.name = "softrnic_kverbs_test",
	.add = kt_add,
	.remove = kt_remove,
};

static int __init kt_init(void)
{
	return ib_register_client(&kt_client);
}

static void __exit kt_exit(void)
{
	ib_unregister_client(&kt_client);
}

module_init(kt_init);
module_exit(kt_exit);
MODULE_DESCRIPTION("softrnic guest test: kernel verbs consumer");
MODULE_LICENSE("GPL");
