import { expect } from 'chai';
import type { Knex } from 'knex';
import { SchemaBehind } from '../../common/errors.js';
import { createKnex } from '../../db/connection.js';
import { assertSchemaCurrent, migrateLatest, schemaStatus } from '../../db/migrate.js';
import { migrations } from '../../db/migrations/index.js';
import { emptyDatabase, type TestDatabase, suiteDatabase } from '../helpers/database.js';

const allNames = migrations.map((m) => m.name);

async function appliedNames(db: TestDatabase): Promise<string[]> {
  const rows = (await db.knex('knex_migrations').select('name').orderBy('id')) as Array<{ name: string }>;
  return rows.map((r) => r.name);
}

describe('migrations', () => {
  describe('on an empty database', () => {
    const db = suiteDatabase({ empty: true });

    it('applies every migration, in order', async () => {
      expect(await migrateLatest(db.knex)).to.deep.equal(allNames);
      expect(await appliedNames(db)).to.deep.equal(allNames);
    });

    it('second migration does no harm', async () => {
      expect(await migrateLatest(db.knex)).to.deep.equal([]);
      expect(await appliedNames(db)).to.deep.equal(allNames);
    });
  });

  describe('concurrent installs', () => {
    let db: TestDatabase;
    let other: Knex | undefined;
    before(async () => {
      db = await emptyDatabase();
    });
    after(async () => {
      await other?.destroy();
      await db.drop();
    });

    it('both succeed and the schema is migrated once', async () => {
      // Two pools stand in for two processes starting at the same moment.
      other = createKnex(db.url, { poolMax: 2 });
      const results = await Promise.all([migrateLatest(db.knex), migrateLatest(other)]);
      expect([...results].sort((a, b) => b.length - a.length)).to.deep.equal([allNames, []]);
      expect(await appliedNames(db)).to.deep.equal(allNames);
    });
  });

  it('migrates through a pool of a single connection', async () => {
    const db = await emptyDatabase();
    const single = createKnex(db.url, { poolMax: 1 });
    try {
      expect(await migrateLatest(single)).to.deep.equal(allNames);
    } finally {
      await single.destroy();
      await db.drop();
    }
  });

  describe('assertSchemaCurrent', () => {
    const db = suiteDatabase({ empty: true });

    it('throws SchemaBehind naming the pending migrations on an unmigrated database', async () => {
      const err = await assertSchemaCurrent(db.knex).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(SchemaBehind);
      expect((err as Error).message).to.contain(allNames[0]).and.to.contain('galvanic db upgrade');
    });

    it('reports without creating the bookkeeping tables', async () => {
      expect(await schemaStatus(db.knex)).to.deep.equal({ current: false, pending: allNames });
      expect(await db.knex.schema.hasTable('knex_migrations')).to.equal(false);
    });

    it('passes once migrated', async () => {
      await migrateLatest(db.knex);
      await assertSchemaCurrent(db.knex);
      expect(await schemaStatus(db.knex)).to.deep.equal({ current: true, pending: [] });
    });
  });
});
