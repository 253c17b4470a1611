// harness.js - what the node tests under tests/compat share: loading the npm packages run.sh
// installed, counting results, starting rlimitd or redis-server on a free port and stopping it,
// and an ioredis client that never retries (so a server error surfaces at once).
//
// Every wait is bounded. The servers are killed and their temporary directories (under
// os.tmpdir()) removed when node exits, also on SIGINT/SIGTERM/SIGHUP.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const RLIMITD = path.resolve(process.env.RLIMITD || path.join(ROOT, 'build-compat', 'rlimitd'));

// An npm package from tests/compat/node_modules, or exit 2 saying how to get it.
function need(name) {
    try {
        return require(require.resolve(name, { paths: [HERE] }));
    } catch (e) {
        console.error(`${name} is not installed: run tests/compat/run.sh (npm install --no-save)`);
        process.exit(2);
    }
}

// ---- results ----

const counts = { passed: 0, failed: 0, skipped: 0 };
function check(name, cond, detail) {
    if (cond) {
        counts.passed++;
        console.log(`ok     ${name}`);
    } else {
        counts.failed++;
        console.log(`FAIL   ${name}: ${detail === undefined ? '' : detail}`);
    }
}
function eq(name, got, want) {
    const g = JSON.stringify(got);
    const w = JSON.stringify(want);
    check(name, g === w, `got ${g}, want ${w}`);
}
function skip(name, why) {
    counts.skipped++;
    console.log(`skip   ${name}: ${why}`);
}
// Prints the summary line and exits 1 if anything failed.
function finish() {
    const s = counts.skipped ? `, ${counts.skipped} skipped` : '';
    console.log(`${counts.passed} passed, ${counts.failed} failed${s}`);
    process.exit(counts.failed ? 1 : 0);
}

// ---- servers ----

const live = new Set();
const tmpdirs = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
    for (const dir of tmpdirs) {
        try {
            fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
        } catch (e) {
            // best effort: never turn the exit into a crash
        }
    }
});
// A signal would end node without the 'exit' event: exit normally instead (128 + signal).
for (const [sig, num] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]]) {
    process.on(sig, () => process.exit(128 + num));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Bounded: rejects after ms.
function within(ms, promise, what) {
    let timer;
    const t = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    });
    return Promise.race([promise, t]).finally(() => clearTimeout(timer));
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

// target 'rlimitd' (the sample configuration, 2 I/O threads, snapshots off, plus args) or
// 'redis' (redis-server, persistence off), on a free port above 20000. Resolves to
// { port, proc, dir, exit() } where exit() is null while the server runs.
async function startServer(target, args = []) {
    let port;
    do {
        port = await freePort();
    } while (port <= 20000 || await canConnect(port));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `compat-${target}-`));
    tmpdirs.add(dir);
    let bin;
    let argv;
    if (target === 'rlimitd') {
        if (!fs.existsSync(RLIMITD)) throw new Error(`no rlimitd at ${RLIMITD} (set RLIMITD)`);
        bin = RLIMITD;
        argv = ['-c', path.join(ROOT, 'conf', 'rlimitd.conf'), '--port', String(port), '--bind',
            '127.0.0.1', '--dir', dir, '--threads', '2', '--save-interval', '0', ...args];
    } else if (target === 'redis') {
        bin = 'redis-server';
        argv = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
            '--dir', dir, ...args];
    } else {
        throw new Error(`target: rlimitd or redis, not '${target}'`);
    }
    const logPath = path.join(dir, 'server.log');
    const log = fs.openSync(logPath, 'w');
    const proc = spawn(bin, argv, { stdio: ['ignore', log, log], cwd: dir });
    live.add(proc);
    let exited = null;
    proc.on('exit', (code, sig) => { exited = { code, sig }; live.delete(proc); });
    proc.on('error', (e) => { exited = { error: e.message }; live.delete(proc); });
    for (let i = 0; i < 300 && exited === null; i++) {
        if (await canConnect(port)) return { port, proc, dir, exit: () => exited };
        await sleep(100);
    }
    proc.kill('SIGKILL');
    throw new Error(`${target} did not listen on ${port}: ${fs.readFileSync(logPath)}`);
}

// SIGTERM, then SIGKILL after 15 s; resolves to how the server exited ({ code, sig }).
async function stopServer(s) {
    if (s.exit() === null) {
        const done = new Promise((resolve) => {
            s.proc.on('exit', (code, sig) => resolve({ code, sig }));
        });
        s.proc.kill('SIGTERM');
        try {
            return await within(15000, done, 'SIGTERM');
        } catch (e) {
            s.proc.kill('SIGKILL');
            return { code: null, sig: 'SIGKILL' };
        }
    }
    return s.exit();
}

// An ioredis client that never retries and never queues while offline; its error events are
// collected in .errors.
function client(port, opts) {
    const Redis = need('ioredis');
    const r = new Redis({
        port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0,
        retryStrategy: () => null, enableOfflineQueue: false, connectTimeout: 10000, ...opts,
    });
    r.errors = [];
    r.on('error', (e) => r.errors.push(e));
    return r;
}

module.exports = {
    ROOT, RLIMITD, need, check, eq, skip, finish, counts, sleep, within, startServer, stopServer,
    client,
};
