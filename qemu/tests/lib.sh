# Helpers for guest test scripts (sourced inside the VM).
# A test is a shell function run in a subshell: `fail MSG` ends it as failed.
# run_tests prints one line per test: "PASS name" or "FAIL name: reason".

fail() {
    echo "FAIL_REASON: $*"
    exit 1
}

# How much slower this kernel is than the stock one (qemu/run sets it for the
# debug kernel): waits and program timeouts stretch by it.
SLOW=${SOFTRNIC_SLOW:-1}

# wait_for 'CONDITION' [TRIES]: poll a shell condition every 0.2 s (default
# 10 s), SLOW times as long.
wait_for() {
    _n=0
    while [ $_n -lt $(( ${2:-50} * SLOW )) ]; do
        eval "$1" >/dev/null 2>&1 && return 0
        sleep 0.2
        _n=$((_n + 1))
    done
    return 1
}

run_tests() {
    for _t in "$@"; do
        ( set +e; "$_t" ) > /tmp/test.out 2>&1 < /dev/null
        if [ $? = 0 ]; then
            echo "PASS $_t"
        else
            _why=$(grep '^FAIL_REASON: ' /tmp/test.out | tail -n 1 | sed 's/^FAIL_REASON: //')
            echo "FAIL $_t: ${_why:-exited non-zero}"
            grep -v '^FAIL_REASON: ' /tmp/test.out | tail -n 15 | sed 's/^/    /'
        fi
    done
}
