#!/usr/bin/env node
// The npm sorted-set rate limiters on ioredis, against rlimitd and against redis-server (issue 14).
//
//   node tests/compat/zset_limiters.test.js                 # both servers (what run.sh does)
//   TARGET=redis node tests/compat/zset_limiters.test.js    # redis-server only: proves the test
//   TARGET=rlimitd RLIMITD=build/rlimitd node tests/compat/zset_limiters.test.js
//
// ratelimiter 3.4.1 and rolling-rate-limiter 0.4.2 (installed by run.sh with ioredis into
// tests/compat/node_modules) each limit 5 calls per 10 s on a fresh key; 7 calls must give exactly
// 5 allowed and 2 denied, with remaining/reset figures that follow from the clock read around the
// calls. What they send (read from their source in node_modules):
//   ratelimiter.get():  MULTI, ZREMRANGEBYSCORE k 0 <now-10s, us>, ZCARD k, ZADD k <now us> <now us>,
//                       ZRANGE k 0 0, ZRANGE k -5 -5, ZREMRANGEBYRANK k 0 -6, PEXPIRE k 10000, EXEC;
//                       remaining = max(0, 5 - ZCARD), reset from the oldest entry in the window.
//   rolling-rate-limiter limitWithInfo(): MULTI, ZREMRANGEBYSCORE k 0 <now-10s, us>,
//                       ZADD k <now us> <uuid>, ZRANGE k 0 -1 WITHSCORES, EXPIRE k 10, EXEC;
//                       blocked when more than 5 scores are in the window (read back with
//                       Number(score), so the scores' text matters).
// Every assertion on counts needs the 7 calls to fit in the 10 s window: the time is measured
// around them, and a run that took longer (a machine stalled for 10 s) reports the count checks
// as skipped instead of asserting anything about them.
'use strict';

const {
    need, check, eq, skip, finish, startServer, stopServer, client,
} = require('./harness');

const TARGETS = (process.env.TARGET || 'rlimitd redis').split(/[ ,]+/).filter(Boolean);
const Limiter = need('ratelimiter');
const { IORedisRateLimiter } = need('rolling-rate-limiter');

const WINDOW_MS = 10000;
const MAX = 5;
const CALLS = 7;

// ---- the tests ----

// ratelimiter 3.4.1 (tj/node-ratelimiter): callback API, remaining counts the calls left before
// this one; a call is allowed while remaining > 0 (its README's middleware).
async function testRatelimiter(t, db) {
    const limit = new Limiter({ id: 'user-1', db, max: MAX, duration: WINDOW_MS });
    const get = () => new Promise((resolve, reject) => {
        limit.get((err, info) => (err ? reject(err) : resolve(info)));
    });
    const t0 = Date.now();
    const infos = [];
    for (let i = 0; i < CALLS; i++) infos.push(await get());
    const t1 = Date.now();
    const name = `${t}: ratelimiter`;
    if (t1 - t0 >= WINDOW_MS) {
        skip(`${name} counts`, `the calls took ${t1 - t0} ms, longer than the window`);
        return;
    }
    const allowed = infos.filter((x) => x.remaining > 0).length;
    eq(`${name}: 5 allowed, 2 denied`, [allowed, CALLS - allowed], [5, 2]);
    eq(`${name}: remaining`, infos.map((x) => x.remaining), [5, 4, 3, 2, 1, 0, 0]);
    eq(`${name}: total`, infos.map((x) => x.total), Array(CALLS).fill(MAX));
    // reset: the oldest call in the window plus the window, so between t0 and t1, plus 10 s (1 ms
    // of slack each way: the library's clock is Date.now() at load plus process.hrtime()).
    const bad = infos.filter((x) => !(x.resetMs >= t0 + WINDOW_MS - 1 && x.resetMs <= t1 + WINDOW_MS + 1
        && x.reset === Math.floor(x.resetMs / 1000)));
    check(`${name}: reset within [first call, last call] + 10 s`, bad.length === 0,
        JSON.stringify({ t0, t1, infos }));
    // Calls 1-5 all see the first call as the oldest; calls 6 and 7 a later one.
    check(`${name}: reset is the first call's until the window is full`,
        infos.slice(0, 5).every((x) => x.resetMs === infos[0].resetMs)
        && infos[5].resetMs >= infos[0].resetMs && infos[6].resetMs >= infos[5].resetMs,
        JSON.stringify(infos.map((x) => x.resetMs)));
    // ZREMRANGEBYRANK 0 -6 keeps the newest 5; PEXPIRE 10000.
    eq(`${name}: the set keeps 5 entries`, await db.zcard('limit:user-1'), MAX);
    const pttl = await db.pttl('limit:user-1');
    check(`${name}: PEXPIRE set the window`, pttl > 0 && pttl <= WINDOW_MS, `pttl ${pttl}`);
    const members = await db.zrange('limit:user-1', 0, -1, 'WITHSCORES');
    check(`${name}: members are the microsecond scores`,
        members.length === 10 && members.every((v, i) => i % 2 === 1 || v === members[i + 1])
        && members.every((v) => /^\d{16}$/.test(v)), JSON.stringify(members));
}

// rolling-rate-limiter 0.4.2 on ioredis: every call is recorded, the blocked ones too.
async function testRolling(t, db) {
    const limiter = new IORedisRateLimiter({
        client: db, namespace: 'rrl:', interval: WINDOW_MS, maxInInterval: MAX,
    });
    const t0 = Date.now();
    const infos = [];
    for (let i = 0; i < CALLS; i++) infos.push(await limiter.limitWithInfo('user-1'));
    const t1 = Date.now();
    const name = `${t}: rolling-rate-limiter`;
    if (t1 - t0 >= WINDOW_MS) {
        skip(`${name} counts`, `the calls took ${t1 - t0} ms, longer than the window`);
        return;
    }
    const blocked = infos.map((x) => x.blocked);
    eq(`${name}: 5 allowed, 2 denied`, [blocked.filter((b) => !b).length,
        blocked.filter((b) => b).length], [5, 2]);
    eq(`${name}: blocked from the 6th call`, blocked, [false, false, false, false, false, true, true]);
    eq(`${name}: blockedDueToCount`, infos.map((x) => x.blockedDueToCount), blocked);
    eq(`${name}: actionsRemaining`, infos.map((x) => x.actionsRemaining), [4, 3, 2, 1, 0, 0, 0]);
    // Until the 5th call nothing to wait for; from then on until the oldest of the last 5 leaves
    // the window: more than 0, at most 10 s, and no more than 10 s minus the time since t0.
    const wait = infos.map((x) => x.millisecondsUntilAllowed);
    check(`${name}: millisecondsUntilAllowed`, wait.slice(0, 4).every((w) => w === 0)
        && wait.slice(4).every((w) => w > 0 && w <= WINDOW_MS), JSON.stringify(wait));
    eq(`${name}: every call is in the set`, await db.zcard('rrl:user-1'), CALLS);
    const ttl = await db.ttl('rrl:user-1');
    check(`${name}: EXPIRE 10`, ttl > 0 && ttl <= WINDOW_MS / 1000, `ttl ${ttl}`);
    const would = await limiter.wouldLimitWithInfo('user-1');
    eq(`${name}: wouldLimit is blocked and records nothing`,
        [would.blocked, await db.zcard('rrl:user-1')], [true, CALLS]);
    await limiter.clear('user-1');
    eq(`${name}: clear() deletes the key`, await db.exists('rrl:user-1'), 0);
    const again = await limiter.limitWithInfo('user-1');
    eq(`${name}: allowed again after clear()`, [again.blocked, again.actionsRemaining],
        [false, MAX - 1]);
}

// A server's error: EXECABORT carries the queueing errors (e.g. unknown command 'zadd').
function describe(e) {
    if (e && e.name === 'ReplyError') {
        const prev = (e.previousErrors || []).map((x) => x.message);
        return `${e.message}${prev.length ? ` [${[...new Set(prev)].join('; ')}]` : ''}`;
    }
    return e && e.stack;
}

async function main() {
    for (const t of TARGETS) {
        if (t !== 'rlimitd' && t !== 'redis') {
            console.error(`TARGET: rlimitd and/or redis, not '${t}'`);
            process.exit(2);
        }
        let s;
        let db;
        try {
            s = await startServer(t);
            db = client(s.port);
            await db.connect();
            for (const [name, fn] of [['ratelimiter', testRatelimiter],
                ['rolling-rate-limiter', testRolling]]) {
                try {
                    await fn(t, db);
                } catch (e) {
                    check(`${t}: ${name}`, false, describe(e));
                }
            }
        } catch (e) {
            check(`${t}: server`, false, e.stack);
        } finally {
            if (db) db.disconnect();
            if (s) await stopServer(s);
        }
    }
    finish();
}

main();
