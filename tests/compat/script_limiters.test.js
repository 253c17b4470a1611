#!/usr/bin/env node
// script_limiters.test.js - the npm rate limiters that ship Lua scripts, unchanged, against the
// real rlimitd and, as the reference, against redis-server (issue 16):
//   rate-limiter-flexible: RateLimiterRedis on ioredis (EVALSHA, EVAL on NOSCRIPT)
//   rate-limit-redis: RedisStore (SCRIPT LOAD + EVALSHA), driven through its store API the way
//     express-rate-limit drives it (init, then increment per request).
// Each: 5 points per 10 s, 7 requests: exactly 5 allowed, 2 denied; then SCRIPT FLUSH, and the
// library must recover by itself (reload on NOSCRIPT).
//
// The packages are installed by run.sh into tests/compat/node_modules (npm install --no-save).
'use strict';

const {
    need, check, finish, startServer, stopServer, client,
} = require('./harness');

const { RateLimiterRedis, RateLimiterRes } = need('rate-limiter-flexible');
const { RedisStore } = need('rate-limit-redis');

async function flexible(kind, port) {
    const redis = client(port);
    await redis.connect();
    const limiter = new RateLimiterRedis({
        storeClient: redis, keyPrefix: 'rlflx', points: 5, duration: 10,
        insuranceLimiter: undefined, // no fallback: a server error must fail the test
    });
    const run = async (key) => {
        let allowed = 0;
        let denied = 0;
        const errors = [];
        for (let i = 0; i < 7; i++) {
            try {
                const res = await limiter.consume(key);
                if (res.consumedPoints === i + 1) allowed++;
            } catch (e) {
                if (e instanceof RateLimiterRes) {
                    if (e.msBeforeNext > 0 && e.msBeforeNext <= 10000) denied++;
                } else {
                    errors.push(String(e));
                }
            }
        }
        return { allowed, denied, errors };
    };
    let r = await run('user-1');
    check(`${kind}: rate-limiter-flexible 5 allowed, 2 denied`,
        r.allowed === 5 && r.denied === 2 && r.errors.length === 0, JSON.stringify(r));
    await redis.call('SCRIPT', 'FLUSH');
    r = await run('user-2');
    check(`${kind}: rate-limiter-flexible after SCRIPT FLUSH`,
        r.allowed === 5 && r.denied === 2 && r.errors.length === 0, JSON.stringify(r));
    const got = await limiter.get('user-1');
    check(`${kind}: rate-limiter-flexible get`, got !== null && got.consumedPoints === 7,
        JSON.stringify(got));
    redis.disconnect();
}

async function rateLimitRedis(kind, port) {
    const redis = client(port);
    await redis.connect();
    const store = new RedisStore({ sendCommand: (...args) => redis.call(...args), prefix: 'rl:' });
    await store.init({ windowMs: 10000 });
    const run = async (key) => {
        let allowed = 0;
        let denied = 0;
        const errors = [];
        for (let i = 0; i < 7; i++) {
            try {
                const { totalHits, resetTime } = await store.increment(key);
                const ms = resetTime.getTime() - Date.now();
                if (totalHits !== i + 1 || ms <= 0 || ms > 10000) {
                    errors.push(`hit ${i}: ${totalHits} ${ms}`);
                } else if (totalHits <= 5) {
                    allowed++;
                } else {
                    denied++;
                }
            } catch (e) {
                errors.push(String(e));
            }
        }
        return { allowed, denied, errors };
    };
    let r = await run('10.0.0.1');
    check(`${kind}: rate-limit-redis 5 allowed, 2 denied`,
        r.allowed === 5 && r.denied === 2 && r.errors.length === 0, JSON.stringify(r));
    const info = await store.get('10.0.0.1');
    check(`${kind}: rate-limit-redis get`, info.totalHits === 7, JSON.stringify(info));
    await redis.call('SCRIPT', 'FLUSH');
    r = await run('10.0.0.2');
    check(`${kind}: rate-limit-redis after SCRIPT FLUSH`,
        r.allowed === 5 && r.denied === 2 && r.errors.length === 0, JSON.stringify(r));
    await store.decrement('10.0.0.2');
    const after = await store.get('10.0.0.2');
    check(`${kind}: rate-limit-redis decrement`, after.totalHits === 6, JSON.stringify(after));
    await store.resetKey('10.0.0.2');
    const gone = await store.get('10.0.0.2');
    // A missing key reads as GET's nil: the library's toInt makes that NaN, on both servers.
    check(`${kind}: rate-limit-redis resetKey`, Number.isNaN(gone.totalHits),
        JSON.stringify(gone));
    redis.disconnect();
}

async function main() {
    for (const kind of ['rlimitd', 'redis']) {
        let srv;
        try {
            srv = await startServer(kind);
            await flexible(kind, srv.port);
            await rateLimitRedis(kind, srv.port);
        } catch (e) {
            check(`${kind}: ran`, false, e.stack);
        } finally {
            if (srv) await stopServer(srv);
        }
    }
    finish();
}

main();
