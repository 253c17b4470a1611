#!/usr/bin/env node
// ioredis (npm) against the real rlimitd (issue 4).
//
// ioredis is installed by run.sh into tests/compat/node_modules (npm install --no-save ioredis),
// which git ignores. Every wait is bounded; the daemons are killed and their temporary
// directories (under os.tmpdir(), i.e. $TMPDIR) removed on exit, also on SIGINT/SIGTERM/SIGHUP.
'use strict';

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const HERE = __dirname;
const ROOT = path.resolve(HERE, '..', '..');
const RLIMITD = process.env.RLIMITD || path.join(ROOT, 'build-compat', 'rlimitd');

let Redis;
try {
    Redis = require(require.resolve('ioredis', { paths: [HERE] }));
} catch (e) {
    console.error('ioredis is not installed: run tests/compat/run.sh '
        + '(npm install --no-save ioredis)');
    process.exit(2);
}

// ---- results ----

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
function eq(name, got, want) {
    const g = JSON.stringify(got);
    const w = JSON.stringify(want);
    check(name, g === w, `got ${g}, want ${w}`);
}

// ---- daemons ----

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

// Bounded: rejects after ms.
function within(ms, promise, what) {
    let timer;
    const t = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    });
    return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

async function startDaemon(...args) {
    if (!fs.existsSync(RLIMITD)) throw new Error(`no rlimitd at ${RLIMITD} (set RLIMITD)`);
    const port = await freePort();
    if (port <= 20000) throw new Error(`port ${port} is not above 20000`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlimitd-ioredis-'));
    tmpdirs.add(dir); // removed on exit
    const log = fs.openSync(path.join(dir, 'rlimitd.log'), 'w');
    const proc = spawn(RLIMITD, ['-c', path.join(ROOT, 'conf', 'rlimitd.conf'), '--port',
        String(port), '--bind', '127.0.0.1', '--dir', dir, '--threads', '2', ...args],
    { stdio: ['ignore', log, log], cwd: dir });
    live.add(proc);
    let exited = null;
    proc.on('exit', (code, sig) => { exited = { code, sig }; live.delete(proc); });
    for (let i = 0; i < 150 && exited === null; i++) {
        if (await canConnect(port)) return { port, proc, dir, exit: () => exited };
        await sleep(100);
    }
    proc.kill('SIGKILL');
    const text = fs.readFileSync(path.join(dir, 'rlimitd.log'));
    throw new Error(`rlimitd did not listen on ${port}: ${text}`);
}

async function stopDaemon(d) {
    if (d.exit() === null) {
        const done = new Promise((resolve) => {
            d.proc.on('exit', (code, sig) => resolve({ code, sig }));
        });
        d.proc.kill('SIGTERM');
        try {
            return await within(15000, done, 'SIGTERM');
        } catch (e) {
            d.proc.kill('SIGKILL');
            return { code: null, sig: 'SIGKILL' };
        }
    }
    return d.exit();
}

// A client that never retries and never queues while offline: a failure surfaces at once.
function client(port, opts) {
    const r = new Redis({
        port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0,
        retryStrategy: () => null, enableOfflineQueue: false, connectTimeout: 10000, ...opts,
    });
    r.errors = [];
    r.on('error', (e) => r.errors.push(e));
    return r;
}

function cmdstatCalls(info, name) {
    const m = info.match(new RegExp(`^cmdstat_${name.replace('.', '\\.')}:calls=(\\d+)`, 'm'));
    return m ? Number(m[1]) : 0;
}

// ---- tests ----

async function testBasics(port) {
    const r = client(port);
    await within(10000, r.connect(), 'connect');
    eq('connect: status is ready (INFO ready check passed)', r.status, 'ready');
    const info = await r.info('commandstats');
    check('connect: the ready check sent INFO', cmdstatCalls(info, 'info') >= 1, info);
    eq("call('CL.THROTTLE', ...)", await r.call('CL.THROTTLE', 'io:user', 15, 30, 60, 1),
        [0, 16, 15, -1, 2]);
    eq("call('CL.THROTTLE', ...) peek", await r.call('CL.THROTTLE', 'io:absent', 15, 30, 60, 0),
        [0, 16, 16, -1, 0]);
    eq("call('ISALLOWED', ...)", await r.call('ISALLOWED', 'io', 'login', 60, 1), 1);
    try {
        await r.call('CL.THROTTLE', 'io:user', 1);
        check('arity error rejects', false, 'resolved');
    } catch (e) {
        eq('arity error: ReplyError with Redis text', [e.name, e.message],
            ['ReplyError', "ERR wrong number of arguments for 'cl.throttle' command"]);
    }
    eq('multi().exec(): MULTI/EXEC', await r.multi().call('CL.THROTTLE', 'io:tx', 15, 30, 60)
        .incr('io:window').expire('io:window', 60, 'NX').exec(),
    [[null, [0, 16, 15, -1, 2]], [null, 1], [null, 1]]);
    eq('pipeline().exec()', await r.pipeline().call('CL.THROTTLE', 'io:pl', 15, 30, 60)
        .incr('io:window').exec(), [[null, [0, 16, 15, -1, 2]], [null, 2]]);
    const fields = Object.fromEntries((await r.info()).split('\r\n')
        .filter((l) => l.includes(':')).map((l) => l.split(/:(.*)/s).slice(0, 2)));
    eq('info(): loading:0', fields.loading, '0');
    eq('info(): tcp_port', fields.tcp_port, String(port));

    for (let i = 0; i < 50; i++) await r.set(`io:scan:${i}`, i);
    const keys = await new Promise((resolve, reject) => {
        const all = [];
        r.scanStream({ match: 'io:scan:*', count: 10 })
            .on('data', (batch) => all.push(...batch)).on('end', () => resolve(all))
            .on('error', reject);
    });
    eq('scanStream(): every key once', [keys.length, new Set(keys).size], [50, 50]);
    r.disconnect();
    eq('no error events', r.errors.map((e) => e.message), []);

    const named = client(port, { connectionName: 'io-app' });
    await within(10000, named.connect(), 'connect');
    eq('connectionName: CLIENT SETNAME on connect', await named.client('GETNAME'), 'io-app');
    const list = await named.client('LIST');
    check('CLIENT LIST: ioredis lib-name (CLIENT SETINFO)',
        /name=io-app .*lib-name=ioredis/.test(list), list);
    named.disconnect();
}

async function testPassword() {
    const d = await startDaemon('--requirepass', 'io secret');
    try {
        const ok = client(d.port, { password: 'io secret' });
        await within(10000, ok.connect(), 'connect');
        eq('requirepass: connects with password, ready', ok.status, 'ready');
        eq("requirepass: call('CL.THROTTLE', ...)",
            await ok.call('CL.THROTTLE', 'io:pw', 15, 30, 60), [0, 16, 15, -1, 2]);
        ok.disconnect();

        // Without a password (and with a wrong one) the ready check's INFO is refused: ioredis
        // reports the server's error and closes, as it does against Redis 7. No hang, no crash.
        for (const [label, pw, text] of [
            ['without password', undefined, 'NOAUTH Authentication required.'],
            ['with a wrong password', 'nope',
                'WRONGPASS invalid username-password pair or user is disabled.']]) {
            const bad = client(d.port, { password: pw });
            let rejected = null;
            try {
                await within(10000, bad.connect(), 'connect');
            } catch (e) {
                rejected = e;
            }
            check(`requirepass ${label}: connect() rejects`, rejected !== null, bad.status);
            eq(`requirepass ${label}: error event carries the server's reply`,
                bad.errors.map((e) => [e.name, e.message]), [['ReplyError', text]]);
            eq(`requirepass ${label}: client ends`, bad.status, 'end');
            bad.disconnect();
        }
    } finally {
        const st = await stopDaemon(d);
        eq('requirepass daemon exits 0 on SIGTERM', st, { code: 0, sig: null });
    }
}

async function main() {
    let d;
    try {
        d = await startDaemon();
        await testBasics(d.port);
    } catch (e) {
        check('basics', false, e.stack);
    } finally {
        if (d) eq('daemon exits 0 on SIGTERM', await stopDaemon(d), { code: 0, sig: null });
    }
    try {
        await testPassword();
    } catch (e) {
        check('password', false, e.stack);
    }
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}

main();
