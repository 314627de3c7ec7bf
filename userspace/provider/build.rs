//! Generate bindings to libibverbs's private provider interface
//! (`infiniband/driver.h`) from the source of the installed rdma-core, which
//! scripts/setup unpacked and configured (RDMA_CORE_SRC).

use std::env;
use std::fs;
use std::path::PathBuf;

/// The private provider ABI this provider is written for (`IBVERBS_PRIVATE_N`,
/// `verbs_register_driver_N`, `libsoftrnic-rdmavN.so`).  scripts/setup reads
/// this line and refuses an rdma-core whose libibverbs offers another.
const PRIVATE_ABI: u32 = 34;

fn main() {
    let src = PathBuf::from(
        env::var("RDMA_CORE_SRC").unwrap_or_else(|_| "/usr/src/softrnic-rdma-core".into()),
    );
    let inc = src.join("build/include");
    assert!(
        inc.join("infiniband/driver.h").exists() && inc.join("config.h").exists(),
        "rdma-core source not prepared at {} (run scripts/setup)",
        src.display()
    );
    println!("cargo:rerun-if-env-changed=RDMA_CORE_SRC");
    println!("cargo:rerun-if-changed=src/wrapper.h");
    for h in ["infiniband/driver.h", "infiniband/kern-abi.h", "config.h"] {
        println!("cargo:rerun-if-changed={}", inc.join(h).display());
    }
    // rdma-core's configured config.h names the private ABI its driver.h
    // registers providers with (verbs_register_driver_N).
    let config_h = fs::read_to_string(inc.join("config.h")).expect("read config.h");
    let abi = config_h
        .lines()
        .find_map(|l| l.strip_prefix("#define IBVERBS_PABI_VERSION "))
        .map(str::trim);
    assert!(
        abi == Some(&PRIVATE_ABI.to_string()),
        "the rdma-core at {} has private provider ABI {abi:?}; this provider is written for \
         IBVERBS_PRIVATE_{PRIVATE_ABI}",
        src.display()
    );
    let bindings = bindgen::Builder::default()
        .header("src/wrapper.h")
        .clang_arg(format!("-I{}", inc.display()))
        .clang_arg(format!("-I{}", src.display()))
        .allowlist_function("(_?verbs_|ibv_cmd_|ibv_).*")
        .allowlist_type("(verbs_|ibv_|ib_uverbs_).*")
        .allowlist_var("(VERBS_|IBV_|IB_UVERBS_|RDMA_DRIVER_).*")
        .allowlist_item("rdma_driver_id")
        // Enum constants under their C names (IBV_QPT_RC, not
        // ibv_qp_type_IBV_QPT_RC).
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .expect("bindgen over infiniband/driver.h failed");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("driver_bindings.rs");
    bindings.write_to_file(&out).expect("write bindings");

    // A wrong private ABI must fail at link time, not at load time.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsoftrnic-rdmav{PRIVATE_ABI}.so");
    println!("cargo:rustc-link-lib=ibverbs");
}
