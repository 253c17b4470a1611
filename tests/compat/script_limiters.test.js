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

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const RLIMITD = process.env.RLIMITD || path.join(ROOT, 'build-compat', 'rlimitd');

function need(name) {
    try {
        return require(require.resolve(name, { paths: [HERE] }));
    } catch (e) {
        console.error(`${name} is not installed: run tests/compat/run.sh`);
        process.exit(2);
    }
}
const Redis = need('ioredis');
const { RateLimiterRedis, RateLimiterRes } = need('rate-limiter-flexible');
const { RedisStore } = need('rate-limit-redis');

let passed = 0;
let failed = 0;
function check(name, cond, detail) {
    if (cond) {
        passed++;
        console.log(`ok     ${name}`);
    } else {
        failed++;
        console.log(`FAIL   ${name}: ${detail === undefined ? '' : detail}`);
    }
}

const live = new Set();
const tmpdirs = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
    for (const dir of tmpdirs) {
        try {
            fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
        } catch (e) {
            // best effort
        }
    }
});
for (const [sig, num] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]]) {
    process.on(sig, () => process.exit(128 + num));
}

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

function canConnect(port) {
    return new Promise((resolve) => {
        const sock = net.connect({ port, host: '127.0.0.1' });
        sock.on('connect', () => { sock.destroy(); resolve(true); });
        sock.on('error', () => resolve(false));
    });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startServer(kind) {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `script-limiters-${kind}-`));
    tmpdirs.add(dir);
    const log = fs.openSync(path.join(dir, 'log'), 'w');
    const args = kind === 'rlimitd'
        ? [RLIMITD, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
            '--threads', '2']]
        : ['redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
            '--save', '', '--appendonly', 'no']];
    const proc = spawn(args[0], args[1], { stdio: ['ignore', log, log], cwd: dir });
    live.add(proc);
    let exited = false;
    proc.on('exit', () => { exited = true; live.delete(proc); });
    for (let i = 0; i < 150 && !exited; i++) {
        if (await canConnect(port)) return { port, proc };
        await sleep(100);
    }
    proc.kill('SIGKILL');
    throw new Error(`${kind} did not listen on ${port}`);
}

function client(port) {
    return new Redis({
        port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0,
        retryStrategy: () => null, enableOfflineQueue: false, connectTimeout: 10000,
    });
}

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
    for (const kind of ['rlimitd', 'redis-server']) {
        let srv;
        try {
            srv = await startServer(kind);
            await flexible(kind, srv.port);
            await rateLimitRedis(kind, srv.port);
        } catch (e) {
            check(`${kind}: ran`, false, e.stack);
        } finally {
            if (srv) srv.proc.kill('SIGTERM');
        }
    }
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}

main();
