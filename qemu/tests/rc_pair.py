"""RC QPs between two RDMA devices in one process, for guest test scripts
(faults_qp.py, teardown_traffic.py, fork_check.py, transport_errors.py):
each End is a device with a PD, an MR
and a GID; to_rts() takes a QP through INIT, RTR and RTS to its peer."""
import time

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
import pyverbs.enums as e


class End:
    def __init__(self, dev, gid_index):
        self.dev = dev
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, 1 << 17, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)

    def counter(self, name):
        path = '/sys/class/infiniband/%s/ports/1/hw_counters/%s' % (self.dev, name)
        try:
            with open(path) as f:
                return int(f.read())
        except OSError:
            return None

    def qp(self, recv_depth=4):
        """An RC QP (64 send WRs) with its own CQ."""
        cq = CQ(self.ctx, 128)
        q = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                   cap=QPCap(max_send_wr=64, max_recv_wr=recv_depth,
                                             max_send_sge=1, max_recv_sge=1)))
        return q, cq


def to_rts(q, sgid_index, dgid, dest_qpn, access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE,
           timeout=14, retry=7, rnr=7, min_rnr=1, hop_limit=64):
    """Take RC QP q through INIT and RTR to RTS, connected to dest_qpn at
    dgid, both PSNs 0."""
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, access
    q.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    a.path_mtu, a.dest_qp_num, a.rq_psn = e.IBV_MTU_1024, dest_qpn, 0
    a.max_dest_rd_atomic, a.min_rnr_timer = 1, min_rnr
    a.ah_attr = AHAttr(port_num=1, is_global=1,
                       gr=GlobalRoute(dgid=dgid, sgid_index=sgid_index, hop_limit=hop_limit))
    q.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
             e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.timeout, a.retry_cnt, a.rnr_retry, a.sq_psn, a.max_rd_atomic = timeout, retry, rnr, 0, 1
    q.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
             e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)


def connect(end, q, peer, peer_qpn, **kw):
    """QP q of End end connected to QP peer_qpn of End peer."""
    to_rts(q, end.gid_index, peer.gid, peer_qpn, **kw)


def connect_pair(a, b, recv_depth=4, **kw):
    """An RC QP on End a connected to one on End b: (qa, cqa, qb, cqb)."""
    (qa, cqa), (qb, cqb) = a.qp(), b.qp(recv_depth)
    connect(a, qa, b, qb.qp_num, **kw)
    connect(b, qb, a, qa.qp_num, **kw)
    return qa, cqa, qb, cqb


def wait_wc(cq, seconds):
    end = time.time() + seconds
    while time.time() < end:
        n, wcs = cq.poll(1)
        if n > 0:
            return wcs[0]
        time.sleep(0.0005)
    return None


