//! The deterministic simulation (`sim/`): the kernel's RoCE machines, two
//! endpoints, a hostile link, every service.  Each test prints its seed and
//! packet count; `SOFTRNIC_SIM_SEED=N` (and `SOFTRNIC_SIM_PACKETS=M`)
//! replays one seed, and the `--ignored` soak runs 100 million packets per
//! service.

use crate::sim::{self, Config, Faults, Report};
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
         {} sequence NAKs, {} bad ICRC, {:.3} s simulated",
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
