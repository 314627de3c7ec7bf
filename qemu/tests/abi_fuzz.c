// SPDX-License-Identifier: GPL-2.0
/*
 * User-ABI fuzzer (fuzz.sh): random sequences of verbs with random arguments
 * through libibverbs, random bytes scribbled over the queues the provider
 * mmaps from the kernel (then the doorbell rung), and random commands
 * straight through the uverbs write() and ioctl() interfaces, from several
 * processes at once.  A worker may die of what it did to its own memory (the
 * provider trusts its queues, the raw commands may hand the kernel any
 * pointer): it is replaced by a new one with the next seed.  The kernel must
 * neither crash, warn, hang nor leak; fuzz.sh checks that afterwards.
 *
 * usage: abi_fuzz DEVICE SECONDS WORKERS SEED
 * Each worker prints how many verbs it made; then one summary line:
 * "abi_fuzz: W workers, X exited, Y killed ( signals )".  Exits non-zero only
 * when it could not start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl.h>

#define POOL 16
#define BUF_SIZE (1 << 20)

static uint64_t rs;
static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static int chance(int percent) { return (int)below(100) < percent; }

static struct ibv_context *ctx;
static char *buf;
static struct ibv_pd *pds[POOL];
static struct ibv_mr *mrs[POOL];
static struct ibv_cq *cqs[POOL];
static struct ibv_qp *qps[POOL];
static struct ibv_srq *srqs[POOL];
static struct ibv_ah *ahs[POOL];
static struct ibv_mw *mws[POOL];
static struct ibv_comp_channel *channel;
static unsigned long ops;
/* How many of each object the kernel let this worker create, how many
 * raw commands it accepted and how many scribbles hit a mapped queue. */
enum { M_PD, M_MR, M_CQ, M_QP, M_SRQ, M_AH, M_MW, M_WRITE, M_IOCTL, M_SCRIBBLE, M_COUNT };
static unsigned long made[M_COUNT];
static const char *const made_name[M_COUNT] = { "pd", "mr", "cq", "qp", "srq", "ah", "mw",
						"write_ok", "ioctl_ok", "scribbles" };
/* What each worker is doing, shared with the parent, which tallies the
 * action a worker died in (a worker mostly dies of its own scribbling):
 * 0..ACTIONS-1, or starting, or tearing down after its time was up. */
#define ACTIONS 24
#define STARTING ACTIONS
#define TEARING_DOWN (ACTIONS + 1)
static volatile int *doing;
static int slot;

#define PICK(pool) ((pool)[below(POOL)])
#define SLOT(pool) (&(pool)[below(POOL)])

/* An integer that is often at an edge. */
static uint64_t edgy(uint64_t typical)
{
	switch (below(8)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return typical;
	case 3: return typical + 1;
	case 4: return (uint32_t)-1;
	case 5: return (uint64_t)1 << below(64);
	case 6: return (uint32_t)1 << 31;
	default: return rnd();
	}
}

/* An address: mostly in the worker's buffer, sometimes anywhere. */
static uint64_t addr(void)
{
	switch (below(10)) {
	case 0: return 0;
	case 1: return rnd();
	case 2: return 0xffff888000000000ull + below(1 << 30); /* kernel */
	case 3: return (uintptr_t)buf + BUF_SIZE - below(64);  /* at the end */
	default: return (uintptr_t)buf + below(BUF_SIZE);
	}
}

static uint32_t key(void)
{
	struct ibv_mr *mr = PICK(mrs);
	struct ibv_mw *mw = PICK(mws);

	if (mr && chance(50))
		return chance(50) ? mr->lkey : mr->rkey;
	if (mw && chance(50))
		return mw->rkey;
	return (uint32_t)edgy(0x100);
}

static void fill_sges(struct ibv_sge *sg, int n)
{
	for (int i = 0; i < n; i++) {
		sg[i].addr = addr();
		sg[i].length = (uint32_t)edgy(64);
		if (chance(60))
			sg[i].length = (uint32_t)below(8192);
		sg[i].lkey = key();
	}
}

static void post_send(struct ibv_qp *qp)
{
	struct ibv_send_wr wr[4], *bad;
	struct ibv_sge sg[4][40];
	int n = 1 + (int)below(4);

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = rnd();
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].opcode = (enum ibv_wr_opcode)(chance(90) ? below(12) : rnd());
		wr[i].num_sge = chance(80) ? (int)below(4) : (int)edgy(40);
		if (wr[i].num_sge > 40 || wr[i].num_sge < 0)
			wr[i].num_sge = chance(50) ? 40 : 0;
		fill_sges(sg[i], 40);
		wr[i].sg_list = sg[i];
		wr[i].send_flags = (unsigned int)(chance(70) ? below(32) : rnd());
		/* Inline data is copied by the provider in this process: keep it
		 * readable, let only the kernel see hostile addresses. */
		if (wr[i].send_flags & IBV_SEND_INLINE)
			for (int k = 0; k < 40; k++) {
				sg[i][k].addr = (uintptr_t)buf + below(BUF_SIZE / 2);
				sg[i][k].length = (uint32_t)(chance(90) ? below(512) : edgy(64) % (BUF_SIZE / 2));
			}
		wr[i].imm_data = (uint32_t)rnd();
		wr[i].wr.rdma.remote_addr = addr();
		wr[i].wr.rdma.rkey = key();
		if (wr[i].opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr[i].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr[i].wr.atomic.remote_addr = addr();
			wr[i].wr.atomic.rkey = key();
		}
		if (qp->qp_type == IBV_QPT_UD) {
			struct ibv_ah *ah = PICK(ahs);

			if (!ah) /* libibverbs providers may dereference it */
				return;
			wr[i].wr.ud.ah = ah;
			wr[i].wr.ud.remote_qpn = (uint32_t)edgy(1);
			wr[i].wr.ud.remote_qkey = (uint32_t)rnd();
		}
		if (wr[i].opcode == IBV_WR_BIND_MW) {
			struct ibv_mw *mw = PICK(mws);
			struct ibv_mr *mr = PICK(mrs);

			if (!mw || !mr)
				return;
			wr[i].bind_mw.mw = mw;
			wr[i].bind_mw.rkey = (uint32_t)rnd();
			wr[i].bind_mw.bind_info.mr = mr;
			wr[i].bind_mw.bind_info.addr = addr();
			wr[i].bind_mw.bind_info.length = edgy(4096);
			wr[i].bind_mw.bind_info.mw_access_flags = (unsigned int)below(64);
		}
	}
	ibv_post_send(qp, wr, &bad);
}

static void post_recv(struct ibv_qp *qp, struct ibv_srq *srq)
{
	struct ibv_recv_wr wr[4], *bad;
	struct ibv_sge sg[4][40];
	int n = 1 + (int)below(4);

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = rnd();
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].num_sge = chance(80) ? (int)below(4) : (int)below(41);
		fill_sges(sg[i], 40);
		wr[i].sg_list = sg[i];
	}
	if (srq)
		ibv_post_srq_recv(srq, wr, &bad);
	else
		ibv_post_recv(qp, wr, &bad);
}

static void modify_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)(chance(90) ? below(7) : rnd());
	a.cur_qp_state = (enum ibv_qp_state)below(7);
	a.path_mtu = (enum ibv_mtu)(chance(90) ? 1 + below(5) : rnd());
	a.qkey = (uint32_t)rnd();
	a.rq_psn = (uint32_t)rnd();
	a.sq_psn = (uint32_t)rnd();
	a.dest_qp_num = (uint32_t)edgy(1);
	a.qp_access_flags = (unsigned int)(chance(80) ? below(64) : rnd());
	a.pkey_index = (uint16_t)edgy(0);
	a.port_num = (uint8_t)(chance(90) ? 1 : rnd());
	a.max_rd_atomic = (uint8_t)edgy(4);
	a.max_dest_rd_atomic = (uint8_t)edgy(4);
	a.min_rnr_timer = (uint8_t)below(40);
	a.timeout = (uint8_t)below(40);
	a.retry_cnt = (uint8_t)below(10);
	a.rnr_retry = (uint8_t)below(10);
	a.sq_draining = (uint8_t)rnd();
	a.en_sqd_async_notify = (uint8_t)rnd();
	a.cap.max_send_wr = (uint32_t)edgy(16);
	a.cap.max_inline_data = (uint32_t)edgy(64);
	a.ah_attr.is_global = chance(80);
	a.ah_attr.port_num = (uint8_t)(chance(90) ? 1 : rnd());
	a.ah_attr.grh.sgid_index = (uint8_t)(chance(80) ? below(4) : rnd());
	a.ah_attr.grh.hop_limit = (uint8_t)rnd();
	a.ah_attr.grh.traffic_class = (uint8_t)rnd();
	a.ah_attr.grh.flow_label = (uint32_t)rnd();
	if (chance(50) && !ibv_query_gid(ctx, 1, (int)below(4), &gid))
		a.ah_attr.grh.dgid = gid;
	else
		for (int i = 0; i < 16; i++)
			a.ah_attr.grh.dgid.raw[i] = (uint8_t)rnd();
	a.ah_attr.dlid = (uint16_t)rnd();
	a.ah_attr.sl = (uint8_t)rnd();
	a.ah_attr.static_rate = (uint8_t)rnd();
	a.alt_ah_attr = a.ah_attr;
	ibv_modify_qp(qp, &a, (int)(chance(80) ? below(1 << 21) : rnd()));
}

/* A QP taken through INIT, RTR and RTS with valid attributes, to a QP of
 * the pool over an IPv4 GID of the device, so that what is posted (and
 * scribbled) afterwards reaches a running engine. */
static void connect_qp(struct ibv_qp *qp)
{
	struct ibv_qp *peer = PICK(qps);
	struct ibv_qp_attr a;
	union ibv_gid gid;
	int idx = -1;

	for (int k = 0; k < 8 && idx < 0; k++)
		if (!ibv_query_gid(ctx, 1, k, &gid) && gid.raw[10] == 0xff && gid.raw[11] == 0xff)
			idx = k;
	if (idx < 0 || !peer)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	ibv_modify_qp(qp, &a, IBV_QP_STATE);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (qp->qp_type == IBV_QPT_UD)
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	else
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)idx;
	a.ah_attr.grh.hop_limit = 64;
	if (qp->qp_type == IBV_QPT_UD)
		ibv_modify_qp(qp, &a, IBV_QP_STATE);
	else if (qp->qp_type == IBV_QPT_UC)
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
	else
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 8;
	a.retry_cnt = 2;
	a.rnr_retry = (uint8_t)below(8);
	a.max_rd_atomic = 4;
	if (qp->qp_type == IBV_QPT_RC)
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	else
		ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static void create_qp(void)
{
	struct ibv_qp **slot = SLOT(qps);
	struct ibv_qp_init_attr ia;
	struct ibv_cq *scq = PICK(cqs), *rcq = PICK(cqs);
	struct ibv_pd *pd = PICK(pds);
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET,
						  IBV_QPT_XRC_SEND, IBV_QPT_DRIVER };

	if (*slot || !scq || !rcq || !pd)
		return;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.srq = chance(30) ? PICK(srqs) : NULL;
	ia.qp_type = chance(90) ? types[below(3)] : (chance(50) ? types[below(6)] : (enum ibv_qp_type)rnd());
	ia.cap.max_send_wr = (uint32_t)(chance(80) ? below(300) : edgy(64));
	ia.cap.max_recv_wr = (uint32_t)(chance(80) ? below(300) : edgy(64));
	ia.cap.max_send_sge = (uint32_t)(chance(80) ? below(33) : edgy(4));
	ia.cap.max_recv_sge = (uint32_t)(chance(80) ? below(33) : edgy(4));
	ia.cap.max_inline_data = (uint32_t)(chance(80) ? below(1024) : edgy(64));
	ia.sq_sig_all = chance(50);
	*slot = ibv_create_qp(pd, &ia);
	made[M_QP] += *slot != NULL;
}

static void destroy_any(void)
{
	int i = (int)below(POOL);

	switch (below(7)) {
	case 0: if (qps[i] && !ibv_destroy_qp(qps[i])) qps[i] = NULL; break;
	case 1: if (cqs[i] && !ibv_destroy_cq(cqs[i])) cqs[i] = NULL; break;
	case 2: if (srqs[i] && !ibv_destroy_srq(srqs[i])) srqs[i] = NULL; break;
	case 3: if (mrs[i] && !ibv_dereg_mr(mrs[i])) mrs[i] = NULL; break;
	case 4: if (mws[i] && !ibv_dealloc_mw(mws[i])) mws[i] = NULL; break;
	case 5: if (ahs[i] && !ibv_destroy_ah(ahs[i])) ahs[i] = NULL; break;
	case 6: if (pds[i] && !ibv_dealloc_pd(pds[i])) pds[i] = NULL; break;
	}
}

/* Random bytes over the queues the provider mapped from the kernel. */
static void scribble(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int hit = 0;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (!strstr(line, "uverbs") || sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 ||
		    perms[1] != 'w' || !chance(40))
			continue;
		for (int n = (int)below(16); n >= 0; n--) {
			unsigned long at = lo + (below(hi - lo) & ~3ul);

			*(volatile uint32_t *)at = chance(50) ? (uint32_t)rnd() : (uint32_t)edgy(1);
		}
		hit = 1;
	}
	fclose(f);
	if (!hit)
		return;
	made[M_SCRIBBLE]++;
	/* Ring the doorbells and look at the CQs the kernel may now write. */
	for (int i = 0; i < POOL; i++) {
		if (qps[i] && chance(50))
			post_send(qps[i]);
		if (qps[i] && chance(30))
			post_recv(qps[i], NULL);
	}
}

/* A random command through the legacy write() interface. */
static void raw_write(void)
{
	uint32_t cmd[128];
	struct ib_uverbs_cmd_hdr *hdr = (void *)cmd;
	static uint64_t resp[64];
	size_t len = sizeof(*hdr) + 8 * below(32);

	for (size_t i = 0; i < sizeof(cmd) / 4; i++)
		cmd[i] = chance(50) ? (uint32_t)below(8) : (uint32_t)rnd();
	hdr->command = (uint32_t)(chance(90) ? below(IB_USER_VERBS_CMD_OPEN_QP + 1) : rnd());
	if (chance(20))
		hdr->command |= IB_USER_VERBS_CMD_FLAG_EXTENDED;
	hdr->in_words = (uint16_t)(chance(80) ? len / 4 : rnd());
	hdr->out_words = (uint16_t)(chance(80) ? below(64) : rnd());
	/* Most commands start with the response pointer. */
	if (chance(80))
		memcpy(&cmd[2], &(uint64_t){ chance(90) ? (uintptr_t)resp : addr() }, 8);
	if (write(ctx->cmd_fd, cmd, chance(90) ? len : below(sizeof(cmd))) >= 0)
		made[M_WRITE]++;
}

/* A random method through the ioctl() interface. */
static void raw_ioctl(void)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[16];
	} req;
	static uint64_t data[64][8];
	unsigned int n = (unsigned int)below(17);

	memset(&req, 0, sizeof(req));
	req.hdr.length = (uint16_t)(chance(90) ? sizeof(req.hdr) + n * sizeof(req.attrs[0]) : rnd());
	req.hdr.object_id = (uint16_t)(chance(80) ? below(32) : (chance(50) ? 0x1000 | below(16) : rnd()));
	req.hdr.method_id = (uint16_t)(chance(80) ? below(16) : rnd());
	req.hdr.num_attrs = (uint16_t)(chance(90) ? n : rnd());
	req.hdr.driver_id = (uint32_t)(chance(90) ? 0 : rnd());
	for (unsigned int i = 0; i < n; i++) {
		struct ib_uverbs_attr *a = &req.attrs[i];

		a->attr_id = (uint16_t)(chance(70) ? below(16) : (chance(50) ? 0x1000 | below(8) : rnd()));
		a->len = (uint16_t)(chance(70) ? 8 * below(9) : rnd());
		a->flags = (uint16_t)(chance(80) ? below(4) : rnd());
		a->attr_data.reserved = (uint16_t)(chance(90) ? 0 : rnd());
		a->data = chance(60) ? (uintptr_t)data[below(64)] : (chance(50) ? below(64) : addr());
	}
	for (int i = 0; i < 64 * 8; i++)
		data[i / 8][i % 8] = chance(50) ? below(16) : rnd();
	if (ioctl(ctx->cmd_fd, RDMA_VERBS_IOCTL, &req) == 0)
		made[M_IOCTL]++;
}

static void one_verb(void)
{
	int i = (int)below(POOL);
	struct ibv_wc wc[64];

	int action = (int)below(ACTIONS);
	struct ibv_pd *pd = PICK(pds);

	ops++;
	doing[slot] = action;
	switch (action) {
	case 0:
		if (!pds[i])
			made[M_PD] += (pds[i] = ibv_alloc_pd(ctx)) != NULL;
		break;
	case 1:
		if (!mrs[i] && pd)
			made[M_MR] += (mrs[i] = ibv_reg_mr(pd, (void *)(uintptr_t)addr(), chance(70) ? below(BUF_SIZE) : edgy(4096),
					    (int)(chance(80) ? below(1 << 5) | IBV_ACCESS_LOCAL_WRITE : rnd()))) != NULL;
		break;
	case 2:
		if (mrs[i] && pd)
			ibv_rereg_mr(mrs[i], (int)below(8), pd, (void *)(uintptr_t)addr(), below(BUF_SIZE),
				     (int)below(64));
		break;
	case 3:
		if (!cqs[i])
			made[M_CQ] += (cqs[i] = ibv_create_cq(ctx, (int)(chance(80) ? below(2048) : edgy(256)), NULL,
							      chance(30) ? channel : NULL,
							      (int)(chance(90) ? 0 : edgy(1)))) != NULL;
		break;
	case 4:
		if (cqs[i])
			ibv_resize_cq(cqs[i], (int)(chance(80) ? below(4096) : edgy(256)));
		break;
	case 5:
		if (cqs[i])
			ibv_req_notify_cq(cqs[i], chance(50));
		break;
	case 6: case 7:
		if (cqs[i])
			ibv_poll_cq(cqs[i], (int)below(65), wc);
		break;
	case 8:
		create_qp();
		break;
	case 9:
		if (qps[i])
			modify_qp(qps[i]);
		break;
	case 10:
		if (qps[i])
			connect_qp(qps[i]);
		break;
	case 11: {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		if (qps[i])
			ibv_query_qp(qps[i], &a, (int)rnd(), &ia);
		break;
	}
	case 12: case 13:
		if (qps[i])
			post_send(qps[i]);
		break;
	case 14:
		if (qps[i])
			post_recv(qps[i], NULL);
		else if (srqs[i])
			post_recv(NULL, srqs[i]);
		break;
	case 15:
		if (!srqs[i] && pd) {
			struct ibv_srq_init_attr sa = { .attr = {
				.max_wr = (uint32_t)(chance(80) ? below(600) : edgy(64)),
				.max_sge = (uint32_t)(chance(80) ? below(40) : edgy(4)),
				.srq_limit = (uint32_t)edgy(8) } };
			made[M_SRQ] += (srqs[i] = ibv_create_srq(pd, &sa)) != NULL;
		} else if (srqs[i]) {
			struct ibv_srq_attr sa = { .max_wr = (uint32_t)edgy(64), .srq_limit = (uint32_t)edgy(8) };

			ibv_modify_srq(srqs[i], &sa, (int)below(4));
		}
		break;
	case 16:
		if (!ahs[i] && pd) {
			struct ibv_ah_attr aa;

			memset(&aa, 0, sizeof(aa));
			aa.is_global = chance(80);
			aa.port_num = (uint8_t)(chance(90) ? 1 : rnd());
			aa.grh.sgid_index = (uint8_t)(chance(80) ? below(4) : rnd());
			aa.grh.hop_limit = (uint8_t)rnd();
			if (chance(70))
				ibv_query_gid(ctx, 1, (int)below(4), &aa.grh.dgid);
			else
				for (int k = 0; k < 16; k++)
					aa.grh.dgid.raw[k] = (uint8_t)rnd();
			made[M_AH] += (ahs[i] = ibv_create_ah(pd, &aa)) != NULL;
		}
		break;
	case 17:
		if (!mws[i] && pd)
			made[M_MW] += (mws[i] = ibv_alloc_mw(pd, (enum ibv_mw_type)(chance(90) ? 1 + below(2) : rnd()))) !=
				      NULL;
		break;
	case 18:
		if (qps[i]) {
			union ibv_gid g;

			for (int k = 0; k < 16; k++)
				g.raw[k] = (uint8_t)rnd();
			if (chance(50))
				g.raw[0] = 0xff; /* multicast */
			if (!ibv_attach_mcast(qps[i], &g, (uint16_t)rnd()) && chance(50))
				ibv_detach_mcast(qps[i], &g, (uint16_t)rnd());
		}
		break;
	case 19: {
		struct ibv_port_attr pa;
		union ibv_gid g;
		struct ibv_device_attr_ex da;
		uint16_t pkey;

		ibv_query_port(ctx, (uint8_t)(chance(80) ? 1 : rnd()), &pa);
		ibv_query_gid(ctx, (uint8_t)(chance(80) ? 1 : rnd()), (int)edgy(1), &g);
		ibv_query_pkey(ctx, 1, (int)edgy(0), &pkey);
		ibv_query_device_ex(ctx, NULL, &da);
		break;
	}
	case 20:
		destroy_any();
		break;
	case 21:
		scribble();
		break;
	case 22:
		raw_write();
		break;
	case 23:
		raw_ioctl();
		break;
	}
}

static void worker(int w, const char *dev, uint64_t seed, time_t until)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	slot = w;
	doing[slot] = STARTING;
	rs = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		_exit(3);
	buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		_exit(3);
	channel = ibv_create_comp_channel(ctx);
	/* A worker that hangs in a verb is killed, and reported by the kernel if it hung there. */
	alarm((unsigned int)(until - time(NULL)) + 30);
	while (time(NULL) < until)
		for (int k = 0; k < 64; k++)
			one_verb();
	/* Exit with objects still open half the time: the kernel cleans up after us. */
	doing[slot] = TEARING_DOWN;
	if (chance(50))
		for (int k = 0; k < 8 * POOL * 7; k++)
			destroy_any();
	char line[512];
	int n = snprintf(line, sizeof(line), "worker %d: %lu verbs", getpid(), ops);

	for (int m = 0; m < M_COUNT && n < (int)sizeof(line); m++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ", %s %lu", made_name[m], made[m]);
	/* How far past its time the worker got (the alarm allows 30 s): the last
	 * batch of verbs and the teardown. */
	if (n < (int)sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, ", done %lds late", (long)(time(NULL) - until));
	fprintf(stderr, "%s\n", line);
	_exit(0);
}

int main(int argc, char **argv)
{
	int workers, exited = 0, killed = 0, sigs[65] = { 0 }, died_in[ACTIONS + 2] = { 0 };
	pid_t pids[64];
	uint64_t seed;
	time_t until;

	if (argc != 5) {
		fprintf(stderr, "usage: abi_fuzz DEVICE SECONDS WORKERS SEED\n");
		return 2;
	}
	until = time(NULL) + atoi(argv[2]);
	workers = atoi(argv[3]);
	if (workers < 1 || workers > 64)
		workers = 4;
	seed = strtoull(argv[4], NULL, 0);
	doing = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (doing == MAP_FAILED)
		return 1;
	for (int w = 0; w < workers; w++) {
		pids[w] = fork();
		if (pids[w] == 0)
			worker(w, argv[1], seed, until);
		seed++;
	}
	seed += 1000;
	for (;;) {
		int status;
		pid_t pid = wait(&status);

		int w = 0;

		if (pid < 0)
			break;
		while (w < workers && pids[w] != pid)
			w++;
		if (w == workers)
			continue;
		if (WIFSIGNALED(status)) {
			killed++;
			sigs[WTERMSIG(status) & 63]++;
			int in = doing[w];

			died_in[in >= 0 && in <= TEARING_DOWN ? in : STARTING]++;
		} else if (WEXITSTATUS(status) == 3) {
			fprintf(stderr, "abi_fuzz: cannot open %s\n", argv[1]);
			return 1;
		} else {
			exited++;
		}
		if (time(NULL) < until) {
			pids[w] = fork();
			if (pids[w] == 0)
				worker(w, argv[1], seed, until);
		}
		seed++;
	}
	printf("abi_fuzz: %d workers, %d exited, %d killed (", workers, exited, killed);
	for (int s = 1; s < 65; s++)
		if (sigs[s])
			printf(" %s x%d", strsignal(s), sigs[s]);
	printf(" ) in actions");
	for (int a = 0; a < ACTIONS; a++)
		if (died_in[a])
			printf(" %d x%d", a, died_in[a]);
	if (died_in[STARTING])
		printf(" starting x%d", died_in[STARTING]);
	if (died_in[TEARING_DOWN])
		printf(" tearing-down x%d", died_in[TEARING_DOWN]);
	printf("\n");
	return 0;
}
