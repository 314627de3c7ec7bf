// SPDX-License-Identifier: GPL-2.0
/*
 * softrnic C shim for the verbs objects: static inlines and macros of the
 * xarray, refcount, completion, udata, mmap and umem APIs, wrapped so Rust can
 * call them.  No object logic lives here.
 */
#include "shim.h"

/* A handle holding the creator's reference (published later). */
struct softrnic_handle *softrnic_handle_new(void)
{
	struct softrnic_handle *h = kzalloc(sizeof(*h), GFP_KERNEL);

	if (h) {
		refcount_set(&h->count, 1);
		init_completion(&h->done);
	}
	return h;
}

void softrnic_handle_put(struct softrnic_handle *h)
{
	if (refcount_dec_and_test(&h->count))
		complete(&h->done);
}

/*
 * Drop the creator's reference, wait until every lookup has let go, and free
 * the handle once no RCU reader can still be looking at it.
 */
void softrnic_handle_drain(struct softrnic_handle *h)
{
	softrnic_handle_put(h);
	wait_for_completion(&h->done);
	kfree_rcu(h, rcu);
}

/* Tables are looked up from any context (the engines run in softirq). */
void softrnic_table_init(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
}

void softrnic_table_destroy(struct xarray *xa)
{
	WARN_ON(!xa_empty(xa));
	xa_destroy(xa);
}

/*
 * Reserve a free index in [min, max] (cyclic): lookups see nothing there
 * until softrnic_table_publish stores the object, so it is published only
 * once fully built.  @atomic: the caller may not sleep (and may hold other
 * irq-disabling locks, so the lock is taken with irqsave).
 */
int softrnic_table_reserve(struct xarray *xa, u32 *index, u32 min, u32 max,
			   u32 *next, bool atomic)
{
	unsigned long flags;
	int ret;

	if (atomic) {
		xa_lock_irqsave(xa, flags);
		ret = __xa_alloc_cyclic(xa, index, NULL, XA_LIMIT(min, max), next,
					GFP_ATOMIC);
		xa_unlock_irqrestore(xa, flags);
	} else {
		ret = xa_alloc_cyclic_irq(xa, index, NULL, XA_LIMIT(min, max), next,
					  GFP_KERNEL);
	}
	return ret < 0 ? ret : 0;
}

/* Reserve exactly @index (-EBUSY if taken). */
int softrnic_table_reserve_at(struct xarray *xa, u32 index)
{
	return xa_insert_irq(xa, index, NULL, GFP_KERNEL);
}

/* Store @entry at a reserved @index (no allocation: the slot exists). */
void softrnic_table_publish(struct xarray *xa, u32 index, void *entry)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	WARN_ON(xa_is_err(__xa_store(xa, index, entry, GFP_ATOMIC)));
	xa_unlock_irqrestore(xa, flags);
}

void softrnic_table_erase(struct xarray *xa, u32 index)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_erase(xa, index);
	xa_unlock_irqrestore(xa, flags);
}

/* Make @obj findable at @index through its handle @h. */
void softrnic_table_publish_handle(struct xarray *xa, u32 index,
				   struct softrnic_handle *h, void *obj)
{
	h->obj = obj;
	/* (The store orders h->obj before the entry for RCU readers.) */
	softrnic_table_publish(xa, index, h);
}

/*
 * The object at @index with a reference taken on its handle (in *@hp), or
 * NULL when there is none or it is being destroyed.  Lock-free: RCU keeps
 * the handle readable, its count keeps the object alive.
 */
void *softrnic_table_get(struct xarray *xa, u32 index,
			 struct softrnic_handle **hp)
{
	struct softrnic_handle *h;
	void *obj = NULL;

	rcu_read_lock();
	h = xa_load(xa, index);
	if (h && refcount_inc_not_zero(&h->count)) {
		obj = h->obj;
		*hp = h;
	}
	rcu_read_unlock();
	return obj;
}

/* Copy @len bytes at @offset of the entry at @index, under the table lock. */
bool softrnic_table_copy(struct xarray *xa, u32 index, void *dst,
			 size_t offset, size_t len)
{
	unsigned long flags;
	void *entry;

	xa_lock_irqsave(xa, flags);
	entry = xa_load(xa, index);
	if (entry)
		memcpy(dst, entry + offset, len);
	xa_unlock_irqrestore(xa, flags);
	return entry != NULL;
}

/* Copy @len bytes from @src to @offset of the entry at @index, under the lock. */
bool softrnic_table_write(struct xarray *xa, u32 index, const void *src,
			  size_t offset, size_t len)
{
	unsigned long flags;
	void *entry;

	xa_lock_irqsave(xa, flags);
	entry = xa_load(xa, index);
	if (entry)
		memcpy(entry + offset, src, len);
	xa_unlock_irqrestore(xa, flags);
	return entry != NULL;
}

struct ib_udata *softrnic_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *softrnic_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

size_t softrnic_udata_inlen(const struct ib_udata *udata)
{
	return udata ? udata->inlen : 0;
}

int softrnic_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

int softrnic_copy_to_user(u64 addr, const void *src, size_t len)
{
	return copy_to_user(u64_to_user_ptr(addr), src, len) ? -EFAULT : 0;
}

void *softrnic_vmalloc_user(size_t size)
{
	return vmalloc_user(size);
}

void *softrnic_vzalloc(size_t size)
{
	return vzalloc(size);
}

void softrnic_vfree(const void *addr)
{
	vfree(addr);
}

/*
 * Make @buf (from softrnic_vmalloc_user, @len bytes, page multiple) mappable
 * through @uctx; @key is the mmap offset for user space.  On success the
 * entry owns @buf: it is freed in softrnic_mmap_free once the entry is
 * removed and no mmap() is in flight (user mappings hold their own page
 * references).  On failure the caller still owns @buf.
 */
struct softrnic_mmap_entry *softrnic_mmap_entry_new(struct ib_ucontext *uctx,
						    void *buf, size_t len,
						    u64 *key)
{
	struct softrnic_mmap_entry *entry = kzalloc(sizeof(*entry), GFP_KERNEL);

	if (!entry)
		return NULL;
	entry->buf = buf;
	if (rdma_user_mmap_entry_insert(uctx, &entry->rdma, len)) {
		kfree(entry);
		return NULL;
	}
	*key = rdma_user_mmap_get_offset(&entry->rdma);
	return entry;
}

void softrnic_mmap_entry_remove(struct softrnic_mmap_entry *entry)
{
	rdma_user_mmap_entry_remove(&entry->rdma);
}

int softrnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma = rdma_user_mmap_entry_get(uctx, vma);
	struct softrnic_mmap_entry *entry;
	int ret;

	if (!rdma)
		return -EINVAL;
	entry = container_of(rdma, struct softrnic_mmap_entry, rdma);
	if (vma->vm_end - vma->vm_start > rdma->npages << PAGE_SHIFT)
		ret = -EINVAL;
	else
		ret = remap_vmalloc_range(vma, entry->buf, 0);
	rdma_user_mmap_entry_put(rdma);
	return ret;
}

void softrnic_mmap_free(struct rdma_user_mmap_entry *rdma)
{
	struct softrnic_mmap_entry *entry =
		container_of(rdma, struct softrnic_mmap_entry, rdma);

	vfree(entry->buf);
	kfree(entry);
}

struct ib_umem *softrnic_umem_get(struct ib_device *dev, u64 addr, u64 len,
				  int access, int *err)
{
	struct ib_umem *umem = ib_umem_get_va(dev, addr, len, access);

	if (IS_ERR(umem)) {
		*err = PTR_ERR(umem);
		return NULL;
	}
	*err = 0;
	return umem;
}

void softrnic_qp_event(struct ib_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->device,
		.element.qp = qp,
		.event = type,
	};

	if (qp->event_handler)
		qp->event_handler(&ev, qp->qp_context);
}

void softrnic_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = cq->device,
		.element.cq = cq,
		.event = type,
	};

	if (cq->event_handler)
		cq->event_handler(&ev, cq->cq_context);
}

void softrnic_srq_event(struct ib_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = srq->device,
		.element.srq = srq,
		.event = type,
	};

	if (srq->event_handler)
		srq->event_handler(&ev, srq->srq_context);
}

void softrnic_cq_notify(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

int softrnic_map_mr_sg(struct ib_mr *mr, struct scatterlist *sg, int sg_nents,
		       unsigned int *sg_offset)
{
	return ib_sg_to_pages(mr, sg, sg_nents, sg_offset, softrnic_mr_set_page);
}

u8 softrnic_random_key_byte(void)
{
	return get_random_u8();
}

unsigned long softrnic_page_size(void)
{
	return PAGE_SIZE;
}
