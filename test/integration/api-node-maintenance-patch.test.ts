/**
 * Maintenance set by `PATCH /v1/nodes/{n}` (`replace /maintenance`), as Ironic accepts it from
 * clients that predate the maintenance endpoint: the same rule as `PUT|DELETE .../maintenance`
 * (leaving clears maintenance_reason and fault; entering bumps access_epoch unless
 * [console] maintenance_closes_console is off), and /maintenance_reason still read-only.
 */
import { expect } from 'chai';
import type { LightMyRequestResponse } from 'fastify';
import { createNode, faultOf, type TestApp, suiteApp } from '../helpers/app.js';

type Row = Record<string, unknown>;

function patch(t: TestApp, ident: string, ops: unknown[], version = 'latest'): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'PATCH', url: `/v1/nodes/${ident}`, payload: ops as object,
    headers: { 'x-openstack-ironic-api-version': version },
  });
}

async function rowOf(t: TestApp, uuid: string): Promise<Row> {
  const row = await t.tdb.knex('nodes').where({ uuid }).first('maintenance', 'maintenance_reason', 'fault', 'version', 'access_epoch', 'protected');
  return { ...row, version: Number(row.version), access_epoch: Number(row.access_epoch) };
}

describe('nodes API: maintenance by PATCH', function () {
  // No conductor: what the PATCH wrote is all there is to see.
  const t = suiteApp({ conductor: false, clear: ['nodes'] });

  it('replace /maintenance true puts the node in maintenance (no reason) and bumps access_epoch', async () => {
    const uuid = (await createNode(t, { name: 'm1' })).uuid;
    const before = await rowOf(t, uuid);
    const res = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: true }]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json()).to.include({ maintenance: true, maintenance_reason: null });
    expect(await rowOf(t, uuid)).to.deep.include({
      maintenance: true, maintenance_reason: null, version: before.version as number + 1, access_epoch: before.access_epoch as number + 1,
    });
  });

  it('accepts the value as a string, as Ironic does ("True"), at the oldest version too', async () => {
    const uuid = (await createNode(t, { name: 'm2' })).uuid;
    const res = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: 'True' }], '1.1');
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json()).to.include({ maintenance: true });
    expect((await rowOf(t, uuid)).maintenance).to.equal(true);
  });

  it('keeps an existing reason when maintenance is already on, and writes nothing', async () => {
    const uuid = (await createNode(t, { name: 'm3' })).uuid;
    await t.tdb.knex('nodes').where({ uuid }).update({ maintenance: true, maintenance_reason: 'disk swap' });
    const before = await rowOf(t, uuid);
    const res = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: true }]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json()).to.include({ maintenance: true, maintenance_reason: 'disk swap' });
    expect(await rowOf(t, uuid)).to.deep.equal(before);
  });

  it('replace /maintenance false clears maintenance_reason and fault, without bumping access_epoch', async () => {
    const uuid = (await createNode(t, { name: 'm4' })).uuid;
    await t.tdb.knex('nodes').where({ uuid }).update({ maintenance: true, maintenance_reason: 'power lost', fault: 'power failure' });
    const before = await rowOf(t, uuid);
    const res = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: false }]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json()).to.include({ maintenance: false, maintenance_reason: null, fault: null });
    expect(await rowOf(t, uuid)).to.deep.include({
      maintenance: false, maintenance_reason: null, fault: null, version: before.version as number + 1, access_epoch: before.access_epoch,
    });
  });

  it('remove /maintenance takes the node out of maintenance', async () => {
    const uuid = (await createNode(t, { name: 'm5' })).uuid;
    await t.tdb.knex('nodes').where({ uuid }).update({ maintenance: true, maintenance_reason: 'r' });
    const res = await patch(t, uuid, [{ op: 'remove', path: '/maintenance' }]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(await rowOf(t, uuid)).to.deep.include({ maintenance: false, maintenance_reason: null });
  });

  it('lets a deployed node be protected and put in maintenance in one PATCH; it then refuses deletion (403)', async () => {
    const uuid = (await createNode(t, { name: 'm6' })).uuid;
    await t.tdb.knex('nodes').where({ uuid }).update({ provision_state: 'active' });
    const res = await patch(t, uuid, [
      { op: 'replace', path: '/protected', value: true }, { op: 'replace', path: '/maintenance', value: true },
    ]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(res.json()).to.include({ protected: true, maintenance: true });
    const del = await t.app.inject({ method: 'DELETE', url: `/v1/nodes/${uuid}`, headers: { 'x-openstack-ironic-api-version': 'latest' } });
    expect(del.statusCode, del.body).to.equal(403);
    expect(await t.tdb.knex('nodes').where({ uuid }).first('id')).to.not.equal(undefined);
  });

  it('refuses /maintenance_reason and a non-boolean /maintenance with 400 and changes nothing', async () => {
    const uuid = (await createNode(t, { name: 'm7' })).uuid;
    const before = await rowOf(t, uuid);
    const reason = await patch(t, uuid, [
      { op: 'replace', path: '/maintenance', value: true }, { op: 'add', path: '/maintenance_reason', value: 'why' },
    ]);
    expect(reason.statusCode, reason.body).to.equal(400);
    expect(faultOf(reason.body).faultstring).to.include("'/maintenance_reason' is an internal attribute and can not be updated");
    const bad = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: 'sometimes' }]);
    expect(bad.statusCode, bad.body).to.equal(400);
    expect(await rowOf(t, uuid)).to.deep.equal(before);
  });
});

describe('nodes API: maintenance by PATCH with [console] maintenance_closes_console = false', function () {
  const t = suiteApp({ env: { GALVANIC_CONSOLE__MAINTENANCE_CLOSES_CONSOLE: 'false' }, conductor: false });

  it('enters maintenance without bumping access_epoch', async () => {
    const uuid = (await createNode(t, { name: 'keep-console' })).uuid;
    const before = await rowOf(t, uuid);
    const res = await patch(t, uuid, [{ op: 'replace', path: '/maintenance', value: true }]);
    expect(res.statusCode, res.body).to.equal(200);
    expect(await rowOf(t, uuid)).to.deep.include({ maintenance: true, version: before.version as number + 1, access_epoch: before.access_epoch });
  });
});
