# Helpers for guest test scripts (sourced inside the VM).
# A suite first declares how many verdicts it will print (`plan N`, exactly
# once), then prints one verdict per test: "PASS name [result]", "FAIL name:
# why" or "SKIP name: why" (scripts/verdicts counts them and fails the suite
# on a test that printed none).  A test is a shell function run in a
# subshell: `fail MSG` ends it as failed; run_tests prints its verdict.
# A test program that prints verdicts itself runs under `runner`, so that its
# crash or timeout is a failure too ("DIED name: why").

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

plan() { echo "PLAN $1"; }
# words ARGS...: how many there are.
words() { echo $#; }

# runner NAME CMD...: run CMD, a program that prints its own verdicts and
# exits 0 when it ran to its end (whatever its tests found); any other exit
# (an uncaught exception, a crash, timeout(1)'s 124) is "DIED NAME: ...", a
# failure of its own beside the verdicts it never printed.
runner() {
    _name=$1; shift
    "$@"
    _rc=$?
    case $_rc in
    0) ;;
    124) echo "DIED $_name: timed out" ;;
    *) echo "DIED $_name: exited $_rc$([ $_rc -gt 128 ] && echo " (signal $((_rc - 128)))")" ;;
    esac
    return 0
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

# For suites whose tests run as `( t_X ) > /tmp/test.out` and end with
# result (the text after PASS), skip (a SKIP, counted apart) or fail.
result() { echo "RESULT: $*${ALLOWED:+ (allowed: $ALLOWED)}"; }
# allowed WHY: this test's result is a pass by an allowance for a peer's
# known behaviour (Documentation/testing.md), evidence in the log.
allowed() { ALLOWED="${ALLOWED:+$ALLOWED; }$*"; }
skip() {
    echo "SKIP_REASON: $*"
    exit 0
}
# verdict PREFIX NAME RC LINES: the verdict line of a test that ended with
# status RC, its output in /tmp/test.out: SKIP with its reason, PASS with
# its result, or FAIL with its reason and its output's last LINES lines.
# PREFIX: "" or "REF " (a reference run).  True unless it failed.
verdict() {
    _skip=$(sed -n 's/^SKIP_REASON: //p' /tmp/test.out | tail -n 1)
    if [ "$3" = 0 ] && [ -n "$_skip" ]; then
        echo "${1}SKIP $2: $_skip"
    elif [ "$3" = 0 ]; then
        _res=$(sed -n 's/^RESULT: //p' /tmp/test.out | tail -n 1)
        echo "${1}PASS $2${_res:+ $_res}"
    else
        _why=$(sed -n 's/^FAIL_REASON: //p' /tmp/test.out | tail -n 1)
        echo "${1}FAIL $2: ${_why:-exited non-zero}"
        grep -v '^FAIL_REASON: \|^RESULT: ' /tmp/test.out | tail -n "$4" | sed 's/^/    /'
        return 1
    fi
}
