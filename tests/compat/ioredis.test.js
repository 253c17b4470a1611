#!/usr/bin/env node
// ioredis (npm) against the real rlimitd (issue 4).
//
// ioredis is installed by run.sh into tests/compat/node_modules; harness.js starts the daemons.
'use strict';

const {
    check, eq, finish, within, startServer, stopServer, client,
} = require('./harness');

require('./harness').need('ioredis');

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
    const d = await startServer('rlimitd', ['--requirepass', 'io secret']);
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
        const st = await stopServer(d);
        eq('requirepass daemon exits 0 on SIGTERM', st, { code: 0, sig: null });
    }
}

async function main() {
    let d;
    try {
        d = await startServer('rlimitd');
        await testBasics(d.port);
    } catch (e) {
        check('basics', false, e.stack);
    } finally {
        if (d) eq('daemon exits 0 on SIGTERM', await stopServer(d), { code: 0, sig: null });
    }
    try {
        await testPassword();
    } catch (e) {
        check('password', false, e.stack);
    }
    finish();
}

main();
