//! The deterministic simulation (`sim/`): the kernel's RoCE machines, two
//! endpoints, a hostile link, every service.  Each test prints its seed and
//! packet count; `SOFTRNIC_SIM_SEED=N` (and `SOFTRNIC_SIM_PACKETS=M`)
//! replays one seed, and the `--ignored` soak runs 100 million packets per
//! service.

use crate::sim::{self, iwarp, Config, Faults, Report};
use crate::transport_rules::Service;

fn seeds() -> Vec<u64> {
    match std::env::var("SOFTRNIC_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SOFTRNIC_SIM_SEED: a number")],
        Err(_) => (1..=4).collect(),
    }
}

fn show(name: &str, cfg: &Config, r: &Report) {
    println!(
        "sim {name} seed {}: {} packets ({} lost, {} duplicated, {} corrupted, {} reordered), \
         {} requests, {} receives completed, {} retransmits, {} timeouts, {} RNR NAKs, \
         {} sequence NAKs, {} bad ICRC, {} local operations run early, {:.3} s simulated",
        cfg.seed,
        r.packets,
        r.lost,
        r.duplicated,
        r.corrupted,
        r.reordered,
        r.requests,
        r.receives,
        r.retransmits,
        r.timeouts,
        r.rnr_naks,
        r.seq_naks,
        r.bad_icrc,
        r.early_locals,
        r.sim_ns as f64 / 1e9
    );
}

/// Run `svc` over each seed, `packets` per seed; the packet total.
fn run(name: &str, svc: Service, packets: u64, faults: Faults) -> u64 {
    let packets = match std::env::var("SOFTRNIC_SIM_PACKETS") {
        Ok(s) => s.parse().expect("SOFTRNIC_SIM_PACKETS: a number"),
        Err(_) => packets,
    };
    let mut total = 0;
    for seed in seeds() {
        let mut cfg = Config::new(svc, seed, packets);
        cfg.faults = faults;
        let r = sim::run(cfg);
        show(name, &cfg, &r);
        assert!(
            r.faults.is_empty(),
            "sim {name} seed {seed} (replay: SOFTRNIC_SIM_SEED={seed}):\n  {}",
            r.faults.join("\n  ")
        );
        assert!(
            r.requests > 0 && r.receives > 0,
            "sim {name} seed {seed} did nothing"
        );
        // RC runs fast registrations while earlier messages are in flight.
        assert!(
            svc != Service::Rc || r.early_locals > 0,
            "sim {name} seed {seed}: no local operation ran early"
        );
        total += r.packets;
    }
    total
}

const PER_SEED: u64 = 250_000;

#[test]
fn sim_rc_hostile_link() {
    run("rc", Service::Rc, PER_SEED, Faults::HOSTILE);
}

#[test]
fn sim_uc_lossy_link() {
    run("uc", Service::Uc, PER_SEED, Faults::LOSSY_IN_ORDER);
}

#[test]
fn sim_ud_hostile_link() {
    run("ud", Service::Ud, PER_SEED, Faults::HOSTILE);
}

/// faults.sh's `burst` profile (netem `loss gemodel 0.5% 25% 50% 0%`):
/// losses in bursts of 4 packets on average, data and ACKs alike.  RC must
/// complete everything within its retry budget (it is refreshed by
/// progress).
#[test]
fn sim_rc_burst_loss() {
    let burst = Faults {
        loss: 0,
        burst: Some(sim::Burst {
            enter: 5_000,
            leave: 250_000,
            lose: 500_000,
        }),
        ..Faults::NONE
    };
    run("rc-burst", Service::Rc, PER_SEED, burst);
}

#[test]
fn sim_rc_clean_link() {
    run("rc-clean", Service::Rc, PER_SEED / 4, Faults::NONE);
}

#[test]
fn sim_replays_a_seed_exactly() {
    let cfg = Config::new(Service::Rc, 7, 50_000);
    let (a, b) = (sim::run(cfg), sim::run(cfg));
    assert_eq!((a.digest, a.packets, a.lost), (b.digest, b.packets, b.lost));
    assert!(a.faults.is_empty(), "{:?}", a.faults);
}

/// 100 million packets per service (cargo test -- --ignored).
#[test]
#[ignore]
fn sim_soak() {
    for (name, svc, faults) in [
        ("rc", Service::Rc, Faults::HOSTILE),
        ("uc", Service::Uc, Faults::LOSSY_IN_ORDER),
        ("ud", Service::Ud, Faults::HOSTILE),
    ] {
        let t = std::time::Instant::now();
        let mut total = 0;
        let mut seed = 1000;
        while total < 100_000_000 {
            let mut cfg = Config::new(svc, seed, 5_000_000);
            cfg.faults = faults;
            let r = sim::run(cfg);
            show(name, &cfg, &r);
            assert!(
                r.faults.is_empty(),
                "soak {name} seed {seed} (replay: SOFTRNIC_SIM_SEED={seed} \
                 SOFTRNIC_SIM_PACKETS=5000000 cargo test sim_{name}):\n  {}",
                r.faults.join("\n  ")
            );
            total += r.packets;
            seed += 1;
        }
        println!(
            "soak {name}: {total} packets in {:.0} s",
            t.elapsed().as_secs_f64()
        );
    }
}

/// The completion statuses of the error rules, one scripted exchange each
/// between two endpoints of the simulation (no random link).
mod statuses {
    use crate::roce::wc;
    use crate::sim::endpoint::{Attrs, Endpoint, Mr, Recv, Wqe};
    use crate::transport_rules::{MsgOp, Service};

    fn attrs(retry_cnt: u8, rnr_retry: u8) -> Attrs {
        Attrs {
            svc: Service::Rc,
            mtu: 256,
            timeout: 7,
            retry_cnt,
            rnr_retry,
            min_rnr_timer: 1,
            max_rd: 4,
            qkey: 0,
        }
    }

    fn pair(retry_cnt: u8, rnr_retry: u8) -> (Endpoint, Endpoint) {
        let a = Endpoint::new(0x11, 0x22, attrs(retry_cnt, rnr_retry), 8192, 8);
        let mut b = Endpoint::new(0x22, 0x11, attrs(retry_cnt, rnr_retry), 8192, 8);
        b.d.mrs.push(Mr {
            rkey: 0x100,
            base: 4096,
            len: 4096,
            read: true,
            write: false,
            atomic: false,
            valid: true,
        });
        (a, b)
    }

    /// Move packets both ways (none from `a` if `cut`), firing timers when
    /// nothing is in flight, until `a` has `want` completions.
    fn exchange(a: &mut Endpoint, b: &mut Endpoint, cut: bool, want: usize) {
        for _ in 0..10_000 {
            if a.d.send_cq.len() >= want {
                return;
            }
            a.pump();
            let from_a = std::mem::take(&mut a.d.outbox);
            b.pump();
            let from_b = std::mem::take(&mut b.d.outbox);
            let quiet = from_a.is_empty() && from_b.is_empty();
            if !cut {
                for f in &from_a {
                    b.receive(f);
                }
            }
            for f in &from_b {
                a.receive(f);
            }
            if quiet {
                // Nothing in flight: time passes until the next timer.
                for e in [&mut *a, &mut *b] {
                    if let Some(t) = e.d.timer {
                        e.d.now = t;
                        e.fire_timer();
                    }
                }
            }
        }
        panic!("no completion: {:?}", a.d.send_cq);
    }

    fn wqe(op: MsgOp, rkey: u32, raddr: u64) -> Wqe {
        Wqe {
            wr_id: 7,
            op: Some(op),
            laddr: 0,
            len: 64,
            raddr,
            rkey,
            ..Wqe::default()
        }
    }

    /// READs longer than the requester's window (1 MiB at MTU 1024: 1024
    /// response packets, the window 128 PSNs) complete, one after another.
    #[test]
    fn reads_longer_than_the_window_complete() {
        let long = Attrs {
            mtu: 1024,
            ..attrs(7, 7)
        };
        let mut a = Endpoint::new(0x11, 0x22, long, 2 << 20, 8);
        let mut b = Endpoint::new(0x22, 0x11, long, 1 << 20, 8);
        b.d.mrs.push(Mr {
            rkey: 0x100,
            base: 0,
            len: 1 << 20,
            read: true,
            write: false,
            atomic: false,
            valid: true,
        });
        for (i, x) in b.d.mem.iter_mut().enumerate() {
            *x = (i * 7 + i / 4096) as u8;
        }
        for i in 0..2u64 {
            a.post_send(Wqe {
                laddr: i << 20,
                len: 1 << 20,
                ..wqe(MsgOp::Read, 0x100, 0)
            });
        }
        exchange(&mut a, &mut b, false, 2);
        assert!(
            a.d.send_cq.iter().all(|c| c.status == wc::SUCCESS),
            "{:?}",
            a.d.send_cq
        );
        assert!(a.d.mem[..1 << 20] == b.d.mem[..] && a.d.mem[1 << 20..] == b.d.mem[..]);
    }

    #[test]
    fn write_without_the_right_completes_rem_access_err_and_both_qps_err() {
        let (mut a, mut b) = pair(7, 7);
        // The MR allows READ only.
        a.post_send(wqe(MsgOp::Write, 0x100, 4096));
        exchange(&mut a, &mut b, false, 1);
        assert_eq!(a.d.send_cq[0].status, wc::REM_ACCESS_ERR);
        assert!(a.d.error && b.d.error);
    }

    #[test]
    fn read_past_the_region_completes_rem_access_err() {
        let (mut a, mut b) = pair(7, 7);
        a.post_send(wqe(MsgOp::Read, 0x100, 8192 - 32));
        exchange(&mut a, &mut b, false, 1);
        assert_eq!(a.d.send_cq[0].status, wc::REM_ACCESS_ERR);
    }

    #[test]
    fn a_dead_link_completes_retry_exc_err_after_retry_cnt_timeouts() {
        let (mut a, mut b) = pair(3, 7);
        a.post_send(wqe(MsgOp::Send, 0, 0));
        exchange(&mut a, &mut b, true, 1);
        assert_eq!(a.d.send_cq[0].status, wc::RETRY_EXC_ERR);
        // The first try and three retries, each ended by the ACK timeout.
        let c = |k: crate::roce::Count| a.d.counts[k as usize];
        assert_eq!(c(crate::roce::Count::AckTimeout), 4);
        // Three retries spent, the fourth timeout ends it (rxe's
        // completer_retry_err and retry_exceeded_err).
        assert_eq!(c(crate::roce::Count::CompleterRetry), 3);
        assert_eq!(c(crate::roce::Count::RetryExceeded), 1);
    }

    /// Two endpoints with 1 MiB each: eight SENDs of `len` bytes posted
    /// at `a`, eight receives for them at `b`, from `recv_at` on.
    fn eight_sends(len: u64, recv_at: u64) -> (Endpoint, Endpoint) {
        let mut a = Endpoint::new(0x11, 0x22, attrs(7, 7), 1 << 20, 8);
        let mut b = Endpoint::new(0x22, 0x11, attrs(7, 7), 1 << 20, 8);
        for i in 0..8u64 {
            a.post_send(Wqe {
                len: len as u32,
                laddr: i * len,
                ..wqe(MsgOp::Send, 0, 0)
            });
            b.d.rq.push_back(Recv {
                wr_id: i,
                addr: recv_at + i * len,
                len: len as u32,
            });
        }
        (a, b)
    }

    #[test]
    fn ack_timeouts_halve_the_window_to_its_floor_and_acks_widen_it_again() {
        use crate::roce::requester::{MIN_WINDOW, WINDOW};
        // Eight SENDs of 64 packets each: 512 packets, twice the window.
        let (mut a, mut b) = eight_sends(16384, 0);
        // No ACK comes back: each timeout resends half as much as the try
        // before, down to the floor.
        let mut sent = Vec::new();
        for _ in 0..5 {
            let mut n = 0;
            while {
                let more = a.pump();
                n += a.d.outbox.len() as u32;
                more
            } {}
            sent.push(n);
            a.d.now = a.d.timer.expect("the ACK timer runs");
            a.fire_timer();
        }
        assert_eq!(
            sent,
            [WINDOW, WINDOW / 2, WINDOW / 4, MIN_WINDOW, MIN_WINDOW]
        );
        // ACKs again: everything completes, and the window is whole again.
        exchange(&mut a, &mut b, false, 8);
        assert!(a.d.send_cq.iter().all(|c| c.status == wc::SUCCESS));
        assert_eq!(b.d.recv_cq.len(), 8);
        assert_eq!(a.req.cwnd, WINDOW);
    }

    /// Every ACK of a window is lost, so the requester times out and
    /// resends from the oldest PSN, a part of the window at a time.  The
    /// responder, which has everything, answers the duplicates with an ACK
    /// of the newest PSN it has: that acknowledges first transmissions the
    /// requester has not resent yet, and must be taken, not dropped as an
    /// ACK of something never sent (the requester would resend the same
    /// part on every timeout until retry_cnt ran out: RETRY_EXC_ERR on a
    /// link that had delivered everything; faults.sh's burst profile).
    #[test]
    fn an_ack_beyond_the_resent_part_completes_the_window() {
        // Eight SENDs of 16 packets: 128 packets, the whole window, twice
        // what a timeout leaves of it.
        let (mut a, mut b) = eight_sends(4096, 0x8_0000);
        let mut sent = 0;
        while {
            let more = a.pump();
            for f in std::mem::take(&mut a.d.outbox) {
                b.receive(&f);
                sent += 1;
            }
            more
        } {}
        assert_eq!(sent, 128);
        // Every ACK is lost.
        while b.pump() {}
        assert_eq!(b.d.recv_cq.len(), 8);
        a.d.now = a.d.timer.expect("the ACK timer runs");
        a.fire_timer();
        exchange(&mut a, &mut b, false, 8);
        assert!(a.d.send_cq.iter().all(|c| c.status == wc::SUCCESS));
        assert_eq!(a.d.counts[crate::roce::Count::AckTimeout as usize], 1);
        assert_eq!(a.d.counts[crate::roce::Count::CompleterRetry as usize], 1);
        assert_eq!(a.d.counts[crate::roce::Count::RetryExceeded as usize], 0);
        assert_eq!(b.d.recv_cq.len(), 8);
    }

    #[test]
    fn no_receive_completes_rnr_retry_exc_err_after_rnr_retry_naks() {
        let (mut a, mut b) = pair(7, 2);
        a.post_send(wqe(MsgOp::Send, 0, 0));
        exchange(&mut a, &mut b, false, 1);
        assert_eq!(a.d.send_cq[0].status, wc::RNR_RETRY_EXC_ERR);
        assert_eq!(b.d.counts[crate::roce::Count::RnrNakSent as usize], 3);
        // rxe's send_rnr_err at b; rcvd_rnr_err, retry_rnr_exceeded_err at a.
        assert_eq!(a.d.counts[crate::roce::Count::RnrNakReceived as usize], 3);
        assert_eq!(a.d.counts[crate::roce::Count::RnrRetryExceeded as usize], 1);
        assert_eq!(a.d.counts[crate::roce::Count::RetryExceeded as usize], 0);
    }

    #[test]
    fn a_receive_posted_during_rnr_waits_completes_success() {
        let (mut a, mut b) = pair(7, 7);
        a.post_send(wqe(MsgOp::Send, 0, 0));
        // The first try meets no receive (an RNR NAK), then one is posted.
        a.pump();
        for f in std::mem::take(&mut a.d.outbox) {
            b.receive(&f);
        }
        b.d.rq.push_back(Recv {
            wr_id: 1,
            addr: 0,
            len: 4096,
        });
        exchange(&mut a, &mut b, false, 1);
        assert_eq!(a.d.send_cq[0].status, wc::SUCCESS);
        assert_eq!(b.d.recv_cq.len(), 1);
        assert_eq!(b.d.recv_cq[0].byte_len, 64);
    }
}

// ---- iWARP: two endpoints over a TCP stream (sim/iwarp.rs) ----

fn show_iwarp(name: &str, cfg: &iwarp::Config, r: &iwarp::Report) {
    println!(
        "sim-iwarp {name} seed {}: {} FPDUs, {} bytes, {} completions, {} bits flipped, \
         terminated by {:?}{}",
        cfg.seed,
        r.fpdus,
        r.bytes,
        r.completions,
        r.flips,
        r.terminated,
        if r.stalled { ", stalled" } else { "" }
    );
}

const IWARP: iwarp::Config = iwarp::Config {
    seed: 0,
    messages: 20_000,
    max_fpdu: 1448,
    crc: true,
    extensions: false,
    ord: 8,
    flip_ppm: 0,
    confirm: false,
};

/// Run over each seed: a clean stream completes everything, correctly.
fn run_iwarp(name: &str, base: iwarp::Config) {
    for seed in seeds() {
        let cfg = iwarp::Config { seed, ..base };
        let r = iwarp::run(cfg);
        show_iwarp(name, &cfg, &r);
        assert!(
            r.faults.is_empty() && r.terminated.is_empty() && !r.stalled,
            "sim-iwarp {name} seed {seed} (replay: SOFTRNIC_SIM_SEED={seed}): {:?} {:?}{}:\n  {}",
            r.terminated,
            r.stalled,
            "",
            r.faults.join("\n  ")
        );
        assert_eq!(r.completions, 2 * cfg.messages);
    }
}

#[test]
fn sim_iwarp_crc_mss_fpdus() {
    run_iwarp("crc", IWARP);
}

/// QPs joined by modify_qp: every WRITE completes only once the peer has
/// placed it (a zero-length READ of the machine's own confirms it).
#[test]
fn sim_iwarp_joined_writes_complete_once_placed() {
    run_iwarp(
        "confirm",
        iwarp::Config {
            confirm: true,
            extensions: true,
            ord: 2,
            ..IWARP
        },
    );
}

#[test]
fn sim_iwarp_extensions_small_fpdus_no_crc() {
    run_iwarp(
        "ext",
        iwarp::Config {
            max_fpdu: 128,
            crc: false,
            extensions: true,
            ord: 4,
            ..IWARP
        },
    );
}

#[test]
fn sim_iwarp_loopback_fpdus_ord_1() {
    run_iwarp(
        "64k",
        iwarp::Config {
            max_fpdu: 65_535,
            extensions: true,
            ord: 1,
            ..IWARP
        },
    );
}

#[test]
fn sim_iwarp_flipped_bits_never_complete_wrongly() {
    let mut crc_caught = 0;
    for seed in 1..=20 {
        let cfg = iwarp::Config {
            seed,
            messages: 2_000,
            flip_ppm: 2,
            ..IWARP
        };
        let r = iwarp::run(cfg);
        show_iwarp("flips", &cfg, &r);
        assert!(
            r.faults.is_empty(),
            "seed {seed}:\n  {}",
            r.faults.join("\n  ")
        );
        if r.flips > 0 {
            assert!(
                !r.terminated.is_empty() || r.stalled,
                "seed {seed}: a flip went unnoticed"
            );
        }
        crc_caught += r
            .terminated
            .iter()
            .filter(|c| **c == crate::iwarp::fpdu::cause::MPA_CRC)
            .count();
    }
    assert!(crc_caught > 0, "no flip was caught by the CRC");
}

#[test]
fn sim_iwarp_replays_a_seed_exactly() {
    let cfg = iwarp::Config {
        seed: 9,
        messages: 3_000,
        flip_ppm: 1,
        ..IWARP
    };
    let (a, b) = (iwarp::run(cfg), iwarp::run(cfg));
    assert_eq!(
        (a.fpdus, a.bytes, a.flips, a.terminated),
        (b.fpdus, b.bytes, b.flips, b.terminated)
    );
}
