/**
 * PeriodicRunner: iterations of one task never overlap, statistics, bounded shutdown, starting
 * some tasks before the others, and the validation of task declarations.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { pino } from 'pino';
import { PeriodicRunner, type PeriodicTask } from '../../conductor/periodic.js';

const log = pino({ level: 'silent' });

/** A promise and its resolver, to hold an iteration open. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => { open = resolve; });
  return { promise, open };
}

/** A task whose iterations wait for `open()`, counting calls and how many ran at once. */
function gatedTask(name: string, extra: Partial<PeriodicTask> = {}): { task: PeriodicTask; open: () => void; calls: () => number; maxActive: () => number } {
  const g = gate();
  let active = 0;
  let maxActive = 0;
  let calls = 0;
  const task: PeriodicTask = {
    name,
    spacingSeconds: 60,
    ...extra,
    run: async () => {
      calls++;
      active++;
      maxActive = Math.max(maxActive, active);
      await g.promise;
      active--;
    },
  };
  return { task, open: g.open, calls: () => calls, maxActive: () => maxActive };
}

describe('PeriodicRunner', () => {
  const runners: PeriodicRunner[] = [];
  function runner(): PeriodicRunner {
    const r = new PeriodicRunner(log);
    runners.push(r);
    return r;
  }

  afterEach(async () => {
    for (const r of runners.splice(0)) await r.stop(100);
  });

  describe('overlap', () => {
    it('never starts an iteration while the previous one runs, and counts the overruns', async () => {
      const r = runner();
      const { task, open, calls, maxActive } = gatedTask('slow');
      r.register(task);
      const first = r.tick(task);
      expect(first).to.be.instanceOf(Promise);
      for (let i = 0; i < 4; i++) expect(r.tick(task)).to.equal(undefined);
      expect(calls()).to.equal(1);
      expect(r.stats.get('slow')).to.include({ overruns: 4, runs: 0 });
      open();
      await first;
      expect(r.stats.get('slow')).to.include({ overruns: 4, runs: 1 });
      // Once it ended, the next tick runs again.
      await r.tick(task);
      expect(calls()).to.equal(2);
      expect(maxActive()).to.equal(1);
    });

    it('runs a catchUp task once more right after an overrun, never two at a time', async () => {
      const r = runner();
      const { task, open, calls, maxActive } = gatedTask('catching-up', { catchUp: true });
      r.register(task);
      const first = r.tick(task);
      for (let i = 0; i < 3; i++) expect(r.tick(task)).to.equal(undefined);
      expect(calls()).to.equal(1);
      open();
      await first;
      await sleep(20);
      // The three missed ticks make one iteration, started when the first one ended.
      expect(calls()).to.equal(2);
      expect(r.stats.get('catching-up')).to.include({ overruns: 3, runs: 2 });
      expect(maxActive()).to.equal(1);
    });

    it('keeps one iteration at a time when scheduled faster than the task runs', async () => {
      const r = runner();
      let active = 0;
      let maxActive = 0;
      r.register({
        name: 'fast-schedule',
        spacingSeconds: 0.02,
        runAtStart: true,
        run: async () => {
          active++;
          maxActive = Math.max(maxActive, active);
          await sleep(150);
          active--;
        },
      });
      r.start();
      await sleep(400);
      await r.stop(1000);
      const stats = r.stats.get('fast-schedule')!;
      expect(maxActive).to.equal(1);
      expect(stats.runs).to.be.at.least(1).and.at.most(3);
      expect(stats.overruns).to.be.at.least(1);
    });

    it('keeps overlap separate per task: another task runs meanwhile', async () => {
      const r = runner();
      const g = gate();
      const a: PeriodicTask = { name: 'a', spacingSeconds: 60, run: () => g.promise };
      let bRuns = 0;
      const b: PeriodicTask = { name: 'b', spacingSeconds: 60, run: async () => { bRuns++; } };
      r.register(a);
      r.register(b);
      const pa = r.tick(a);
      await r.tick(b);
      expect(bRuns).to.equal(1);
      expect(r.stats.get('b')!.overruns).to.equal(0);
      g.open();
      await pa;
    });
  });

  describe('statistics', () => {
    it('records runs, duration, nodes and errors of each iteration', async () => {
      const r = runner();
      let report: { nodes?: number; errors?: number } | undefined = { nodes: 5, errors: 2 };
      const task: PeriodicTask = {
        name: 'counted',
        spacingSeconds: 60,
        run: async () => {
          await sleep(40);
          return report;
        },
      };
      r.register(task);
      expect(r.stats.get('counted')).to.deep.equal({ runs: 0, overruns: 0, failures: 0, lastDurationMs: 0, lastNodes: 0, lastErrors: 0 });
      await r.tick(task);
      const stats = r.stats.get('counted')!;
      expect(stats).to.include({ runs: 1, failures: 0, lastNodes: 5, lastErrors: 2 });
      expect(stats.lastDurationMs).to.be.at.least(35).and.below(2000);
      report = undefined;
      await r.tick(task);
      expect(r.stats.get('counted')).to.include({ runs: 2, lastNodes: 0, lastErrors: 0 });
    });

    it('counts a thrown iteration as a failure and keeps running the task', async () => {
      const r = runner();
      let fail = true;
      const task: PeriodicTask = {
        name: 'flaky',
        spacingSeconds: 60,
        run: async () => {
          if (fail) throw new Error('database away');
          return { nodes: 1 };
        },
      };
      r.register(task);
      await r.tick(task);
      expect(r.stats.get('flaky')).to.include({ runs: 1, failures: 1 });
      fail = false;
      await r.tick(task);
      expect(r.stats.get('flaky')).to.include({ runs: 2, failures: 1, lastNodes: 1 });
    });
  });

  describe('stop', () => {
    it('aborts the signal and waits for the running iteration to end', async () => {
      const r = runner();
      let seen: AbortSignal | undefined;
      let finished = false;
      const task: PeriodicTask = {
        name: 'abortable',
        spacingSeconds: 60,
        run: (signal) => new Promise<void>((resolve) => {
          seen = signal;
          signal.addEventListener('abort', () => setTimeout(() => {
            finished = true;
            resolve();
          }, 50));
        }),
      };
      r.register(task);
      void r.tick(task);
      expect(seen!.aborted).to.equal(false);
      await r.stop(5000);
      expect(seen!.aborted).to.equal(true);
      expect(finished).to.equal(true);
      expect(r.stats.get('abortable')!.runs).to.equal(1);
    });

    it('waits no longer than its timeout for an iteration that ignores the signal', async () => {
      const r = runner();
      const g = gate();
      const task: PeriodicTask = { name: 'stubborn', spacingSeconds: 60, run: () => g.promise };
      r.register(task);
      void r.tick(task);
      const started = Date.now();
      await r.stop(200);
      const took = Date.now() - started;
      expect(took).to.be.at.least(150).and.below(1500);
      g.open();
    });

    it('schedules nothing more once stopped', async () => {
      const r = runner();
      let runs = 0;
      const task: PeriodicTask = { name: 'ticker', spacingSeconds: 0.02, runAtStart: true, run: async () => { runs++; } };
      r.register(task);
      r.start();
      await sleep(100);
      await r.stop(1000);
      const atStop = runs;
      expect(atStop).to.be.at.least(1);
      await sleep(100);
      expect(runs).to.equal(atStop);
      expect(r.tick(task)).to.equal(undefined);
    });
  });

  describe('start', () => {
    it('starts the named tasks first and the others on a later start, each once', async () => {
      const r = runner();
      const runs = { early: 0, late: 0 };
      for (const name of ['early', 'late'] as const) {
        r.register({ name, spacingSeconds: 60, runAtStart: true, run: async () => { runs[name]++; } });
      }
      r.start(['early']);
      await sleep(20);
      expect(runs).to.deep.equal({ early: 1, late: 0 });
      r.start();
      await sleep(20);
      expect(runs).to.deep.equal({ early: 1, late: 1 });
    });
  });

  describe('declarations', () => {
    const run = async () => undefined;

    it('accepts a valid cron expression and refuses an invalid one', () => {
      const r = runner();
      expect(() => r.register({ name: 'every-5s', cron: '*/5 * * * * *', run })).to.not.throw();
      expect(() => r.register({ name: 'hourly', cron: '0 * * * *', run })).to.not.throw();
      expect(() => r.register({ name: 'bad', cron: 'every tuesday', run })).to.throw(/invalid cron expression/);
      expect(() => r.register({ name: 'bad-minute', cron: '61 * * * *', run })).to.throw(/invalid cron expression/);
      expect(r.stats.has('bad')).to.equal(false);
    });

    it('needs exactly one of spacingSeconds and cron', () => {
      const r = runner();
      expect(() => r.register({ name: 'both', spacingSeconds: 10, cron: '* * * * *', run })).to.throw(/exactly one/);
      expect(() => r.register({ name: 'neither', run })).to.throw(/exactly one/);
      expect(r.stats.size).to.equal(0);
    });

    it('runs a cron task at start when asked, and on its schedule', async () => {
      const r = runner();
      let runs = 0;
      r.register({ name: 'each-second', cron: '* * * * * *', runAtStart: true, run: async () => { runs++; } });
      r.start();
      // The run at start begins within start() itself, before any cron tick can come.
      expect(runs).to.equal(1);
      const deadline = Date.now() + 2500;
      while (runs < 2 && Date.now() < deadline) await sleep(20);
      expect(runs).to.be.at.least(2);
      await r.stop(1000);
    });
  });
});
