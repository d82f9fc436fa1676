/** Mocha root hooks (loaded with --require): one database server and template per run. */
import { setUpTestDatabases, tearDownTestDatabases } from './database.js';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context): Promise<void> {
    // initdb plus the first migration can exceed a short per-test timeout.
    this.timeout(120_000);
    await setUpTestDatabases();
  },
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(60_000);
    await tearDownTestDatabases();
  },
};
