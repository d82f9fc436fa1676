/**
 * Deploy templates through `app.inject()` on a real database: CRUD by UUID or name, Ironic's
 * step validation, list fields and paging, JSON patch rules and the 1.55 gate.
 */
import { expect } from 'chai';
import { expectFault, inject, type InjectOptions, suiteApp } from '../helpers/app.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
type Obj = Record<string, unknown>;

const STEP = { interface: 'bios', step: 'apply_configuration', args: { settings: [{ name: 'LogicalProc', value: 'Enabled' }] }, priority: 150 };

describe('deploy templates API', function () {
  const t = suiteApp({ conductor: false, clear: ['deploy_templates'] });

  const call = (method: Method, url: string, opts: InjectOptions = {}) => inject(t, method, url, { ...opts, version: opts.version ?? '1.55' });
  const json = async (method: Method, url: string, opts: InjectOptions = {}): Promise<Obj> => {
    const res = await call(method, url, opts);
    expect(res.statusCode, res.body).to.be.within(200, 299);
    return JSON.parse(res.body) as Obj;
  };
  const count = async () => Number((await t.tdb.knex('deploy_templates').count('* as n').first())?.n);

  it('creates, shows by UUID or name, and deletes a template', async () => {
    const uuid = '1d2c3b4a-0000-4000-8000-00000000d00d';
    const res = await call('POST', '/v1/deploy_templates', { body: { name: 'CUSTOM_HYPERTHREADING_ON', steps: [{ ...STEP, priority: '150' }], uuid } });
    expect(res.statusCode, res.body).to.equal(201);
    expect(res.headers.location).to.match(new RegExp(`/v1/deploy_templates/${uuid}$`));
    const created = JSON.parse(res.body) as Obj;
    expect(created).to.include({ uuid, name: 'CUSTOM_HYPERTHREADING_ON' });
    expect(created.steps).to.deep.equal([STEP]);
    expect(created.extra).to.deep.equal({});
    expect(created.links).to.have.length(2);
    expect(await json('GET', '/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON')).to.deep.equal(await json('GET', `/v1/deploy_templates/${uuid}`));
    expect((await call('DELETE', '/v1/deploy_templates/CUSTOM_HYPERTHREADING_ON')).statusCode).to.equal(204);
    expectFault(await call('GET', `/v1/deploy_templates/${uuid}`), 404, `Deploy template ${uuid} could not be found.`);
  });

  it('refuses invalid templates with 400, duplicates with 409, and writes nothing', async () => {
    const bad: Array<[Obj, string]> = [
      [{ name: 'not_a_trait', steps: [STEP] }, 'name'],
      [{ steps: [STEP] }, "'name' is a required property"],
      [{ name: 'CUSTOM_A' }, "'steps' is a required property"],
      [{ name: 'CUSTOM_A', steps: [] }, 'should be non-empty'],
      [{ name: 'CUSTOM_A', steps: [{ ...STEP, interface: 'network' }] }, 'is not one of'],
      [{ name: 'CUSTOM_A', steps: [{ ...STEP, step: '' }] }, 'steps'],
      [{ name: 'CUSTOM_A', steps: [{ ...STEP, args: [] }] }, 'steps'],
      [{ name: 'CUSTOM_A', steps: [{ ...STEP, priority: -1 }] }, 'steps'],
      [{ name: 'CUSTOM_A', steps: [{ interface: 'bios', step: 'x', args: {} }] }, "'priority' is a required property"],
      [{ name: 'CUSTOM_A', steps: [{ ...STEP, colour: 1 }] }, "'colour' was unexpected"],
      [{ name: 'CUSTOM_A', steps: [STEP, { ...STEP, priority: 10 }] }, 'Duplicate deploy steps. A template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: bios, step: apply_configuration'],
      [{ name: 'CUSTOM_A', steps: [STEP], uuid: 'nope' }, 'uuid'],
      [{ name: 'CUSTOM_A', steps: [STEP], extra: [] }, 'extra'],
    ];
    for (const [body, message] of bad) expectFault(await call('POST', '/v1/deploy_templates', { body }), 400, message);
    expect(await count()).to.equal(0);
    await json('POST', '/v1/deploy_templates', { body: { name: 'CUSTOM_A', steps: [STEP] } });
    expectFault(await call('POST', '/v1/deploy_templates', { body: { name: 'CUSTOM_A', steps: [STEP] } }), 409, 'A deploy template with name CUSTOM_A already exists.');
  });

  it('lists uuid and name by default, everything with detail, fields on request, in pages', async () => {
    for (const name of ['CUSTOM_A', 'CUSTOM_B', 'CUSTOM_C']) await json('POST', '/v1/deploy_templates', { body: { name, steps: [STEP] } });
    const list = await json('GET', '/v1/deploy_templates');
    expect(Object.keys((list.deploy_templates as Obj[])[0])).to.deep.equal(['uuid', 'name', 'links']);
    const detail = await json('GET', '/v1/deploy_templates/detail');
    expect((detail.deploy_templates as Obj[])[0].steps).to.deep.equal([STEP]);
    expect(((await json('GET', '/v1/deploy_templates?detail=true')).deploy_templates as Obj[])[0]).to.have.property('steps');
    expect(Object.keys(((await json('GET', '/v1/deploy_templates?fields=steps')).deploy_templates as Obj[])[0])).to.deep.equal(['steps', 'uuid', 'links']);
    const page = await json('GET', '/v1/deploy_templates?limit=2');
    expect(page.deploy_templates).to.have.length(2);
    const last = (page.deploy_templates as Obj[])[1].uuid as string;
    expect(page.next).to.include(`marker=${last}`);
    const rest = await json('GET', `/v1/deploy_templates?limit=2&marker=${last}`);
    expect((rest.deploy_templates as Obj[]).map((x) => x.name)).to.deep.equal(['CUSTOM_C']);
    expect(rest).to.not.have.property('next');
    expectFault(await call('GET', '/v1/deploy_templates?sort_key=steps'), 400, 'invalid field for sorting');
    expectFault(await call('GET', '/v1/deploy_templates?detail=true&fields=name'), 400);
  });

  it('patches name, steps and extra, validating the result as a whole', async () => {
    await json('POST', '/v1/deploy_templates', { body: { name: 'CUSTOM_A', steps: [STEP] } });
    const step2 = { interface: 'raid', step: 'create_configuration', args: {}, priority: 10 };
    const patched = await json('PATCH', '/v1/deploy_templates/CUSTOM_A', { body: [
      { op: 'replace', path: '/name', value: 'CUSTOM_B' },
      { op: 'add', path: '/steps/-', value: step2 },
      { op: 'add', path: '/extra/k', value: 'v' },
    ] });
    expect(patched).to.include({ name: 'CUSTOM_B' });
    expect(patched.steps).to.deep.equal([STEP, step2]);
    expect(patched.extra).to.deep.equal({ k: 'v' });
    expectFault(await call('PATCH', '/v1/deploy_templates/CUSTOM_B', { body: [{ op: 'remove', path: '/steps' }] }), 400, "'steps' is a required property");
    expectFault(await call('PATCH', '/v1/deploy_templates/CUSTOM_B', { body: [{ op: 'remove', path: '/name' }] }), 400, "'name' is a required property");
    expectFault(await call('PATCH', '/v1/deploy_templates/CUSTOM_B', { body: [{ op: 'replace', path: '/name', value: '' }] }), 400);
    expectFault(await call('PATCH', '/v1/deploy_templates/CUSTOM_B', { body: [{ op: 'add', path: '/steps/-', value: { ...step2, priority: 1 } }] }), 400, 'Duplicate deploy steps');
    expectFault(await call('PATCH', '/v1/deploy_templates/CUSTOM_B', { body: [{ op: 'replace', path: '/uuid', value: '1d2c3b4a-0000-4000-8000-00000000d00d' }] }), 400, 'Cannot patch /uuid');
    expect((await json('GET', '/v1/deploy_templates/CUSTOM_B')).steps).to.deep.equal([STEP, step2]);
  });

  it('masks secrets in step arguments', async () => {
    const t1 = await json('POST', '/v1/deploy_templates', { body: { name: 'CUSTOM_S', steps: [{ ...STEP, args: { password: 'hunter2', user: 'u' } }] } });
    expect((t1.steps as Obj[])[0].args).to.deep.equal({ password: '******', user: 'u' });
  });

  it('is gated at 1.55: reads 404, writes 405', async () => {
    expect((await call('GET', '/v1/deploy_templates', { version: '1.54' })).statusCode).to.equal(404);
    expect((await call('POST', '/v1/deploy_templates', { version: '1.54', body: { name: 'CUSTOM_A', steps: [STEP] } })).statusCode).to.equal(405);
    expect((await call('DELETE', '/v1/deploy_templates/CUSTOM_A', { version: '1.54' })).statusCode).to.equal(405);
    expect(await count()).to.equal(0);
  });
});
