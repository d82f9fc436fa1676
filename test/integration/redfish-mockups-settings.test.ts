/**
 * The redfish BIOS and firmware interfaces' readings against every recorded mockup (real
 * vendors' Bios resources, attribute registries, managers): what the conductor caches at
 * inspection. The expectations are read from the recorded files themselves.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { UnsupportedDriverExtension } from '../../common/errors.js';
import { MOCKUPS, mockupTreesOrPending } from '../helpers/mockups.js';
import { ctxFor, rejection, simWithDriver } from '../helpers/redfish.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A recorded resource by its @odata.id, its path matched case-insensitively as iLO matches it. */
function recorded(tree: string, odataId: string): Json | null {
  let dir = path.join(MOCKUPS, tree);
  for (const part of odataId.replace(/^\/redfish\/v1\/?/, '').split('/').filter(Boolean)) {
    const match = existsSync(dir) ? readdirSync(dir).find((e) => e.toLowerCase() === part.toLowerCase()) : undefined;
    if (!match) return null;
    dir = path.join(dir, match);
  }
  const file = path.join(dir, 'index.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Json) : null;
}

function firstSystem(tree: string): Json {
  const systems = recorded(tree, '/redfish/v1/Systems') as Json;
  return recorded(tree, systems.Members[0]['@odata.id'] as string) as Json;
}

describe('redfish BIOS and firmware readings against recorded mockups', function () {
  this.timeout(30_000);
  for (const tree of mockupTreesOrPending()) {
    describe(tree, () => {
      const f = simWithDriver({ count: 1, mockup: path.join(MOCKUPS, tree) });
      const system = () => firstSystem(tree);

      it('reads the BIOS attributes the BMC records, or says it has none', async () => {
        const biosLink = system().Bios?.['@odata.id'] as string | undefined;
        const bios = biosLink ? recorded(tree, biosLink) : null;
        if (!bios) {
          expect(await rejection(f.driver.bios.readSettings(ctxFor(f.url)))).to.be.instanceOf(UnsupportedDriverExtension);
          return;
        }
        // A Bios without Attributes (OpenBMC) has no settings, as sushy reads it.
        const attributes = (bios.Attributes ?? {}) as Json;
        const settings = await f.driver.bios.readSettings(ctxFor(f.url));
        expect(settings.map((s) => s.name).sort()).to.deep.equal(Object.keys(attributes).sort());
        for (const s of settings) expect(s.value, s.name).to.equal(attributes[s.name] === null ? null : String(attributes[s.name]));
      });

      it('reads the BIOS and BMC versions the system and its manager record', async () => {
        const sys = system();
        const manager = recorded(tree, sys.Links.ManagedBy[0]['@odata.id'] as string);
        const expected: Array<{ component: string; currentVersion: string }> = [];
        if (sys.BiosVersion) expected.push({ component: 'bios', currentVersion: sys.BiosVersion as string });
        if (manager?.FirmwareVersion) expected.push({ component: 'bmc', currentVersion: manager.FirmwareVersion as string });
        if (!expected.length) {
          expect(await rejection(f.driver.firmware.readComponents(ctxFor(f.url)))).to.be.instanceOf(UnsupportedDriverExtension);
          return;
        }
        expect(await f.driver.firmware.readComponents(ctxFor(f.url))).to.deep.equal(expected);
      });
    });
  }
});
