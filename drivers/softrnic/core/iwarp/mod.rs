// SPDX-License-Identifier: GPL-2.0
//! iWARP's wire formats and rules, sans-IO (`core` only): MPA connection
//! setup (`mpa.rs`), the FPDU with its DDP and RDMAP headers (`fpdu.rs`),
//! the stream receiver that turns TCP's bytes into FPDUs (`rx.rs`), the
//! rules of what inbound FPDUs may do (`inbound.rs`), the machine that
//! turns send-queue WQEs and owed answers into FPDUs (`outbound.rs`), and
//! the rules of QPs joined by modify_qp (`join.rs`).  The kernel half
//! (`transport/iwarp/`) runs them over a kernel TCP socket; the host tests
//! run them over byte buffers.

pub(crate) mod fpdu;
pub(crate) mod inbound;
pub(crate) mod join;
pub(crate) mod mpa;
pub(crate) mod outbound;
pub(crate) mod rx;
