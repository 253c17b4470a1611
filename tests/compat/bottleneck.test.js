#!/usr/bin/env node
// Bottleneck 2.19.5 (npm's most downloaded job scheduler/limiter) in its Redis cluster mode on
// ioredis, unchanged, against rlimitd and against redis-server (issue 30).
//
//   node tests/compat/bottleneck.test.js                 # both servers (what run.sh does)
//   TARGET=redis node tests/compat/bottleneck.test.js    # redis-server only: proves the test
//   TARGET=rlimitd RLIMITD=build/rlimitd node tests/compat/bottleneck.test.js
//
// How Bottleneck coordinates (read from node_modules/bottleneck/lib): each limiter instance keeps
// a second ioredis connection SUBSCRIBEd to "b_<id>"; its Lua scripts (EVALSHA of register,
// free, submit, ...) hold the shared state in hashes and sorted sets and, when capacity frees,
// call redis.call('publish', 'b_<id>', 'capacity...') from inside the script; the instance
// that receives the message starts its next queued job. limiter.publish() sends user messages
// the same way (PUBLISH), received as the 'message' event of every instance.
// Two instances share one limiter with maxConcurrent 2 and 12 jobs each: every job must run,
// never more than 2 at once across both instances (the jobs run in this process, so the count
// is exact), and the second instance's jobs must start only when the first's free capacity
// (the capacity messages: on a server without Pub/Sub its ready() rejects and nothing runs).
'use strict';

const {
    need, check, eq, finish, startServer, stopServer, within,
} = require('./harness');

const TARGETS = (process.env.TARGET || 'rlimitd redis').split(/[ ,]+/).filter(Boolean);
const Bottleneck = need('bottleneck');
need('ioredis');

const JOBS = 12;
const MAX_CONCURRENT = 2;

async function testTarget(target) {
    const srv = await startServer(target);
    const opts = {
        id: `compat-bn-${target}`,
        datastore: 'ioredis',
        clientOptions: { host: '127.0.0.1', port: srv.port, maxRetriesPerRequest: 0 },
        maxConcurrent: MAX_CONCURRENT,
        minTime: 0,
        clearDatastore: true,
        timeout: 60000,
    };
    const a = new Bottleneck(opts);
    const b = new Bottleneck({ ...opts, clearDatastore: false });
    const errors = [];
    a.on('error', (e) => errors.push(String(e)));
    b.on('error', (e) => errors.push(String(e)));
    try {
        await within(30000, Promise.all([a.ready(), b.ready()]), `${target}: ready`);
        check(`${target}: both instances ready (their subscriber connections subscribed)`, true);

        // User messages through PUBLISH reach the other instance (and the sender's own).
        const got = new Promise((resolve) => b.on('message', resolve));
        await a.publish('hello from a');
        eq(`${target}: limiter.publish reaches the other instance`,
            await within(10000, got, `${target}: message`), 'hello from a');

        let running = 0;
        let most = 0;
        const started = { a: 0, b: 0 };
        const job = (who) => async () => {
            running++;
            started[who]++;
            most = Math.max(most, running);
            await new Promise((r) => setTimeout(r, 20));
            running--;
            return who;
        };
        const all = [];
        for (let i = 0; i < JOBS; i++) {
            all.push(a.schedule(job('a')));
            all.push(b.schedule(job('b')));
        }
        const results = await within(60000, Promise.all(all), `${target}: jobs`);
        eq(`${target}: every job ran once`, [results.length, started.a, started.b],
            [2 * JOBS, JOBS, JOBS]);
        check(`${target}: never more than ${MAX_CONCURRENT} jobs at once across both instances`,
            most <= MAX_CONCURRENT && most >= 1, `at most ${most} ran at once`);
        const counts = await a.running();
        eq(`${target}: nothing left running in the shared state`, counts, 0);
        const done = await a.done();
        eq(`${target}: the shared state counts every job done`, done, 2 * JOBS);
        eq(`${target}: no error events`, errors, []);
    } catch (e) {
        check(`${target}: Bottleneck cluster run`, false, e.stack || String(e));
    } finally {
        await Promise.allSettled([a.disconnect(false), b.disconnect(false)]);
        const ex = await stopServer(srv);
        eq(`${target}: the server exits cleanly`, ex, { code: 0, sig: null });
    }
}

(async () => {
    for (const t of TARGETS)
        await testTarget(t);
    finish();
})();
