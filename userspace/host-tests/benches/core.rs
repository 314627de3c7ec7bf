//! `cargo bench -p softrnic-host-tests`: the host micro-benchmarks of the
//! sans-IO code (see `src/micro_bench.rs`).  `SOFTRNIC_BENCH_SECS` sets how
//! long each figure runs (default 1 s).

fn main() {
    let secs = std::env::var("SOFTRNIC_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    for f in softrnic_host_tests::micro_bench::run(secs) {
        println!("{:<48} {:>10.3} {}", f.name, f.per_sec, f.unit);
    }
}
