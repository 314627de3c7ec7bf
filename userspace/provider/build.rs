//! Generate bindings to libibverbs's private provider interface
//! (`infiniband/driver.h`, ABI `IBVERBS_PRIVATE_34`) from the pinned rdma-core
//! source that scripts/setup unpacked and configured (RDMA_CORE_SRC).

use std::env;
use std::path::PathBuf;

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
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsoftrnic-rdmav34.so");
    println!("cargo:rustc-link-lib=ibverbs");
}
