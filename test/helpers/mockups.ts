/** Where the recorded Redfish mockup trees are: beside the checkout, or where GALVANIC_REDFISH_MOCKUPS says. */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

export const MOCKUPS = process.env.GALVANIC_REDFISH_MOCKUPS ?? path.resolve(ROOT, '../shared/redfish-mockups');

/** The names of the trees found, sorted; none when the folder is missing. */
export function mockupTrees(): string[] {
  if (!existsSync(MOCKUPS)) return [];
  return readdirSync(MOCKUPS, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(path.join(MOCKUPS, d.name, 'index.json')))
    .map((d) => d.name)
    .sort();
}

/**
 * mockupTrees, for a suite that runs once per tree: when none is found, a pending test in the
 * enclosing `describe` says where they go.
 */
export function mockupTreesOrPending(): string[] {
  const trees = mockupTrees();
  if (!trees.length) it(`needs the mockups in ${MOCKUPS} (or GALVANIC_REDFISH_MOCKUPS)`);
  return trees;
}
