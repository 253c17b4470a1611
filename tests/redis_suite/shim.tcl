# Loaded into Redis's Tcl test harness by run.sh (a `source` line added to the scratch copy's
# test_helper.tcl, after Redis's procedures are defined and before the test server or client
# starts). A run without failures goes exactly as without it. It:
#  1. writes every record the test client sends its test server (testing, ok, err, skip,
#     ignore, exception, done), and a "begin" record as each test is entered, to
#     $RLIMITD_SUITE_LOG, one JSON object per line, flushed at once
#     so that a run killed by a timeout leaves a complete log; each record carries the value of
#     `is_eval` in the file (unit/scripting.tcl runs its tests twice: is_eval 0 is the FUNCTION
#     pass, 1 the EVAL pass) so report.py can tell the two halves apart;
#  2. skips the tests listed in $RLIMITD_SUITE_SKIP (a file of "<is_eval>\t<name>" lines; run.sh
#     lists there the tests that hung or crashed the server in an earlier attempt) as Redis's
#     --skiptest does, but in one scripting pass only (--skiptest would skip both);
#  3. run.sh --lenient only: with $RLIMITD_SUITE_TOLERATE (a list of directive names), lets
#     `r config set <name> <value>` of those names answer an unknown-directive error as if it
#     were OK (the files set Redis's encoding tunables at the top of whole blocks and in
#     start_server overrides, where an error ends the file); with $RLIMITD_SUITE_LENIENT 1,
#     lets Redis's memory_usage helper answer 1 when MEMORY USAGE is an unknown command (as it
#     answers 1 itself on a non-jemalloc build; hash.tcl calls it outside any test). Each time
#     is logged as a "note" record starting "tolerated: ";
#  4. after a test fails, turns its client's raw mode off if the test left it on, switches its
#     client back to the protocol it began with if the test left it on another (`r hello 3`
#     before the failure, `r hello 2` after it), and sends DISCARD, so that a test that failed in
#     raw mode, in RESP3 or inside MULTI does not fail every later test of its block (see `test`
#     below);
#  5. lets `FUNCTION FLUSH`, which the external-server preamble sends before every block, answer
#     "unknown command" without aborting the block (a server without FUNCTION would otherwise run
#     no test at all). Only that call, only from the preamble, only that error; it is logged as
#     a "note" record so the report says so.

if {![info exists ::env(RLIMITD_SUITE_LOG)]} {
    error "shim.tcl: RLIMITD_SUITE_LOG is not set"
}

set ::rlimitd_suite_pass ""
set ::rlimitd_suite_fd ""
set ::rlimitd_suite_skip {}
if {[info exists ::env(RLIMITD_SUITE_SKIP)] && $::env(RLIMITD_SUITE_SKIP) ne ""} {
    set fd [open $::env(RLIMITD_SUITE_SKIP) r]
    fconfigure $fd -encoding utf-8
    foreach line [split [read $fd] "\n"] {
        if {$line ne ""} {
            lappend ::rlimitd_suite_skip $line
        }
    }
    close $fd
    unset fd line
}

# JSON string escaping: backslash and quote, then every other control character as \u00XX.
set ::rlimitd_suite_jmap [list "\\" "\\\\" "\"" "\\\"" "\n" "\\n" "\r" "\\r" "\t" "\\t"]
for {set i 0} {$i < 32} {incr i} {
    if {$i != 9 && $i != 10 && $i != 13} {
        lappend ::rlimitd_suite_jmap [format %c $i] [format "\\u%04x" $i]
    }
}
lappend ::rlimitd_suite_jmap [format %c 127] "\\u007f"

proc rlimitd_suite_json {s} {
    return "\"[string map $::rlimitd_suite_jmap $s]\""
}

proc rlimitd_suite_log {status data {elapsed 0}} {
    if {$::rlimitd_suite_fd eq ""} {
        set ::rlimitd_suite_fd [open $::env(RLIMITD_SUITE_LOG) a]
        fconfigure $::rlimitd_suite_fd -encoding utf-8 -translation lf
    }
    set line [format "{\"status\":%s,\"pass\":%s,\"elapsed\":%s,\"data\":%s}" \
        [rlimitd_suite_json $status] [rlimitd_suite_json $::rlimitd_suite_pass] \
        [rlimitd_suite_json $elapsed] [rlimitd_suite_json $data]]
    puts $::rlimitd_suite_fd $line
    flush $::rlimitd_suite_fd
}

# 1. Every record the client sends (the test server sends only "run" packets: not logged).
rename send_data_packet ::rlimitd_suite_orig_send_data_packet
proc send_data_packet {fd status data {elapsed 0}} {
    if {$::client} {
        rlimitd_suite_log $status $data $elapsed
    }
    ::rlimitd_suite_orig_send_data_packet $fd $status $data $elapsed
}

# The scripting pass of the test about to run. `test` evaluates its body one level up, in the
# file's frame, where unit/scripting.tcl's `foreach is_eval {0 1}` keeps its variable (and
# leaves it at 1 for the EVAL-only blocks after the loop). The original is called from that
# same frame, so its `uplevel 1` still lands there.
rename test ::rlimitd_suite_orig_test
proc test {name args} {
    if {[uplevel 1 {info exists is_eval}]} {
        set ::rlimitd_suite_pass [uplevel 1 {set is_eval}]
    } else {
        set ::rlimitd_suite_pass ""
    }
    if {[lsearch -exact $::rlimitd_suite_skip "$::rlimitd_suite_pass\t$name"] >= 0} {
        incr ::num_skipped
        send_data_packet $::test_server_fd skip $name
        return
    }
    # Logged only: a test that hangs before its "testing" record (in external mode the harness
    # first opens a connection for DEBUG LOG) is found by this one.
    rlimitd_suite_log begin $name
    set failed $::num_failed
    if {[catch {::rlimitd_suite_orig_r readingraw} raw]} {
        set raw ""
    }
    set proto [rlimitd_suite_proto]
    uplevel 1 [list ::rlimitd_suite_orig_test $name {*}$args]
    # A failed test can leave the block's connection in a state every later test of the block
    # then fails on, which would hide what those tests measure. So after a failure (only then):
    # - the client reading raw replies although it did not when the test began (the test failed
    #   before its `r readraw 0`): back to parsed replies;
    # - the client on another protocol than when the test began (it failed between its
    #   `r hello 3` and `r hello 2`; later tests would see RESP3 replies): HELLO <the one before>;
    # - a transaction left open (the test failed between MULTI and EXEC; later replies are all
    #   "QUEUED"): DISCARD, whose "OK" shows there was one.
    # Each reset is logged for the report.
    if {$::num_failed > $failed} {
        if {$raw eq "0" && ![catch {::rlimitd_suite_orig_r readingraw} now] && $now eq "1"} {
            ::rlimitd_suite_orig_r readraw 0
            rlimitd_suite_log note "reset: readraw 0 after '$name' failed"
        }
        if {[rlimitd_suite_proto] ne $proto && ![catch {r hello $proto}]} {
            rlimitd_suite_log note "reset: HELLO $proto after '$name' failed"
        }
        if {![catch {::rlimitd_suite_orig_r discard} res] && [string match {*OK} $res]} {
            rlimitd_suite_log note "reset: DISCARD after '$name' failed"
        }
    }
}

# 3. and 5.: memory_usage, CONFIG SET of the tolerated directives, FUNCTION FLUSH from the external-server
# preamble.
set ::rlimitd_suite_tolerate {}
if {[info exists ::env(RLIMITD_SUITE_TOLERATE)]} {
    set ::rlimitd_suite_tolerate [string tolower $::env(RLIMITD_SUITE_TOLERATE)]
}
if {[info exists ::env(RLIMITD_SUITE_LENIENT)] && $::env(RLIMITD_SUITE_LENIENT) eq "1"} {
    rename memory_usage ::rlimitd_suite_orig_memory_usage
    proc memory_usage {key} {
        if {[catch {::rlimitd_suite_orig_memory_usage $key} res opts]} {
            if {[string match -nocase {*unknown command*} $res]} {
                rlimitd_suite_log note "tolerated: MEMORY USAGE answered: $res"
                return 1
            }
            return -options $opts $res
        }
        return $res
    }
}
# The protocol of the current block's client, as its last successful `r hello N` set it (2
# before any: each block opens a new connection). Kept per client handle.
array set ::rlimitd_suite_protos {}
proc rlimitd_suite_proto {} {
    if {[catch {srv 0 client} c] || ![info exists ::rlimitd_suite_protos($c)]} {
        return 2
    }
    return $::rlimitd_suite_protos($c)
}
rename r ::rlimitd_suite_orig_r
proc r {args} {
    if {[llength $args] >= 2 && [string equal -nocase [lindex $args 0] hello] &&
        [string is integer -strict [lindex $args 1]]} {
        set res [::rlimitd_suite_orig_r {*}$args]
        if {![catch {srv 0 client} c]} {
            set ::rlimitd_suite_protos($c) [lindex $args 1]
        }
        return $res
    }
    if {[llength $args] == 4 && [string equal -nocase [lrange $args 0 1] {config set}] &&
        [lsearch -exact $::rlimitd_suite_tolerate [string tolower [lindex $args 2]]] >= 0} {
        if {[catch {::rlimitd_suite_orig_r {*}$args} res opts]} {
            if {[regexp -nocase {unknown directive|unknown option} $res]} {
                rlimitd_suite_log note "tolerated: CONFIG SET [lindex $args 2] answered: $res"
                return OK
            }
            return -options $opts $res
        }
        return $res
    }
    if {[string equal -nocase [lrange $args 0 1] {function flush}] &&
        [lindex [info level -1] 0] eq "run_external_server_test"} {
        if {[catch {::rlimitd_suite_orig_r {*}$args} res opts]} {
            if {[string match -nocase {*unknown command*} $res]} {
                rlimitd_suite_log note "preamble: FUNCTION FLUSH answered: $res"
                return OK
            }
            return -options $opts $res
        }
        return $res
    }
    ::rlimitd_suite_orig_r {*}$args
}
