#!/usr/bin/env node
// The official npm `redis` client, current major (6.x), with its default settings: it opens
// every connection with HELLO 3 and reads RESP3 (issue 29). The checks ioredis.test.js makes
// (connect, CL.THROTTLE, ISALLOWED, a ReplyError's text, MULTI/EXEC, a pipeline, INFO, SCAN, the
// client name, requirepass), then the replies whose RESP3 type differs from RESP2 (maps, doubles,
// nested pairs, nulls, verbatim text) as the client decodes them, against rlimitd and against
// redis-server 7.0 in the same run: the two must decode to the same values.
'use strict';

const {
    check, eq, finish, within, startServer, stopServer,
} = require('./harness');

const { createClient } = require('./harness').need('redis');

// A client with the defaults except: no reconnects (a refused connection must end the test),
// errors collected in .errors.
function nodeClient(port, opts = {}) {
    const c = createClient({
        socket: { port, host: '127.0.0.1', reconnectStrategy: false, connectTimeout: 10000 },
        ...opts,
    });
    c.errors = [];
    c.on('error', (e) => c.errors.push(e));
    return c;
}

// What the client decodes for the replies whose shape RESP3 changes; JSON so Maps and
// typed values compare as plain data.
async function resp3Shapes(c) {
    await c.del(['nr:h', 'nr:z', 'nr:l', 'nr:s']);
    await c.hSet('nr:h', { a: '1', b: '2' });
    await c.zAdd('nr:z', [{ score: 1.5, value: 'm1' }, { score: 2, value: 'm2' }]);
    await c.rPush('nr:l', ['x', 'y']);
    const out = {};
    out.hGetAll = await c.hGetAll('nr:h');
    out.zScore = await c.zScore('nr:z', 'm1');
    out.zScoreMissing = await c.zScore('nr:z', 'nope');
    out.zIncrBy = await c.zIncrBy('nr:z', 0.25, 'm1');
    out.zRangeWithScores = await c.zRangeWithScores('nr:z', 0, -1);
    out.zPopMinCount = await c.zPopMinCount('nr:z', 1);
    out.zmScore = await c.zmScore('nr:z', ['m2', 'nope']);
    out.get = await c.get('nr:absent');
    out.lPop = await c.lPop('nr:l');
    out.lRange = await c.lRange('nr:l', 0, -1);
    out.configGet = await c.configGet('maxmemory');
    out.ttl = await c.ttl('nr:h');
    out.exists = await c.exists(['nr:h', 'nr:absent']);
    out.eval = await c.eval("return {1, 'two', {3}}", { keys: [], arguments: [] });
    out.evalNull = await c.eval('return nil', { keys: [], arguments: [] });
    out.evalDouble = await c.eval("redis.setresp(3); return redis.call('zscore', KEYS[1], 'm2')",
        { keys: ['nr:z'], arguments: [] });
    return JSON.parse(JSON.stringify(out));
}

async function testBasics(port, target) {
    const r = nodeClient(port);
    await within(10000, r.connect(), 'connect');
    eq(`${target}: connect: isReady`, r.isReady, true);
    const info = String(await r.sendCommand(['CLIENT', 'INFO']));
    check(`${target}: default connection is RESP3 (CLIENT INFO resp=3)`, /\bresp=3\b/.test(info),
        info);
    if (target === 'rlimitd') {
        // Redis 7.0 has no CLIENT SETINFO (7.2 added it); the client ignores its error there.
        check('CLIENT INFO lib-name is node-redis (CLIENT SETINFO)',
            /\blib-name=node-redis\b/.test(info), info);
        eq("sendCommand(['CL.THROTTLE', ...])",
            await r.sendCommand(['CL.THROTTLE', 'nr:user', '15', '30', '60', '1']),
            [0, 16, 15, -1, 2]);
        eq("sendCommand(['ISALLOWED', ...])",
            await r.sendCommand(['ISALLOWED', 'nr', 'login', '60', '1']), 1);
        try {
            await r.sendCommand(['CL.THROTTLE', 'nr:user', '1']);
            check('arity error rejects', false, 'resolved');
        } catch (e) {
            eq('arity error: the server\'s error text', [e.constructor.name, e.message],
                ['SimpleError', "ERR wrong number of arguments for 'cl.throttle' command"]);
        }
        eq('multi().exec(): MULTI/EXEC',
            await r.multi().addCommand(['CL.THROTTLE', 'nr:tx', '15', '30', '60'])
                .incr('nr:window').expire('nr:window', 60, 'NX').exec(),
            [[0, 16, 15, -1, 2], 1, 1]);
        eq('multi().execAsPipeline()',
            await r.multi().addCommand(['CL.THROTTLE', 'nr:pl', '15', '30', '60'])
                .incr('nr:window').execAsPipeline(), [[0, 16, 15, -1, 2], 2]);
    }
    const fields = Object.fromEntries(String(await r.info()).split('\r\n')
        .filter((l) => l.includes(':')).map((l) => l.split(/:(.*)/s).slice(0, 2)));
    eq(`${target}: info(): loading:0`, fields.loading, '0');
    eq(`${target}: info(): tcp_port`, fields.tcp_port, String(port));

    for (let i = 0; i < 50; i++) await r.set(`nr:scan:${i}`, String(i));
    const keys = [];
    for await (const batch of r.scanIterator({ MATCH: 'nr:scan:*', COUNT: 10 })) {
        keys.push(...(Array.isArray(batch) ? batch : [batch]));
    }
    eq(`${target}: scanIterator(): every key once`, [keys.length, new Set(keys).size], [50, 50]);
    const shapes = await resp3Shapes(r);
    r.destroy();
    eq(`${target}: no error events`, r.errors.map((e) => e.message), []);

    const named = nodeClient(port, { name: 'nr-app' });
    await within(10000, named.connect(), 'connect');
    eq(`${target}: name: HELLO 3 SETNAME on connect`, await named.clientGetName(), 'nr-app');
    named.destroy();
    return shapes;
}

async function testPassword() {
    const d = await startServer('rlimitd', ['--requirepass', 'nr secret']);
    try {
        const ok = nodeClient(d.port, { password: 'nr secret' });
        await within(10000, ok.connect(), 'connect');
        eq('requirepass: HELLO 3 AUTH default <pass> connects', ok.isReady, true);
        eq('requirepass: CL.THROTTLE',
            await ok.sendCommand(['CL.THROTTLE', 'nr:pw', '15', '30', '60']), [0, 16, 15, -1, 2]);
        ok.destroy();
        for (const [label, pw, text] of [
            ['with a wrong password', 'nope',
                'WRONGPASS invalid username-password pair or user is disabled.']]) {
            const bad = nodeClient(d.port, { password: pw });
            let rejected = null;
            try {
                await within(10000, bad.connect(), 'connect');
            } catch (e) {
                rejected = e;
            }
            check(`requirepass ${label}: connect() rejects with the server's error`,
                rejected !== null && String(rejected.message).includes(text),
                rejected && rejected.message);
            try { bad.destroy(); } catch (e) { /* already closed */ }
        }
    } finally {
        eq('requirepass daemon exits 0 on SIGTERM', await stopServer(d), { code: 0, sig: null });
    }
}

async function main() {
    const shapes = {};
    for (const target of ['redis', 'rlimitd']) {
        let d;
        try {
            d = await startServer(target);
            shapes[target] = await testBasics(d.port, target);
        } catch (e) {
            check(`${target}: basics`, false, e.stack);
        } finally {
            if (d) {
                eq(`${target} exits 0 on SIGTERM`, await stopServer(d), { code: 0, sig: null });
            }
        }
    }
    if (shapes.redis && shapes.rlimitd) {
        for (const k of Object.keys(shapes.redis)) {
            eq(`RESP3 decoded as redis-server's: ${k}`, shapes.rlimitd[k], shapes.redis[k]);
        }
        // The checks above must be able to fail: RESP3 types reached the client.
        eq('redis-server: zScore decodes to a number (RESP3 double)', typeof shapes.redis.zScore,
            'number');
    }
    try {
        await testPassword();
    } catch (e) {
        check('password', false, e.stack);
    }
    finish();
}

main();
