import { expect } from 'chai';
import { lazyChild } from '../../common/logger.js';
import { captureLog } from '../helpers/log-capture.js';

/** A captured logger, and a count of the children made from it. */
function capture(debug = false) {
  const { log, lines } = captureLog(debug);
  let children = 0;
  // Children inherit this own property (pino makes them with Object.create): hence `this`.
  const child = log.child;
  log.child = function (this: typeof log, ...args: Parameters<typeof child>) {
    children++;
    return child.apply(this, args);
  } as typeof log.child;
  return { log, lines, children: () => children };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('lazyChild', () => {
  it('writes lines with the bindings, redacted, and makes the child once', async () => {
    const c = capture();
    const log = lazyChild(c.log, { node: 'n-1', driver_info: { password: 'secret' } });
    expect(c.children()).to.equal(0);
    log.info({ step: 1 }, 'first');
    log.warn({ step: 2, auth: { password: 'hunter2' } }, 'second');
    await flush();
    expect(c.children()).to.equal(1);
    expect(c.lines.map((l) => [l.msg, l.node, l.step])).to.deep.equal([['first', 'n-1', 1], ['second', 'n-1', 2]]);
    expect(JSON.stringify(c.lines)).to.not.include('secret').and.not.include('hunter2');
  });

  it('makes no child for work that logs nothing, or only at levels that are off', async () => {
    const c = capture(false);
    const log = lazyChild(c.log, { node: 'n-2' });
    log.debug('not written');
    log.trace({ x: 1 }, 'nor this');
    expect(log.level).to.equal('info');
    // Looking the methods up, as code that checks it was handed a logger does.
    for (const m of ['info', 'error', 'debug', 'fatal', 'warn', 'trace'] as const) expect(log[m]).to.be.a('function');
    await flush();
    expect(c.children()).to.equal(0);
    expect(c.lines).to.have.length(0);
  });

  it('hands out further children of the child', async () => {
    const c = capture(true);
    const log = lazyChild(c.log, { node: 'n-3' }).child({ driver: 'fake' });
    log.debug('deep');
    await flush();
    expect(c.lines[0]).to.include({ node: 'n-3', driver: 'fake', msg: 'deep' });
  });
});
