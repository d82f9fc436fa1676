/**
 * Inspection and a full deploy/undeploy through the API and the conductor, against every
 * recorded mockup tree and every vendor quirk profile of the Redfish simulator, over HTTP.
 * A tree that cannot do what a step needs (no NIC, no virtual media) must end the node in
 * the step's failure state with a last_error that says why, never leave it in transition.
 */
import { expect } from 'chai';
import path from 'node:path';
import { startRedfishSim, QUIRK_NAMES, type RedfishSim } from '../../sim/redfish/index.js';
import { suiteApp } from '../helpers/app.js';
import { MOCKUPS, mockupTreesOrPending } from '../helpers/mockups.js';
import {
  clearSimEvents, createNode, expectInOrder, injector, insertedMedia, nodeHistory, nodePorts, provisionAndSettle, redfishNodeBody,
  simEvents, simState, story, type ApiCall, type NodeView,
} from '../helpers/provisioning.js';

const ISO = 'http://images.example/live.iso';

/** What a tree yields: inspection and deploy outcomes, and the error each failure must name. */
interface TreeOutcome {
  inspect: 'manageable' | 'inspect failed';
  inspectError?: RegExp;
  ports?: number;
  deploy: 'active' | 'deploy failed';
  deployError?: RegExp;
}

const TREES: Record<string, TreeOutcome> = {
  // Virtual media on the system, no actions: ejected and inserted by PATCH.
  'dmtf-public-rackmount1': { inspect: 'manageable', ports: 3, deploy: 'active' },
  // Managers/1/VirtualMedia/2 (CD) with InsertMedia/EjectMedia.
  'hpe-dl325-gen10plus-ilo5': { inspect: 'manageable', ports: 2, deploy: 'active' },
  // An empty EthernetInterfaces collection, and an empty VirtualMedia collection.
  'intel-bmc': {
    inspect: 'inspect failed', inspectError: /^Failed to inspect hardware of node \S+: Inventory for node \S+ is invalid: no valid network interfaces$/,
    deploy: 'deploy failed', deployError: /^Failed to deploy node \S+: .*(virtual media|VirtualMedia).*/i,
  },
  // No NIC and no virtual media at all.
  'openbmc-bmcweb': {
    inspect: 'inspect failed', inspectError: /no valid network interfaces$/,
    deploy: 'deploy failed', deployError: /^Failed to deploy node \S+: No suitable virtual media device found for node \S+ to mount image http:\/\/images\.example\/live\.iso/,
  },
};

describe('provisioning against every BMC flavour (conductor, simulator over HTTP)', function () {
  this.timeout(60_000);
  const t = suiteApp({
    env: {
      GALVANIC_REDFISH__CONNECTION_ATTEMPTS: '2',
      GALVANIC_REDFISH__CONNECTION_RETRY_INTERVAL: '0.1',
      GALVANIC_REDFISH__REQUEST_TIMEOUT: '30',
      GALVANIC_CONDUCTOR__INTENT_RETRY_INITIAL_DELAY: '0.1',
      GALVANIC_CONDUCTOR__INTENT_RETRY_MAX_DELAY: '0.2',
      // Power sync would race the assertions on the simulator's event log.
      GALVANIC_CONDUCTOR__SYNC_POWER_STATE_INTERVAL: '0',
    },
  });
  let api: ApiCall;

  before(() => {
    api = injector(t.app);
  });

  /** manage → inspect; then (from either outcome) manage → provide → deploy [→ rebuild] → undeploy. */
  async function fullFlow(name: string, bmcUrl: string, rebuild = false): Promise<{ inspected: NodeView; deployed: NodeView; undeployed?: NodeView; ports: string[] }> {
    const node = await createNode(api, redfishNodeBody(name, bmcUrl));
    const managed = await provisionAndSettle(api, node.uuid, 'manage');
    expect(managed.provision_state, managed.last_error ?? '').to.equal('manageable');
    const inspected = await provisionAndSettle(api, node.uuid, 'inspect');
    const ports = await nodePorts(api, node.uuid);
    if (inspected.provision_state === 'inspect failed') {
      expect((await provisionAndSettle(api, node.uuid, 'manage')).provision_state).to.equal('manageable');
    }
    const available = await provisionAndSettle(api, node.uuid, 'provide');
    expect(available.provision_state, available.last_error ?? '').to.equal('available');
    const patched = await api('PATCH', `/v1/nodes/${node.uuid}`, [{ op: 'add', path: '/instance_info/boot_iso', value: ISO }]);
    expect(patched.status, patched.body).to.equal(200);
    await clearSimEvents(bmcUrl);
    const deployed = await provisionAndSettle(api, node.uuid, 'active');
    if (deployed.provision_state !== 'active') return { inspected, deployed, ports };
    if (rebuild) {
      // Eject, then insert again at once: what the sticky and eject-in-progress quirks are about.
      const rebuilt = await provisionAndSettle(api, node.uuid, 'rebuild');
      expect(rebuilt.provision_state, rebuilt.last_error ?? '').to.equal('active');
    }
    const undeployed = await provisionAndSettle(api, node.uuid, 'deleted');
    return { inspected, deployed, undeployed, ports };
  }

  describe('the recorded mockup trees', () => {
    const trees = mockupTreesOrPending();
    if (!trees.length) return;
    it('knows what every tree must yield', () => {
      expect(trees).to.have.members(Object.keys(TREES));
    });
    for (const tree of trees) {
      it(`${tree}: inspects and deploys, or fails each step with a clear last_error`, async () => {
        const want = TREES[tree];
        const sim: RedfishSim = await startRedfishSim({ count: 1, mockup: path.join(MOCKUPS, tree) });
        try {
          const url = sim.bmcs[0].url;
          const r = await fullFlow(`mockup-${tree}`, url);
          expect(r.inspected.provision_state, r.inspected.last_error ?? '').to.equal(want.inspect);
          if (want.inspect === 'manageable') {
            expect(r.inspected.last_error).to.equal(null);
            expect(r.inspected.properties).to.include.keys('memory_mb', 'local_gb', 'cpu_arch');
            expect(r.ports).to.have.length(want.ports!);
          } else {
            expect(r.inspected.last_error).to.match(want.inspectError!);
            expect(r.ports).to.deep.equal([]);
          }
          expect(r.deployed.provision_state, r.deployed.last_error ?? '').to.equal(want.deploy);
          expect(r.deployed.target_provision_state).to.equal(null);
          const lines = story(await simEvents(url));
          if (want.deploy === 'active') {
            expect(r.deployed.last_error).to.equal(null);
            expect(r.deployed.power_state).to.equal('power on');
            expectInOrder(lines, [/^insert live\.iso$/, /^boot-override (Usb)?Cd\//, /^reset On$/]);
            expect(r.undeployed!.provision_state, r.undeployed!.last_error ?? '').to.equal('available');
            expect(r.undeployed!.power_state).to.equal('power off');
            expect(r.undeployed!.instance_info).to.deep.equal({});
            const state = await simState(url);
            expect(insertedMedia(state).filter((m) => m.endsWith(ISO))).to.deep.equal([]);
            expect(Object.values(state.systems).map((s) => s.power)).to.include('Off');
          } else {
            expect(r.deployed.last_error).to.match(want.deployError!);
            expect(r.deployed.deploy_step).to.deep.equal({});
            expect(lines.filter((l) => l.startsWith('insert'))).to.deep.equal([]);
            // The history keeps the reason the last_error gives.
            const reason = r.deployed.last_error!.replace(/^Failed to deploy node \S+: /, '');
            const history = await nodeHistory(api, r.deployed.uuid);
            expect(history.some((h) => h.severity === 'ERROR' && h.event.includes(reason)), JSON.stringify(history)).to.equal(true);
          }
        } finally {
          await sim.stop();
        }
      });
    }
  });

  describe('the synthetic BMC under each vendor quirk profile', () => {
    // Short timed quirks: the driver waits them out, the test should not take long. An iDRAC
    // boots the virtual CD through the standard override from firmware 6 on (test/integration/
    // idrac.test.ts has the older ones, which redfish-virtual-media refuses).
    const profile = (q: string) => (q === 'sticky-inserted' || q === 'eject-in-progress' ? `${q}=1` : q === 'idrac' ? 'idrac=6' : q);
    const profiles = [[], ...QUIRK_NAMES.map((q) => [profile(q)])];
    let sim: RedfishSim | undefined;
    afterEach(async () => {
      await sim?.stop();
      sim = undefined;
    });
    for (const quirks of profiles) {
      const label = quirks.length ? quirks.join(',') : 'no quirk';
      it(`${label}: inspects, deploys from the virtual CD and undeploys`, async () => {
        sim = await startRedfishSim({ count: 1, vmediaQuirks: quirks, fleetId: 1 + profiles.indexOf(quirks) });
        const url = sim.bmcs[0].url;
        const r = await fullFlow(`quirk-${label.replace(/[^a-z0-9]+/gi, '-')}`, url, true);
        expect(r.inspected.provision_state, r.inspected.last_error ?? '').to.equal('manageable');
        expect(r.ports).to.have.length(2);
        expect(r.deployed.provision_state, r.deployed.last_error ?? '').to.equal('active');
        const lines = story(await simEvents(url));
        const boot = [/^insert live\.iso$/, /^boot-override (Usb)?Cd\/(Continuous|Once)$/, /^reset On$/, /^boot-started (Usb)?Cd live\.iso$/];
        // Deploy, then rebuild (power off, eject, insert again, boot), then undeploy's eject.
        expectInOrder(lines, [...boot, /^reset ForceOff$/, /^eject live\.iso$/, ...boot, /^eject live\.iso$/]);
        expect(r.undeployed!.provision_state, r.undeployed!.last_error ?? '').to.equal('available');
        expect(r.undeployed!.power_state).to.equal('power off');
        expect(r.undeployed!.instance_info).to.deep.equal({});
        const state = await simState(url);
        expect(insertedMedia(state)).to.deep.equal([]);
        expect(Object.values(state.systems).map((s) => s.power)).to.deep.equal(['Off']);
      });
    }
  });
});
