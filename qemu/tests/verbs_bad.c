// SPDX-License-Identifier: GPL-2.0
/*
 * Bad-input checks that need raw libibverbs (pyverbs closes dependent objects
 * first and hides handles): destroying objects still in use, and destroying
 * an object twice at the uverbs ABI.  Compiled in the guest by verbs.sh.
 *
 * usage: verbs_bad DEVICE [--limits]   — prints "PASS name" / "FAIL name: why";
 * exits 0 once it ran to its end (its verdicts are in those lines).
 * --limits also fills the device's memory-window table to max_mw.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

static void result(const char *name, int ok, const char *why, int err)
{
	if (ok)
		printf("PASS %s\n", name);
	else
		printf("FAIL %s: %s (errno %d)\n", name, why, err);
}

/* DESTROY_CQ through the legacy write() ABI, by handle. */
static int raw_destroy_cq(struct ibv_context *ctx, uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_destroy_cq cmd;
	} req;
	struct ib_uverbs_destroy_cq_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_DESTROY_CQ;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.cq_handle = handle;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != sizeof(req))
		return errno;
	return 0;
}

/*
 * Allocate memory windows until the device refuses: exactly max_mw succeed,
 * the next one fails with ENOMEM, and all of them free again.
 */
static void mw_limit(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_device_attr attr;
	struct ibv_mw **mws;
	int n = 0, err = 0, i;

	if (ibv_query_device(ctx, &attr) || attr.max_mw <= 0) {
		result("mw_limit_enforced", 0, "query_device", errno);
		return;
	}
	mws = calloc(attr.max_mw + 1, sizeof(*mws));
	while (mws && n <= attr.max_mw) {
		mws[n] = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		if (!mws[n]) {
			err = errno;
			break;
		}
		n++;
	}
	printf("    allocated %d of max_mw %d, then errno %d\n", n, attr.max_mw, err);
	result("mw_limit_enforced", n == attr.max_mw && err == ENOMEM,
	       "max_mw windows then ENOMEM", err);
	for (i = 0; i < n; i++)
		ibv_dealloc_mw(mws[i]);
	free(mws);
}

int main(int argc, char **argv)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *cq2;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	static char buf[4096];
	int i, ret;

	for (i = 0; list && list[i]; i++)
		if (argc > 1 && !strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		printf("DIED verbs_bad_open: no device %s\n", argc > 1 ? argv[1] : "?");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	srq = ibv_create_srq(pd, &sattr);
	struct ibv_qp_init_attr qattr = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
	};
	qp = pd && cq && srq ? ibv_create_qp(pd, &qattr) : NULL;
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), 0) : NULL;
	if (!qp || !mr) {
		printf("DIED verbs_bad_setup: errno %d\n", errno);
		return 1;
	}

	ret = ibv_destroy_cq(cq);
	result("destroy_cq_in_use_is_ebusy", ret == EBUSY, "CQ of a live QP", ret);
	ret = ibv_destroy_srq(srq);
	result("destroy_srq_in_use_is_ebusy", ret == EBUSY, "SRQ of a live QP", ret);
	ret = ibv_dealloc_pd(pd);
	result("dealloc_pd_in_use_is_ebusy", ret == EBUSY, "PD of a live QP and MR", ret);

	ret = ibv_destroy_qp(qp) || ibv_destroy_srq(srq) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq);
	result("destroy_after_release_succeeds", ret == 0, "teardown in order", ret);

	/* The same CQ handle destroyed twice: the second one finds nothing. */
	cq2 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	ret = cq2 ? raw_destroy_cq(ctx, cq2->handle) : -1;
	result("raw_destroy_cq", ret == 0, "first DESTROY_CQ", ret);
	ret = raw_destroy_cq(ctx, cq2->handle);
	/* ib_uverbs finds no object under the handle: ENOENT. */
	result("double_destroy_is_enoent", ret == ENOENT, "second DESTROY_CQ of one handle", ret);

	if (argc > 2 && !strcmp(argv[2], "--limits"))
		mw_limit(ctx, pd);

	ret = ibv_dealloc_pd(pd);
	result("dealloc_pd_after_release", ret == 0, "dealloc", ret);

	/*
	 * Objects of another context: a PD handle that exists only in the
	 * first context, used through a second one, finds nothing there.
	 */
	struct ibv_context *ctx2 = ibv_open_device(ctx->device);
	struct ibv_pd *pds[3];
	for (i = 0; i < 3; i++)
		pds[i] = ibv_alloc_pd(ctx);
	struct ibv_pd *pd2 = ctx2 ? ibv_alloc_pd(ctx2) : NULL;
	if (pds[0] && pds[1] && pds[2] && pd2) {
		struct ibv_pd foreign = *pds[2];

		foreign.context = ctx2;
		errno = 0;
		mr = ibv_reg_mr(&foreign, buf, sizeof(buf), 0);
		ret = mr ? 0 : errno;
		result("pd_of_another_context_is_rejected", !mr && ret != 0,
		       "MR through another context's PD handle", ret);
		if (mr)
			ibv_dereg_mr(mr);
	} else {
		result("pd_of_another_context_is_rejected", 0, "setup", errno);
	}
	for (i = 0; i < 3; i++)
		if (pds[i])
			ibv_dealloc_pd(pds[i]);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (ctx2)
		ibv_close_device(ctx2);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
