/**
 * Ironic's own API test suite (ironic-tempest-plugin's ironic_tempest_plugin.tests.api) against
 * `galvanic all-in-one` on a fresh database, at the highest microversion Galvanic advertises.
 * Enabled hardware types fake-hardware and redfish: the configuration OpenStack Ironic was
 * measured in, where it passes 228 and skips 7 (3 need Neutron, 4 the ipmi hardware type).
 *
 * Without tempest and ironic-tempest-plugin (Debian packages `tempest`, `ironic-tempest-plugin`)
 * the file is skipped; under CI=true that is a failure (`.ci/run` installs them).
 * TEMPEST_CONCURRENCY sets tempest's workers (default 1).
 */
import { expect } from 'chai';
import { startGalvanicOnFreshDatabase, type GalvanicOnFreshDatabase } from '../helpers/app.js';
import { findTempest, runTempest, type TempestRun } from './tempest/run.js';

/** What OpenStack Ironic passes in the same configuration. */
const IRONIC_PASSED = 228;

describe('e2e: Ironic\'s tempest API suite (ironic-tempest-plugin)', function () {
  // One run takes 1.5 to 3 minutes on two cores.
  this.timeout(900_000);
  let galvanic: GalvanicOnFreshDatabase | undefined;
  let result: TempestRun | undefined;

  before(async function () {
    const found = findTempest();
    if (typeof found === 'string') {
      if (process.env.CI === 'true') throw new Error(`${found}; CI must install it (apt-get install ironic-tempest-plugin, as .ci/run does).`);
      process.stderr.write(`      skipping the tempest API suite: ${found} (apt-get install ironic-tempest-plugin).\n`);
      this.skip();
    }
    galvanic = await startGalvanicOnFreshDatabase({
      env: { GALVANIC_DEFAULT__ENABLED_HARDWARE_TYPES: 'fake-hardware,redfish' },
    });
  });

  after(async () => {
    await galvanic?.shutdown();
  });

  it(`passes at Galvanic's highest microversion with no failure and at least ${IRONIC_PASSED} passed`, async function () {
    result = await runTempest({ target: galvanic!.url, concurrency: Number(process.env.TEMPEST_CONCURRENCY ?? 1), timeoutMs: 840_000 });
    const { summary } = result;
    const root = await (await fetch(`${galvanic!.url}/`)).json() as { default_version: { version: string } };
    expect(result.target.maxMicroversion, 'tempest ran at the advertised maximum').to.equal(root.default_version.version);
    const report = [
      summary.text,
      result.unhandled.length ? `keystone stub could not answer: ${result.unhandled.join(', ')}` : '',
      summary.failed ? `tempest stderr (tail):\n${result.stderr.slice(-3000)}\ngalvanic output (tail):\n${galvanic!.output().slice(-3000)}` : '',
    ].filter(Boolean).join('\n');
    process.stdout.write(`${report}\n`);
    expect(summary.failed, `failed tests:\n${summary.results.filter((r) => r.outcome === 'failed').map((r) => `${r.id}: ${r.reason}`).join('\n')}`).to.equal(0);
    expect(summary.passed, report).to.be.at.least(IRONIC_PASSED);
    const counted = summary.results.filter((r) => !r.id.startsWith('tearDownClass ')).length;
    expect(counted, 'every selected test counted').to.equal(result.selected);
  });
});
